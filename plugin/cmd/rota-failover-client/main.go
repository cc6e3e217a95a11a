// Command rota-failover-client is scripts/failover-test's Go half: it plays the
// job_submit plugin against a controller pair and judges the outcome.
//
//	rota-failover-client ports N                 print N free loopback TCP ports
//	rota-failover-client wait-js -nats URLS      wait until JetStream places replicated streams
//	rota-failover-client stream-leader -nats URLS -stream S   print the server leading stream S
//	rota-failover-client place -nats URLS -out FILE [-interval 10ms] [-deadline 50ms] [-breaker-cooldown 10s] [-agents]
//	    ask for placements until SIGTERM, through the plugin's own client
//	    (plugin/submit.NATSPlacer: deadline, circuit breaker, reconnects by
//	    itself); one line per attempt: "<unix ns> ok <decision id>" or
//	    "<unix ns> fail <error>"; with -agents also "<unix ns> agent
//	    <subject>" per agent report heard
//	rota-failover-client report -nats URLS -placements FILE -events FILE [-logs A,B]
//	    takeover time, decisions missing from JetStream, service with a
//	    NATS node down; last line "takeover_s=<x> lost_decisions=<n>"
//
// Every command that connects takes -seed FILE, an nkey seed to sign in
// with when the cluster requires credentials (place: the plugin's; the
// others: the controller's).
//
// The events file has lines "<unix ns> kill-leader <what>" and
// "<unix ns> kill-nats <what>", written by the script as it acts.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: failover-client ports|wait-js|place|report ...")
	}
	var err error
	switch os.Args[1] {
	case "ports":
		err = ports(os.Args[2:])
	case "wait-js":
		err = waitJS(os.Args[2:])
	case "stream-leader":
		err = streamLeader(os.Args[2:])
	case "place":
		err = place(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err.Error())
	}
}

// connect dials url, signing in with the nkey seed when one is given.
func connect(url, seed string, opts ...nats.Option) (*nats.Conn, error) {
	if seed != "" {
		ao, err := auth.ClientOptions(seed, "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, ao...)
	}
	return nats.Connect(url, opts...)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "failover-client:", msg)
	os.Exit(1)
}

// ports holds all N listeners open until every port is chosen, so they
// are distinct; another process may still grab one before its server
// binds it, which the script notices as a server that does not start.
func ports(args []string) error {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n < 1 {
			return fmt.Errorf("ports: %q is not a count", args[0])
		}
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ps []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		ps = append(ps, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	fmt.Println(strings.Join(ps, " "))
	return nil
}

func waitJS(args []string) error {
	fs := flag.NewFlagSet("wait-js", flag.ExitOnError)
	url := fs.String("nats", "", "NATS URLs, comma-separated")
	replicas := fs.Int("replicas", 3, "replicas a stream must be able to have")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after")
	seed := fs.String("seed", "", "nkey seed to sign in with (the controller's)")
	fs.Parse(args)
	nc, err := connect(*url, *seed, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// A throwaway replicated stream: only a cluster whose JetStream
		// meta group knows enough peers can place it.
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "failover_probe", Subjects: []string{"failover.probe"},
			Replicas: *replicas, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(ctx, "failover_probe")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream cannot place a stream with %d replicas after %v: %w", *replicas, *timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func streamLeader(args []string) error {
	fs := flag.NewFlagSet("stream-leader", flag.ExitOnError)
	url := fs.String("nats", "", "NATS URLs, comma-separated")
	stream := fs.String("stream", "", "stream name (a KV bucket B is stream KV_B)")
	seed := fs.String("seed", "", "nkey seed to sign in with (the controller's)")
	fs.Parse(args)
	nc, err := connect(*url, *seed)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, *stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return fmt.Errorf("stream %s has no leader", *stream)
	}
	fmt.Println(info.Cluster.Leader)
	return nil
}

func place(args []string) error {
	fs := flag.NewFlagSet("place", flag.ExitOnError)
	url := fs.String("nats", "", "NATS URLs, comma-separated")
	out := fs.String("out", "", "file to write one line per attempt to")
	interval := fs.Duration("interval", 10*time.Millisecond, "pause between requests")
	agents := fs.Bool("agents", false, "also log every agent report heard (\"<unix ns> agent <subject>\")")
	agentsSeed := fs.String("agents-seed", "", "nkey seed for hearing agents (one that may subscribe to their reports: the controller's)")
	cfg := submit.DefaultConfig()
	fs.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "the plugin's deadline_ms")
	fs.DurationVar(&cfg.BreakerCooldown, "breaker-cooldown", cfg.BreakerCooldown, "the plugin's breaker_cooldown")
	fs.IntVar(&cfg.BreakerFailures, "breaker-failures", cfg.BreakerFailures, "the plugin's breaker_failures")
	fs.StringVar(&cfg.NATSNkeySeedFile, "seed", "", "the plugin's nkey seed (nats_nkey_seed_file)")
	fs.Parse(args)
	cfg.NATSURL = *url
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := &lockedWriter{w: bufio.NewWriter(f)}
	if *agents {
		// Agents' reports, heard on a connection of our own (which also
		// reconnects by itself), show the agents reconnecting.
		sub, err := connect(*url, *agentsSeed, nats.Name("failover-client-agents"), nats.MaxReconnects(-1),
			nats.ReconnectWait(250*time.Millisecond))
		if err != nil {
			return err
		}
		defer sub.Close()
		if _, err := sub.Subscribe(wire.SubjectAgentReports, func(m *nats.Msg) {
			w.printf("%d agent %s\n", time.Now().UnixNano(), m.Subject)
		}); err != nil {
			return err
		}
	}
	asker, err := submit.Dial(cfg, submit.Hooks{OnEvent: func(warn bool, msg string) {
		fmt.Fprintf(os.Stderr, "%s plugin client: %s\n", time.Now().Format(time.RFC3339Nano), msg)
	}})
	if err != nil {
		return err
	}
	defer asker.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	req := &wire.PlaceRequest{V: wire.Version, Partition: "gpu", GPU: wire.GPUAsk{PerNode: 1},
		Hints: wire.Hints{Steps: 36000, Throughput: map[string]float64{"v100": 10}}}
	for ctx.Err() == nil {
		rep, err := asker.Place(ctx, nil, req)
		now := time.Now().UnixNano()
		switch {
		case err != nil:
			w.printf("%d fail %s\n", now, strings.ReplaceAll(err.Error(), "\n", " "))
		case rep.DecisionID == "":
			w.printf("%d fail answer without a decision: %s\n", now, rep.Reason)
		default:
			w.printf("%d ok %s\n", now, rep.DecisionID)
		}
		select {
		case <-ctx.Done():
		case <-time.After(*interval):
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	return f.Close()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

func (l *lockedWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

type attempt struct {
	at time.Time
	ok bool
	id string
}

type event struct {
	at         time.Time
	kind, what string
}

func readLines(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, strings.SplitN(l, " ", 3))
		}
	}
	return out, nil
}

func unixNano(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n), err
}

