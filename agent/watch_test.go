package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-agent/edge-agent/election"
)

// siteSetup customizes runSite; every field may be nil.
type siteSetup struct {
	// opts are added to agent id's options.
	opts func(id string) []Option
	// before is called with each agent ahead of its Run.
	before func(id string, a *Agent)
	// wrap may replace agent id's transport.
	wrap func(id string, t Transport) Transport
	// config may change agent id's configuration.
	config func(id string, c *Config)
}

// runSite starts n agents gw1..gwN (priority = index) on one in-memory
// network, customized by setup. It returns the agents and a function that
// stops them all and waits for their Run to return.
func runSite(t *testing.T, n int, hb time.Duration, setup siteSetup) (*MemNetwork, map[string]*Agent, func()) {
	t.Helper()
	opts, before := setup.opts, setup.before
	net := NewMemNetwork()
	var members []election.Member
	for i := 1; i <= n; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	agents := map[string]*Agent{}
	cancels := map[string]context.CancelFunc{}
	dones := map[string]chan error{}
	for _, m := range members {
		cfg := Config{ID: m.ID, Group: "site", Members: members, Heartbeat: hb, StateDir: t.TempDir(), HoldDown: time.Hour}
		if setup.config != nil {
			setup.config(m.ID, &cfg)
		}
		var logw io.Writer = io.Discard
		if testing.Verbose() && os.Getenv("AGENT_TEST_LOG") != "" {
			logw = os.Stderr
		}
		var tr Transport = net.Join(m.ID)
		if setup.wrap != nil {
			tr = setup.wrap(m.ID, tr)
		}
		o := []Option{WithTransport(tr), WithLogger(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})))}
		if opts != nil {
			o = append(o, opts(m.ID)...)
		}
		a, err := New(cfg, o...)
		if err != nil {
			t.Fatal(err)
		}
		if before != nil {
			before(m.ID, a)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		agents[m.ID], cancels[m.ID], dones[m.ID] = a, cancel, done
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for id, c := range cancels {
			c()
			if err := <-dones[id]; err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}
	}
	t.Cleanup(stop)
	return net, agents, stop
}

// agreedLeader returns the leader all agents report, if they agree and it
// holds its lease, else "".
func agreedLeader(agents map[string]*Agent, ids ...string) string {
	l := ""
	for i, id := range ids {
		got := agents[id].Leader()
		if got == "" || (i > 0 && got != l) {
			return ""
		}
		l = got
	}
	if a := agents[l]; a == nil || !a.IsLeader() {
		return ""
	}
	return l
}

// TestWatchDropsNoTransition: watchers that read nothing while the leader
// changes many times still get every change, in order, numbered without a
// gap, as many as the agent counted, and their channels close once Run
// returned; a function watch (WatchFunc) gets the same changes, and its wait
// returns once Run returned.
func TestWatchDropsNoTransition(t *testing.T) { synctest.Test(t, testWatchDropsNoTransition) }

