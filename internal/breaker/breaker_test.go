package breaker

import (
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBreakerLifecycle(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := New(3, 5*time.Second)
	b.Now = c.now
	var transitions []string
	b.OnChange = func(from, to State) { transitions = append(transitions, from.String()+"->"+to.String()) }

	steps := []struct {
		name      string
		advance   time.Duration
		outcome   string // "ok", "fail", or "" for no call
		wantAllow bool
		wantState State
	}{
		{"first call", 0, "fail", true, Closed},
		{"second fails", 0, "fail", true, Closed},
		{"third opens", 0, "fail", true, Open},
		{"refused while open", time.Second, "", false, Open},
		{"still refused", 3 * time.Second, "", false, Open},
		{"probe after cooldown fails", 2 * time.Second, "fail", true, Open},
		{"refused again", time.Second, "", false, Open},
		{"probe succeeds", 5 * time.Second, "ok", true, Closed},
		{"closed again", 0, "ok", true, Closed},
	}
	for _, s := range steps {
		c.t = c.t.Add(s.advance)
		got := b.Allow()
		if got != s.wantAllow {
			t.Fatalf("%s: Allow() = %v, want %v", s.name, got, s.wantAllow)
		}
		switch s.outcome {
		case "ok":
			b.Success()
		case "fail":
			b.Failure()
		}
		if st := b.State(); st != s.wantState {
			t.Fatalf("%s: state %v, want %v", s.name, st, s.wantState)
		}
	}
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if len(transitions) != len(want) {
		t.Fatalf("transitions %v, want %v", transitions, want)
	}
	for i := range want {
		if transitions[i] != want[i] {
			t.Fatalf("transitions %v, want %v", transitions, want)
		}
	}
}

func TestHalfOpenAllowsOneProbe(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	b := New(1, time.Second)
	b.Now = c.now
	b.Allow()
	b.Failure()
	c.t = c.t.Add(2 * time.Second)
	if !b.Allow() {
		t.Fatal("first call after cooldown should be the probe")
	}
	if b.Allow() {
		t.Fatal("a second call while the probe is out must be refused")
	}
	b.Success()
	if !b.Allow() {
		t.Fatal("closed breaker must allow")
	}
}

func TestSuccessResetsCount(t *testing.T) {
	b := New(2, time.Second)
	b.Allow()
	b.Failure()
	b.Allow()
	b.Success()
	b.Allow()
	b.Failure()
	if b.State() != Closed {
		t.Fatal("failures must be consecutive to open the breaker")
	}
}
