package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

// natsFlags adds the flags every controller-facing command shares.
func natsFlags(fs *flag.FlagSet) (url *string, timeout *time.Duration) {
	def := os.Getenv("ROTA_NATS_URL")
	if def == "" {
		def = "nats://127.0.0.1:4222"
	}
	url = fs.String("nats", def, "controller's NATS URL (env ROTA_NATS_URL)")
	timeout = fs.Duration("timeout", 5*time.Second, "how long to wait for the controller")
	return url, timeout
}

// ask sends one request to the controller and decodes its reply.
func ask(ctx context.Context, url string, timeout time.Duration, subject string, req any, reply any) error {
	nc, err := nats.Connect(url, nats.Name("rota-cli"), nats.Timeout(timeout))
	if err != nil {
		return fmt.Errorf("cannot reach the controller's NATS at %s: %w", url, err)
	}
	defer nc.Close()
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, subject, b)
	if err != nil {
		return fmt.Errorf("controller did not answer on %s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, reply); err != nil {
		return fmt.Errorf("controller's answer on %s: %w", subject, err)
	}
	return nil
}
