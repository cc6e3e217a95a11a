package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/metrics"
)

// collectors are the controller's metrics, one collector per part
// (controller/metrics), the estimators' included.
func (c *Controller) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{c.inst,
		metrics.Decisions{Count: func() uint64 {
			if c.store == nil {
				return 0
			}
			return c.store.Count()
		}},
		metrics.Rounds{Loop: c.rounds.Load},
		metrics.Chains{Manager: c.chains.Load},
		metrics.Services{Manager: c.services.Load},
		metrics.MultiCluster{Manager: c.mc.Load},
	}
	if e, ok := c.estimator.(*live.Estimator); ok {
		cs = append(cs, e)
	}
	return cs
}

// serveMetrics serves /metrics on addr until ctx ends.
func (c *Controller) serveMetrics(ctx context.Context, addr string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.collectors()...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	c.serveHTTP(ctx, ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, "metrics server")
	return nil
}

// serveHTTP serves srv on ln until ctx ends, then shuts it down; what is
// the server's name in the log line if it stops on its own.
func (c *Controller) serveHTTP(ctx context.Context, ln net.Listener, srv *http.Server, what string) {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error().Err(err).Str("listen", ln.Addr().String()).Msg(what + " stopped")
		}
	}()
}
