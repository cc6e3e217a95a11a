package natsync

import (
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/natstest"
)

// BenchmarkRequest compares one request/reply through natsync and through
// nats.go against the same in-process server and responder. The requesting
// goroutine is locked to its thread, as a cgo callback from slurmctld is.
//
//	go test -run XXX -bench Request -count 5 ./plugin/natsync/
func BenchmarkRequest(b *testing.B) { benchRequest(b, 0) }

// BenchmarkRequestPaced leaves 2 ms between requests (sbatch's pace; not
// counted), so the responder's side has gone idle each time: the figure
// closer to what slurmctld sees than back-to-back requests.
func BenchmarkRequestPaced(b *testing.B) { benchRequest(b, 2*time.Millisecond) }

func benchRequest(b *testing.B, gap time.Duration) {
	s := natstest.Start(b)
	echo(b, s.URL(), nil, nil)
	body := []byte(`{"v":1,"modify":false,"uid":1000,"account":"ml","partition":"gpu","gpu":{"per_node":1}}`)
	b.Run("natsync", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c := newClient(b, Options{URLs: []string{s.URL()}})
		waitConnected(b, c)
		b.ResetTimer()
		for b.Loop() {
			pause(b, gap)
			if _, err := c.Request(subject, body, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nats.go", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		nc, err := nats.Connect(s.URL())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		b.ResetTimer()
		for b.Loop() {
			pause(b, gap)
			if _, err := nc.Request(subject, body, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func pause(b *testing.B, gap time.Duration) {
	if gap > 0 {
		b.StopTimer()
		time.Sleep(gap)
		b.StartTimer()
	}
}
