package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/wire"
)

// natsConn is how a controller-facing command reaches the controller.
type natsConn struct {
	url, seed, ca string
	timeout       time.Duration
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// natsFlags adds the flags every controller-facing command shares.
func natsFlags(fs *pflag.FlagSet) *natsConn {
	c := &natsConn{}
	fs.StringVar(&c.url, "nats", envOr("ROTA_NATS_URL", "nats://127.0.0.1:4222"), "controller's NATS URL (env ROTA_NATS_URL)")
	fs.StringVar(&c.seed, "nkey-seed", os.Getenv("ROTA_NATS_NKEY_SEED"), "nkey seed file: cli.nk (read-only) or admin.nk from 'rota-controller creds init' (env ROTA_NATS_NKEY_SEED)")
	fs.StringVar(&c.ca, "tls-ca", os.Getenv("ROTA_NATS_TLS_CA"), "CA certificate (PEM) of the NATS server when it uses TLS (env ROTA_NATS_TLS_CA)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "how long to wait for the controller")
	return c
}

// ask sends one request to the controller and decodes its reply.
func ask(ctx context.Context, c *natsConn, subject string, req any, reply wire.Message) error {
	ao, err := auth.ClientOptions(c.seed, c.ca)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("no answer within %v (is the controller running?)", c.timeout))
	defer cancel()
	// A refused request is reported asynchronously; end the wait with it
	// rather than with a timeout that hides the reason.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	opts := append([]nats.Option{nats.Name("rota-cli"), nats.Timeout(c.timeout),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refuse(err) })}, ao...)
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			return fmt.Errorf("the controller's NATS at %s refused the credentials (%v); pass --nkey-seed with cli.nk or admin.nk", c.url, err)
		}
		return fmt.Errorf("cannot reach the controller's NATS at %s: %w", c.url, err)
	}
	defer nc.Close()
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	m, err := nc.RequestWithContext(ctx, subject, b)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			if auth.IsPermissionError(cause) {
				return fmt.Errorf("this credential may not ask on %s: %w", subject, cause)
			}
			return fmt.Errorf("controller did not answer on %s: %w", subject, cause)
		}
		return fmt.Errorf("controller did not answer on %s: %w", subject, err)
	}
	if err := wire.DecodeLimit(m.Data, reply, wire.MaxReplyBytes); err != nil {
		return fmt.Errorf("controller's answer on %s: %w", subject, err)
	}
	return nil
}