func testWatchDropsNoTransition(t *testing.T) {
	ids := []string{"gw1", "gw2", "gw3"}
	watches := map[string]<-chan LeaderChange{}
	var cancelled <-chan LeaderChange
	var mu sync.Mutex
	funcs, waits := map[string][]LeaderChange{}, map[string]func(){}
	_, agents, stop := runSite(t, 3, 50*time.Millisecond, siteSetup{before: func(id string, a *Agent) {
		ch, _ := a.Watch()
		watches[id] = ch
		waits[id] = a.WatchFunc(func(c LeaderChange) {
			mu.Lock()
			funcs[id] = append(funcs[id], c)
			mu.Unlock()
		})
		if id == "gw1" {
			var cancel func()
			cancelled, cancel = a.Watch()
			cancel()
		}
	}})
	if _, ok := <-cancelled; ok {
		t.Fatal("a cancelled watch delivered a change")
	}
	waitFor(t, 5*time.Second, "a leader", func() bool { return agreedLeader(agents, ids...) != "" })
	const transfers = 20
	for i := 0; i < transfers; i++ {
		cur := agreedLeader(agents, ids...)
		next := ids[(i+1)%3]
		if next == cur {
			next = ids[(i+2)%3]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := agents[cur].Transfer(ctx, next)
		cancel()
		if err != nil {
			t.Fatalf("transfer %d %s -> %s: %v", i, cur, next, err)
		}
		// Usually next; another member if next's first lease ran out before
		// it was used (a slow fsync of the term), which is a change too.
		waitFor(t, 5*time.Second, "a new leader", func() bool {
			l := agreedLeader(agents, ids...)
			return l != "" && l != cur
		})
	}
	final := agreedLeader(agents, ids...)
	stop()
	counted := map[string]float64{}
	for _, id := range ids {
		counted[id] = testutil.ToFloat64(agents[id].m.leaderChanges)
	}
	for _, id := range ids {
		var got []LeaderChange
		deadline := time.After(5 * time.Second)
	read:
		for {
			select {
			case c, ok := <-watches[id]:
				if !ok {
					break read
				}
				got = append(got, c)
			case <-deadline:
				t.Fatalf("%s: watch channel not closed after Run returned", id)
			}
		}
		if float64(len(got)) != counted[id] || len(got) < 2*transfers {
			t.Fatalf("%s: %d changes delivered, the agent counted %v (at least %d expected)", id, len(got), counted[id], 2*transfers)
		}
		prev := ""
		var term uint64
		sawFinal := false
		for i, c := range got {
			if c.Seq != uint64(i+1) || c.Previous != prev || c.ID != id || c.Group != "site" || c.Term < term {
				t.Fatalf("%s: change %d out of order: %+v (previous leader %q, term %d)", id, i, c, prev, term)
			}
			prev, term = c.Leader, c.Term
			sawFinal = sawFinal || c.Leader == final
		}
		if !sawFinal {
			t.Errorf("%s: never saw the final leader %s", id, final)
		}
		waits[id]()
		mu.Lock()
		if !slices.Equal(funcs[id], got) {
			t.Errorf("%s: the function watch got %d changes, the channel %d, or others", id, len(funcs[id]), len(got))
		}
		mu.Unlock()
	}
	// A watch started after Run returned is closed at once.
	ch, cancel := agents["gw1"].Watch()
	defer cancel()
	if _, ok := <-ch; ok {
		t.Fatal("watch after Run delivered a change")
	}
	called := false
	agents["gw1"].WatchFunc(func(LeaderChange) { called = true })()
	if called {
		t.Fatal("function watch after Run delivered a change")
	}
}

// TestElectionDurationObserved: the winner's candidacy is observed in the
// election duration histogram, and duty metrics exist at zero.
func TestElectionDurationObserved(t *testing.T) { synctest.Test(t, testElectionDurationObserved) }

func testElectionDurationObserved(t *testing.T) {
	ids := []string{"gw1", "gw2", "gw3"}
	// A link of 1 ms each way: in the bubble's virtual time an election
	// takes no time at all without one.
	_, agents, _ := runSite(t, 3, 20*time.Millisecond, siteSetup{wrap: func(_ string, tr Transport) Transport {
		return slowLink{Transport: tr, delay: time.Millisecond}
	}})
	waitFor(t, 5*time.Second, "a leader", func() bool { return agreedLeader(agents, ids...) != "" })
	a := agents[agreedLeader(agents, ids...)]
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		found[mf.GetName()] = true
		if mf.GetName() != "edge_election_election_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if labelOf(m, "result") == "won" && (h.GetSampleCount() < 1 || h.GetSampleSum() <= 0 || h.GetSampleSum() > 1) {
				t.Errorf("won: %d samples, sum %v s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	for _, name := range []string{"edge_election_election_duration_seconds", "edge_election_duty_restarts_total", "edge_election_duty_running"} {
		if !found[name] {
			t.Errorf("%s not gathered", name)
		}
	}
	// duty_running carries the group on the agent's own registry, for a
	// Prometheus that scrapes the gateways directly.
	for _, mf := range mfs {
		if mf.GetName() != "edge_election_duty_running" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if ls := m.GetLabel(); len(ls) != 1 || labelOf(m, "group") != "site" {
				t.Errorf("edge_election_duty_running labels %v, want group=site", ls)
			}
		}
	}
}

// slowLink delays every send by delay, as a link's latency would.
type slowLink struct {
	Transport
	delay time.Duration
}

func (l slowLink) Send(m election.Message) error {
	stall(l.delay)
	return l.Transport.Send(m)
}
