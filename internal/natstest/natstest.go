// Package natstest runs a real NATS server in-process for tests: on a
// random loopback port, logging off, restartable on the same port.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is one embedded nats-server.
type Server struct {
	t         testing.TB
	port      int
	jetstream bool
	storeDir  string
	configure func(*server.Options)
	s         *server.Server
}

// Start runs a server on a free port and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, port: -1}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// StartJetStream is Start with JetStream on, its data in a temp dir that
// survives Restart.
func StartJetStream(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, port: -1, jetstream: true, storeDir: t.TempDir()}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// StartWith is Start with configure applied to the server's options before
// every (re)start: users and permissions, TLS.
func StartWith(t testing.TB, configure func(*server.Options)) *Server {
	t.Helper()
	s := &Server{t: t, port: -1, configure: configure}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	if s.s != nil {
		s.s.Shutdown()
		s.s.WaitForShutdown()
		s.s = nil
	}
}

// Restart starts the server again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	opts := &server.Options{Host: "127.0.0.1", Port: s.port, NoLog: true, NoSigs: true,
		JetStream: s.jetstream, StoreDir: s.storeDir}
	if s.configure != nil {
		s.configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		s.t.Fatalf("nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatalf("nats server on port %d not ready", s.port)
	}
	s.s = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
}
