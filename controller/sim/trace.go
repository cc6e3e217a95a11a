package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/rota-hpc/rota/controller/policy/workload"
)

// ReadTrace reads jobs from CSV with the header
//
//	arrival_seconds,job_type,scale_factor,steps
//
// job_type and scale_factor name an entry of Gavel's throughput table
// (e.g. "ResNet-50 (batch size 64)",1); rows must be in arrival order.
func ReadTrace(r io.Reader, tab *workload.Table) ([]workload.Job, error) {
	cr := csv.NewReader(r)
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || len(rows[0]) < 4 || rows[0][0] != "arrival_seconds" {
		return nil, fmt.Errorf("trace: want header arrival_seconds,job_type,scale_factor,steps")
	}
	var jobs []workload.Job
	for i, row := range rows[1:] {
		at, e1 := strconv.ParseFloat(row[0], 64)
		sf, e2 := strconv.Atoi(row[2])
		steps, e3 := strconv.ParseFloat(row[3], 64)
		if e1 != nil || e2 != nil || e3 != nil || steps <= 0 {
			return nil, fmt.Errorf("trace line %d: bad number", i+2)
		}
		rates := tab.Rates(row[1], sf)
		if rates == nil {
			return nil, fmt.Errorf("trace line %d: no throughputs for (%q, %d)", i+2, row[1], sf)
		}
		if n := len(jobs); n > 0 && at < jobs[n-1].Arrival {
			return nil, fmt.Errorf("trace line %d: arrivals out of order", i+2)
		}
		jobs = append(jobs, workload.Job{ID: i, Type: row[1], Scale: sf, Steps: steps, Rates: rates, Arrival: at})
	}
	return jobs, nil
}
