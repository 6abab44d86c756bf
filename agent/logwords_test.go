package agent

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/metricread"

	"github.com/edge-agent/edge-agent/internal/logbuf"
)

// logged is an agent of a test site with its log.
type logged struct {
	a      *Agent
	log    *logbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

func startLogged(t *testing.T, net *MemNetwork, id string, members []election.Member, holdDown time.Duration) *logged {
	t.Helper()
	buf := &logbuf.Buffer{}
	cfg := Config{ID: id, Group: "site", Members: members, Heartbeat: 50 * time.Millisecond,
		StateDir: t.TempDir(), HoldDown: holdDown}
	a, err := New(cfg, WithTransport(net.Join(id)), WithLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &logged{a: a, log: buf, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

// TestHandoverLoggedInWords: a planned handover (resign, transfer, stop,
// hold-down preemption) is logged at Info, naming the successor and the
// cause in words, never as a warning.
func TestHandoverLoggedInWords(t *testing.T) {
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	for how, want := range map[string]*regexp.Regexp{
		"resign":     regexp.MustCompile(`reason="handing over to gw[12]: resign requested" peer=gw[12]`),
		"transfer":   regexp.MustCompile(`reason="handing over to gw1: transfer requested" peer=gw1`),
		"stop":       regexp.MustCompile(`reason="handing over to gw[12]: shutting down" peer=gw[12]`),
		"preemption": regexp.MustCompile(`reason="handing over to gw3: hold-down preemption" peer=gw3`),
	} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := NewMemNetwork()
				as := map[string]*logged{}
				ids := []string{"gw1", "gw2", "gw3"}
				if how == "preemption" {
					ids = ids[:2] // gw3 joins later and takes over after the hold-down
				}
				for _, id := range ids {
					as[id] = startLogged(t, net, id, members, 100*time.Millisecond)
				}
				leader := func() *logged {
					for _, l := range as {
						if l.a.IsLeader() {
							return l
						}
					}
					return nil
				}
				waitFor(t, 5*time.Second, "a leader", func() bool { return leader() != nil })
				old := leader()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				switch how {
				case "resign":
					if err := old.a.Resign(ctx); err != nil {
						t.Fatal(err)
					}
				case "transfer":
					if err := old.a.Transfer(ctx, "gw1"); err != nil {
						t.Fatal(err)
					}
				case "stop":
					old.cancel()
					<-old.done
					old.done <- nil // for the cleanup
				case "preemption":
					as["gw3"] = startLogged(t, net, "gw3", members, 100*time.Millisecond)
				}
				waitFor(t, 5*time.Second, "the handover", func() bool {
					return len(old.log.Lines(`msg="stepped down"`)) > 0
				})
				got := old.log.Lines(`msg="stepped down"`)
				if len(got) != 1 || !strings.Contains(got[0], "level=INFO") || !want.MatchString(got[0]) {
					t.Errorf("step-down lines %q, want one at INFO matching %s", got, want)
				}
			})
		})
	}
}

// TestRepeatedElectionFailuresSummarised: a member without quorum (its two
// peers never start) fails an election about every second; the first
// failure is logged, then one line a minute with the count left out.
func TestRepeatedElectionFailuresSummarised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
		l := startLogged(t, NewMemNetwork(), "gw1", members, time.Hour)
		failed := func() float64 {
			v, _, err := metricread.Value(l.a.Registry(), "edge_election_elections_total", map[string]string{"result": "failed"})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		stall(2*FailedElectionLogEvery + FailedElectionLogEvery/2)
		n := failed()
		got := l.log.Lines(`msg="election failed"`)
		if n < 20 {
			t.Fatalf("only %v failed elections in %s", n, 2*FailedElectionLogEvery+FailedElectionLogEvery/2)
		}
		if len(got) != 3 {
			t.Fatalf("%d lines for %v failed elections in 2.5 periods, want 3:\n%s", len(got), n, strings.Join(got, "\n"))
		}
		if strings.Contains(got[0], "suppressed=") || !strings.Contains(got[1], "suppressed=") || !strings.Contains(got[2], "suppressed=") {
			t.Errorf("want the first line alone without suppressed=N:\n%s", strings.Join(got, "\n"))
		}
	})
}

func TestRepeatLog(t *testing.T) {
	r := newRepeatLog(time.Minute)
	var now time.Duration
	step := func(key string) (bool, int) { ok, n := r.allow(key, now); now += time.Second; return ok, n }
	if ok, n := step("a"); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 59 {
		if ok, _ := step("a"); ok {
			t.Fatal("a repeat within the minute was allowed")
		}
	}
	if ok, _ := step("b"); !ok {
		t.Fatal("another key shares the budget")
	}
	if ok, n := step("a"); !ok || n != 59 {
		t.Fatalf("after a minute: %v %d, want true 59", ok, n)
	}
	r.reset()
	if ok, n := step("a"); !ok || n != 0 {
		t.Fatalf("after reset: %v %d", ok, n)
	}
}
