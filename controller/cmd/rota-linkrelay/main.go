// Command rota-linkrelay is the WAN link between the two dev clusters of
// scripts/clusters (docs/multicluster.md): a TCP relay from the leaf
// port the other site dials to the accepting site's leaf listener, at a
// bandwidth set on the command line. scripts/clusters stops it to cut
// the link and restarts it to change its speed. A dev tool, not packaged.
//
//	rota-linkrelay --listen 127.0.0.1:22224 --to 127.0.0.1:22223 [--rate 1MB/s] [--delay 200ms]
//
// scripts/failopen-bench also puts it between the job_submit plugin and
// the controller's NATS, as a slow link (--delay).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/internal/netrelay"
)

func main() {
	listen := flag.String("listen", "", "host:port to listen on")
	to := flag.String("to", "", "host:port to relay to")
	rate := flag.String("rate", "", "bandwidth each way, e.g. 1MB/s or 100Mb/s (default unlimited)")
	delay := flag.Duration("delay", 0, "latency each way, added to every chunk relayed (default none)")
	flag.Parse()
	if *listen == "" || *to == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: rota-linkrelay --listen HOST:PORT --to HOST:PORT [--rate BANDWIDTH] [--delay DURATION]")
		os.Exit(2)
	}
	var bw float64
	if *rate != "" {
		var err error
		if bw, err = xcluster.ParseBandwidth(*rate); err != nil {
			fmt.Fprintf(os.Stderr, "rota-linkrelay: --rate: %v (want e.g. 1MB/s or 100Mb/s)\n", err)
			os.Exit(2)
		}
	}
	r, err := netrelay.Listen(*listen, *to, bw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-linkrelay: %v\n", err)
		os.Exit(1)
	}
	r.SetDelay(*delay)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	r.Close()
}
