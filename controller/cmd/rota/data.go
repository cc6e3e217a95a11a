package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/internal/conf"
)

// Where the rota-controller package puts what the commands read at run
// time (packaging/controller/nfpm.yaml; contrib/controller.conf names the
// same paths).
const (
	controllerConf        = "/etc/rota/controller.conf"
	throughputTableName   = "simulation_throughputs.json"
	installedDataDir      = "/usr/share/rota"
	throughputTableFlag   = "throughput-table"
	throughputTableSearch = "default: throughput_table of " + controllerConf + ", else " + installedDataDir + "/" + throughputTableName +
		", else a checkout's contrib/gavel/" + throughputTableName
)

// addThroughputTableFlag adds --throughput-table (and its old spelling
// --throughputs) to a command that reads Gavel's table.
func addThroughputTableFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, throughputTableFlag, "", "Gavel's throughput table ("+throughputTableName+"); "+throughputTableSearch)
	aliasFlag(cmd, "throughputs", throughputTableFlag)
}

// throughputTablePlaces are where the table is looked for when
// --throughput-table is not given, in order: the controller's
// throughput_table, the package's copy, a copy installed under the
// executable's prefix (/usr/local, /opt/rota), a checkout's copy beside
// bin/rota, and ../shared/data/gavel/ from the working directory (a
// developer's checkout; the old default).
func throughputTablePlaces(confPath, exe string) []string {
	var places []string
	if v, err := conf.ReadFile(confPath); err == nil {
		var p string
		v.String("throughput_table", &p)
		if p != "" {
			places = append(places, p)
		}
	}
	places = append(places, filepath.Join(installedDataDir, throughputTableName))
	if exe != "" {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		prefix := filepath.Dir(filepath.Dir(exe))
		places = append(places,
			filepath.Join(prefix, "share/rota", throughputTableName),
			filepath.Join(prefix, "contrib/gavel", throughputTableName))
	}
	dev := filepath.Join("..", "shared/data/gavel", throughputTableName)
	if abs, err := filepath.Abs(dev); err == nil {
		dev = abs
	}
	places = append(places, dev)
	// Once each, in order.
	seen := map[string]bool{}
	out := places[:0]
	for _, p := range places {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// findThroughputTable is the table to read: the flag's when given, else
// the first of places that exists. Its error says where it looked and
// which flag names the file.
func findThroughputTable(given string, places []string) (string, error) {
	if given != "" {
		return given, nil
	}
	for _, p := range places {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no throughput table (Gavel's %s): looked in %s; the rota-controller package installs it in %s, or give its path with --%s FILE",
		throughputTableName, strings.Join(places, ", "), installedDataDir, throughputTableFlag)
}

// throughputTable finds the table for --throughput-table's value.
func throughputTable(given string) (string, error) {
	exe, _ := os.Executable()
	return findThroughputTable(given, throughputTablePlaces(controllerConf, exe))
}
