package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// driveAgent is the smallest host of a driven agent (built with DrivenBy,
// whose wake function sends on woken without blocking): it steps a when
// woken and when its deadline comes, until ctx ends, and returns what Run
// would.
func driveAgent(ctx context.Context, a *Agent, woken <-chan struct{}) error {
	d, err := a.Drive()
	if err != nil {
		return err
	}
	for {
		timer := time.NewTimer(time.Until(d.Due()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return d.Stop()
		case <-woken:
		case <-timer.C:
		}
		timer.Stop()
		if err := d.Wake(); err != nil {
			return err
		}
	}
}

// Driven agents decide as running ones do: the election, a leader cut off
// and the majority's new election, a transfer through the API (a request
// that wakes the host), a graceful stop and a restart that keeps the term,
// on sites where all members, or some, are driven.
func TestDrivenAgentsElectAndHandOver(t *testing.T) {
	for name, driven := range map[string]func(string) bool{
		"all driven": func(string) bool { return true },
		"mixed":      func(id string) bool { return id != "gw2" },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newDrivenSite(t, 3, driven)
				waitFor(t, 5*time.Second, "gw3 to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == "gw3" })
				term := s.agents["gw3"].Term()
				s.net.Isolate("gw3")
				waitFor(t, 5*time.Second, "gw3 to step down", func() bool { return !s.agents["gw3"].IsLeader() })
				waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2") == "gw2" })
				if got := s.agents["gw2"].Term(); got <= term {
					t.Fatalf("new term %d not above %d", got, term)
				}
				s.net.Heal()
				waitFor(t, 5*time.Second, "one leader after heal", func() bool { return s.agreed("gw1", "gw2", "gw3") != "" })
				l := s.agreed("gw1", "gw2", "gw3")
				other, to := "gw1", "gw1"
				if l == "gw1" {
					other, to = "gw2", "gw2"
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if err := s.agents[other].Transfer(ctx, "gw3"); err != ErrNotLeader {
					t.Fatalf("transfer on follower %s: %v, want ErrNotLeader", other, err)
				}
				// The request wakes the host: it is served at once, as
				// Run's loop would serve it (no virtual time passes).
				start := time.Now()
				if err := s.agents[l].Transfer(ctx, to); err != nil {
					t.Fatalf("transfer from %s to %s: %v", l, to, err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("transfer answered after %s, want at once", d)
				}
				waitFor(t, 2*time.Second, to+" to lead", func() bool { return s.agreed("gw1", "gw2", "gw3") == to })
				t.Logf("%s leads %s after the transfer", to, time.Since(start))
				if to != "gw1" {
					return
				}
				before := s.agents["gw1"].Term()
				if err := s.stop("gw1"); err != nil {
					t.Fatalf("stop of the leader: %v", err)
				}
				waitFor(t, 2*time.Second, "a successor", func() bool { return s.agreed("gw2", "gw3") != "" })
				members := s.agents["gw1"].Config().Members
				s.start("gw1", members)
				waitFor(t, 5*time.Second, "gw1 back", func() bool { return s.agreed("gw1", "gw2", "gw3") != "" })
				if got := s.agents["gw1"].Term(); got < before {
					t.Fatalf("gw1 restarted at term %d, below %d", got, before)
				}
			})
		})
	}
}

// A driven agent stopped by its host releases what Drive opened: the state
// directory can be opened again, and Wake after Stop reports the agent
// stopped.
func TestDrivenAgentStopReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSite(t, 1)
		cfg := s.agents["gw1"].Config()
		if err := s.stop("gw1"); err != nil {
			t.Fatal(err)
		}
		a, err := New(cfg, WithTransport(s.net.Join("gw1")), WithLogger(s.agents["gw1"].log), DrivenBy(func() {}))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "use Drive") {
			t.Errorf("Run of a driven agent: %v, want a refusal", err)
		}
		d, err := a.Drive()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Drive(); err == nil {
			t.Error("a second Drive of one agent succeeded")
		}
		if _, err := s.agents["gw1"].Drive(); err == nil {
			t.Error("Drive of an agent built without DrivenBy succeeded")
		}
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := d.Wake(); err == nil {
			t.Error("Wake after Stop succeeded")
		}
		again, err := New(cfg, WithTransport(s.net.Join("gw1")))
		if err != nil {
			t.Fatalf("state directory still held after Stop: %v", err)
		}
		_ = again.store.Close()
	})
}

