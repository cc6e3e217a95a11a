package natstest

import (
	"github.com/rota-hpc/rota/internal/eventually"

	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Cluster is n embedded nats-servers routed into one JetStream cluster, so
// tests can use replicated streams and lose a node.
type Cluster struct {
	t     testing.TB
	nodes []*clusterNode
}

type clusterNode struct {
	name        string
	port        int // client port, fixed after the first start
	clusterPort int
	storeDir    string
	s           *server.Server
}

// StartCluster runs n servers (n >= 3 for a quorum that survives a lost
// node) and waits until JetStream has a meta leader. They stop when the
// test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	// Cluster ports must be known before any server starts, so every node
	// can list every other as a route; the ports are picked free now and
	// kept across restarts.
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, &clusterNode{
			name:        fmt.Sprintf("n%d", i+1),
			port:        freePort(t),
			clusterPort: freePort(t),
			storeDir:    t.TempDir(),
		})
	}
	t.Cleanup(c.Stop)
	for i := range c.nodes {
		c.start(i)
	}
	c.WaitJetStream()
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	var routes []*url.URL
	for j, o := range c.nodes {
		if j != i {
			routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", o.clusterPort)})
		}
	}
	opts := &server.Options{
		ServerName: nd.name,
		Host:       "127.0.0.1",
		Port:       nd.port,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   nd.storeDir,
		Cluster:    server.ClusterOpts{Name: "rota-test", Host: "127.0.0.1", Port: nd.clusterPort},
		Routes:     routes,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatalf("nats server %s: %v", nd.name, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("nats server %s not ready", nd.name)
	}
	nd.s = s
}

// WaitJetStream waits until the cluster can place replicated streams: a
// meta leader that sees every running node as a current JetStream peer.
func (c *Cluster) WaitJetStream() {
	c.t.Helper()
	running := 0
	for _, nd := range c.nodes {
		if nd.s != nil {
			running++
		}
	}
	eventually.True(c.t, 30*time.Second, "a JetStream meta leader with every node as a peer", func() bool {
		for _, nd := range c.nodes {
			if nd.s != nil && nd.s.JetStreamIsLeader() {
				return len(nd.s.JetStreamClusterPeers()) >= running
			}
		}
		return false
	})
}

// URLs is every node's client URL, comma-separated, as a client's server
// list.
func (c *Cluster) URLs() string {
	var u []string
	for _, nd := range c.nodes {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
	}
	return strings.Join(u, ",")
}

// URL is node i's client URL alone.
func (c *Cluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port) }

// StopNode shuts node i down (its data stays for RestartNode).
func (c *Cluster) StopNode(i int) {
	if s := c.nodes[i].s; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.nodes[i].s = nil
	}
}

// RestartNode starts node i again on its ports and data.
func (c *Cluster) RestartNode(i int) {
	c.t.Helper()
	c.StopNode(i)
	c.start(i)
}

// Stop shuts every node down.
func (c *Cluster) Stop() {
	for i := range c.nodes {
		c.StopNode(i)
	}
}

// Connect is a client on node i alone: it ignores the other servers the
// cluster advertises, so stopping node i cuts it off.
func (c *Cluster) Connect(i int, opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(i), append([]nats.Option{nats.Name(c.nodes[i].name + "-client"), nats.IgnoreDiscoveredServers()}, opts...)...)
	if err != nil {
		c.t.Fatalf("connecting to %s: %v", c.nodes[i].name, err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}
