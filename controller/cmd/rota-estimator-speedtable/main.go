// Command rota-estimator-speedtable is an example external throughput
// estimator for the Rota controller (docs/estimators.md, "External
// estimators"): it answers from a site's benchmark table of steps/s per
// job name and GPU type, kept as CSV. Name it in controller.conf:
//
//	estimator_throughput = /usr/libexec/rota/rota-estimator-speedtable --table /etc/rota/speeds.csv
//
// The controller launches it (a hashicorp/go-plugin plugin over gRPC);
// run by hand it says so and exits. A table that cannot be read stops it
// at start, with the reason on stderr (in the controller's debug log),
// and the controller's built-in estimator answers instead.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rota-hpc/rota/controller/estimate/external"
)

func main() {
	path := flag.String("table", "/etc/rota/speeds.csv", "CSV of job_name_pattern,gpu_type,steps_per_sec")
	flag.Parse()
	f, err := os.Open(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rota-estimator-speedtable:", err)
		os.Exit(1)
	}
	tab, err := ReadTable(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-estimator-speedtable: %s: %v\n", *path, err)
		os.Exit(1)
	}
	external.Serve(external.Estimators{Throughput: tab})
}
