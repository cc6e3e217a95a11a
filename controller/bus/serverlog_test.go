package bus

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// A server that cannot listen says why in the controller's log, and
// serverReady gives up at its limit.
func TestServerSaysWhyItDidNotStart(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: held.Addr().(*net.TCPAddr).Port, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	ns.SetLogger(serverLog{log: log}, false, false)
	go ns.Start()
	defer ns.Shutdown()
	if serverReady(ns, 500*time.Millisecond, log) {
		t.Fatal("a server whose port is taken said it was ready")
	}
	if out := buf.String(); !strings.Contains(out, "embedded NATS server: ") || !strings.Contains(out, "listen") {
		t.Fatalf("log: %s", out)
	}
}
