package app

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// serveProfile serves Go's profiles (/debug/pprof/) on addr until ctx
// ends: off unless profile_listen names an address, as nats-server's
// prof_port, since a profile shows the process's internals. Its handlers
// read the running process and change nothing in Rota or Slurm. It is
// how the controller's own CPU in a site-sized round was found
// (scripts/bench-scale, ROTA_SCALE_PROFILE).
func (c *Controller) serveProfile(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// No write timeout: a CPU profile answers after the seconds it asks.
	c.serveHTTP(ctx, ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, "profile server")
	return nil
}