func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	url := fs.String("nats", "", "NATS URLs, comma-separated")
	placements := fs.String("placements", "", "the place command's output")
	eventsPath := fs.String("events", "", "the script's events")
	logs := fs.String("logs", "", "controller logs (JSON lines), comma-separated")
	seed := fs.String("seed", "", "nkey seed to read the decisions with (the controller's)")
	fs.Parse(args)

	var atts []attempt
	lines, err := readLines(*placements)
	if err != nil {
		return err
	}
	type report struct {
		at      time.Time
		subject string
	}
	var reports []report
	for _, l := range lines {
		if len(l) < 2 {
			continue
		}
		at, err := unixNano(l[0])
		if err != nil {
			return fmt.Errorf("%s: %q: %w", *placements, l, err)
		}
		if l[1] == "agent" && len(l) == 3 {
			reports = append(reports, report{at, l[2]})
			continue
		}
		a := attempt{at: at, ok: l[1] == "ok"}
		if a.ok && len(l) == 3 {
			a.id = l[2]
		}
		atts = append(atts, a)
	}
	var evs []event
	lines, err = readLines(*eventsPath)
	if err != nil {
		return err
	}
	for _, l := range lines {
		at, err := unixNano(l[0])
		if err != nil || len(l) < 2 {
			return fmt.Errorf("%s: bad line %q", *eventsPath, l)
		}
		e := event{at: at, kind: l[1]}
		if len(l) == 3 {
			e.what = l[2]
		}
		evs = append(evs, e)
	}
	find := func(kind string) (event, bool) {
		for _, e := range evs {
			if e.kind == kind {
				return e, true
			}
		}
		return event{}, false
	}
	kill, ok := find("kill-leader")
	if !ok {
		return errors.New("no kill-leader event")
	}

	acked := 0
	for _, a := range atts {
		if a.ok {
			acked++
		}
	}
	fmt.Printf("placements: %d attempted, %d answered with a decision, %d not\n", len(atts), acked, len(atts)-acked)

	// Takeover as the plugin sees it: from the old leader's last answer
	// to the new leader's first. Which controller answered is told by the
	// decision id: ids are NUIDs, whose first 12 characters are a random
	// prefix fixed for the life of a process (it changes only after about
	// 10^15 ids). Telling them apart by time alone would count an answer
	// still in flight at the kill as the new leader's.
	const prefix = 12
	var old string
	var lastOld, firstNew time.Time
	for _, a := range atts {
		if !a.ok || len(a.id) < prefix {
			continue
		}
		switch {
		case a.at.Before(kill.at):
			old, lastOld = a.id[:prefix], a.at
		case a.id[:prefix] == old:
			lastOld = a.at // answered by the old leader just before its death
		case firstNew.IsZero():
			firstNew = a.at
		}
	}
	if lastOld.IsZero() || firstNew.IsZero() {
		return fmt.Errorf("no answers from both leaders (old: %v, new: %v)", !lastOld.IsZero(), !firstNew.IsZero())
	}
	takeover := firstNew.Sub(lastOld)
	fmt.Printf("leader (%s) killed with SIGKILL; its last answer at %+.3f s from the kill, the new leader's first at %+.3f s\n",
		kill.what, lastOld.Sub(kill.at).Seconds(), firstNew.Sub(kill.at).Seconds())
	if acq, ok := leaseAcquired(*logs, kill.at); ok {
		fmt.Printf("the standby acquired the lease %.3f s after the kill\n", acq.Sub(kill.at).Seconds())
	}

	if nk, ok := find("kill-nats"); ok {
		n, bad := 0, 0
		var gap time.Duration
		prev := nk.at
		for _, a := range atts {
			if a.at.Before(nk.at) {
				continue
			}
			if a.ok {
				n++
				gap = max(gap, a.at.Sub(prev))
				prev = a.at
			} else {
				bad++
			}
		}
		// Failures after the last answer are a wait too.
		if len(atts) > 0 {
			gap = max(gap, atts[len(atts)-1].at.Sub(prev))
		}
		fmt.Printf("NATS node %s killed with SIGKILL; since then %d answered, %d not, longest wait for an answer %.3f s\n",
			nk.what, n, bad, gap.Seconds())
		if n == 0 {
			return errors.New("no placement answered after a NATS node was killed")
		}
		if len(reports) > 0 {
			// Every agent must be heard again, whichever server it was on.
			before, after := map[string]bool{}, map[string]int{}
			var gap time.Duration
			last := map[string]time.Time{}
			for _, r := range reports {
				if r.at.Before(nk.at) {
					before[r.subject] = true
					continue
				}
				prev, ok := last[r.subject]
				if !ok {
					prev = nk.at
				}
				gap = max(gap, r.at.Sub(prev))
				last[r.subject] = r.at
				after[r.subject]++
			}
			// Silence until the end is a wait too.
			end := reports[len(reports)-1].at
			for _, t := range last {
				gap = max(gap, end.Sub(t))
			}
			fmt.Printf("agent reports: %d agents heard before the NATS node was killed, %d after; longest wait for an agent's next report %.3f s\n",
				len(before), len(after), gap.Seconds())
			for s := range before {
				if after[s] == 0 {
					return fmt.Errorf("no report on %s after the NATS node was killed", s)
				}
			}
		}
	}

	lost, err := missing(*url, *seed, atts)
	if err != nil {
		return err
	}
	fmt.Printf("decisions: %d given to the client, %d of them not in JetStream\n", acked, lost)
	fmt.Printf("takeover_s=%.2f lost_decisions=%d\n", takeover.Seconds(), lost)
	return nil
}

// leaseAcquired is the first "acquired the controller lease" after the
// kill in the controllers' logs.
func leaseAcquired(paths string, after time.Time) (time.Time, bool) {
	var first time.Time
	for _, p := range strings.Split(paths, ",") {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			var e struct {
				Time    time.Time `json:"time"`
				Message string    `json:"message"`
			}
			if json.Unmarshal([]byte(l), &e) != nil || !strings.HasPrefix(e.Message, "acquired the controller lease") {
				continue
			}
			if e.Time.After(after) && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
	}
	return first, !first.IsZero()
}

// missing counts the decisions the client was given that JetStream does
// not have.
func missing(url, seed string, atts []attempt) (int, error) {
	nc, err := connect(url, seed)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, decisions.Bucket)
	if err != nil {
		return 0, fmt.Errorf("decision bucket: %w", err)
	}
	lost := 0
	for _, a := range atts {
		if !a.ok {
			continue
		}
		if _, err := kv.Get(ctx, "d."+a.id); err != nil {
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				return 0, fmt.Errorf("reading decision %s: %w", a.id, err)
			}
			fmt.Printf("missing: %s (given at %s)\n", a.id, a.at.Format(time.RFC3339Nano))
			lost++
		}
	}
	return lost, nil
}