// A driven agent calls its wake function when an input reaches its mailbox
// and when an API request waits, and does nothing until its host steps it.
func TestDrivenAgentWakesItsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestSite(t, 2) // gw1 and gw2 run; gw3 is driven by hand below
		members := s.agents["gw1"].Config().Members
		members = append(members, election.Member{ID: "gw3", Priority: 3})
		cfg := Config{ID: "gw3", Group: "site", Members: members, Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), HoldDown: time.Hour}
		var wakes atomic.Int32
		a, err := New(cfg, WithTransport(s.net.Join("gw3")), WithLogger(s.agents["gw1"].log), DrivenBy(func() { wakes.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		d, err := a.Drive()
		if err != nil {
			t.Fatal(err)
		}
		defer d.Stop()
		// gw1 and gw2 elect (a quorum of 2 of 3); their messages reach gw3.
		waitFor(t, 5*time.Second, "a wake for an input", func() bool { return wakes.Load() > 0 })
		if a.Leader() != "" {
			t.Fatalf("gw3 follows %q before its host stepped it", a.Leader())
		}
		waitFor(t, 5*time.Second, "gw3 to learn the leader", func() bool {
			if err := d.Wake(); err != nil {
				t.Fatal(err)
			}
			return a.Leader() != ""
		})
		// A request waits for the host, and wakes it.
		wakes.Store(0)
		done := make(chan error, 1)
		go func() { done <- a.Drain(context.Background(), true) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("drain answered before the host stepped the agent: %v", err)
		default:
		}
		if wakes.Load() == 0 {
			t.Fatal("a waiting request did not wake the host")
		}
		if err := d.Wake(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("drain: %v", err)
		}
		if !a.Status().Drained {
			t.Error("gw3 not drained after its host served the request")
		}
	})
}

// closingBus is a bus whose channel the test closes, as a bus that gave up
// would; it calls the wake hook then, as a Mailbox does.
type closingBus struct {
	noBus
	ch    chan Input
	hooks BusHooks
}

func (b *closingBus) Open(h BusHooks) (<-chan Input, error) { b.hooks = h; return b.ch, nil }
func (b *closingBus) Connected() bool                       { return true }

// A driven agent whose bus closed its channel stops as Run does, with the
// error Run returns, instead of ticking on without inputs.
func TestDrivenAgentStopsWhenItsBusCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &closingBus{ch: make(chan Input)}
		cfg := Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1"}}, Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir()}
		a, err := New(cfg, WithBus(func(BusContext) (Bus, error) { return b, nil }), DrivenBy(func() {}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := a.Drive()
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Wake(); err != nil {
			t.Fatalf("Wake with the bus open: %v", err)
		}
		close(b.ch)
		b.hooks.Wake()
		if err := d.Wake(); err != errBusClosed {
			t.Fatalf("Wake after the bus closed: %v, want %v", err, errBusClosed)
		}
		if err := d.Stop(); err != nil {
			t.Errorf("Stop after the failure: %v", err)
		}
	})
}

// panicBus panics when opened.
type panicBus struct{ noBus }

func (panicBus) Open(BusHooks) (<-chan Input, error) { panic("bus open") }

// A panic while the agent starts still releases what start took (its state
// directory, the running flag), as Run's deferred calls did.
func TestStartReleasesOnPanic(t *testing.T) {
	cfg := Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1"}}, Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir()}
	a, err := New(cfg, WithBus(func(BusContext) (Bus, error) { return panicBus{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Run did not panic")
			}
		}()
		_ = a.Run(context.Background())
	}()
	if a.lease.running.Load() {
		t.Error("the agent still counts as running after a panic in start")
	}
	s, err := OpenFileStore(cfg.StateDir)
	if err != nil {
		t.Fatalf("state directory still held after a panic in start: %v", err)
	}
	s.Close()
}
