package site

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// fakeAgent stands in for the serving agent and the group it asks.
type fakeAgent struct {
	mu       sync.Mutex
	st       agent.StatusReport
	others   []agent.StatusReport // their answers, as of each Ask
	watches  map[chan agent.LeaderChange]bool
	asks     atomic.Int64
	askBlock bool // Ask waits for its context to end
	watching atomic.Int64
}

func newFake() *fakeAgent {
	return &fakeAgent{watches: map[chan agent.LeaderChange]bool{}, st: agent.StatusReport{
		ID: "gw1", Group: "plc", Algorithm: "bully", Role: "follower", Leader: "gw3", Term: 4,
		Quorum: agent.QuorumReport{Size: 2, Live: 3, OK: true}, NATSConnected: true, Version: "v1",
		Members: []agent.MemberReport{
			{ID: "gw3", Priority: 30, Alive: true, LastSeenMS: 100},
			{ID: "gw2", Priority: 20, Alive: true, LastSeenMS: 200},
			{ID: "gw1", Priority: 10, Alive: true, LastSeenMS: 0},
		},
	}}
}

func (f *fakeAgent) status() agent.StatusReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeAgent) watch() (<-chan agent.LeaderChange, func()) {
	ch := make(chan agent.LeaderChange, 16)
	f.mu.Lock()
	f.watches[ch] = true
	f.mu.Unlock()
	f.watching.Add(1)
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.watches, ch)
			f.mu.Unlock()
			f.watching.Add(-1)
		})
	}
}

func (f *fakeAgent) ask(ctx context.Context, _ time.Duration, _ []string) ([]Answer, error) {
	f.asks.Add(1)
	if f.askBlock {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Answer
	for _, r := range f.others {
		out = append(out, Answer{Report: r, At: time.Now()})
	}
	return out, nil
}

// lead makes leader the leader in term, as the serving agent sees it, and
// tells the watchers.
func (f *fakeAgent) lead(leader string, term uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.st.Leader
	f.st.Leader, f.st.Term = leader, term
	f.st.LeaderChanges = append([]agent.LeaderChangeRecord{{Time: time.Now(), Term: term, Leader: leader, Previous: prev}}, f.st.LeaderChanges...)
	for ch := range f.watches {
		ch <- agent.LeaderChange{Leader: leader, Previous: prev, Term: term}
	}
}

func newTestServer(t *testing.T, f *fakeAgent, c Config) (*httptest.Server, *Site) {
	c.Status, c.Watch, c.Ask = f.status, f.watch, f.ask
	s := New(c)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("next")) })
	srv := httptest.NewServer(s.Handler(next))
	t.Cleanup(srv.Close)
	return srv, s
}

// sse reads the snapshots of one GET /events.
type sse struct {
	resp   *http.Response
	cancel context.CancelFunc
	snaps  chan Snapshot
}

func openStream(t *testing.T, url string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /events: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	s := &sse{resp: resp, cancel: cancel, snaps: make(chan Snapshot, 1024)}
	go func() {
		defer close(s.snaps)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "snapshot":
				var snap Snapshot
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &snap) == nil {
					s.snaps <- snap
				}
			}
		}
	}()
	return s
}

func (s *sse) close() { s.cancel(); s.resp.Body.Close() }

// next waits for a snapshot that satisfies ok.
func (s *sse) next(t *testing.T, d time.Duration, what string, ok func(Snapshot) bool) Snapshot {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case snap, open := <-s.snaps:
			if !open {
				t.Fatalf("stream ended waiting for %s", what)
			}
			if ok(snap) {
				return snap
			}
		case <-timer.C:
			t.Fatalf("no snapshot with %s within %s", what, d)
		}
	}
}

func TestBuildMergesOwnReports(t *testing.T) {
	f := newFake()
	now := time.Now()
	came := now.Add(-300 * time.Millisecond)
	others := []Answer{
		{Report: agent.StatusReport{ID: "gw3", Group: "plc", Role: "leader", Leader: "gw3", Term: 4, Version: "v2", LeaseRemainingMS: 900,
			NATSConnected: true, Duty: &agent.DutyReport{Running: true, Restarts: 2}}, At: came},
		{Report: agent.StatusReport{ID: "gw9", Group: "plc", Role: "leader", Version: "intruder"}, At: came}, // not a member: ignored
		{Report: agent.StatusReport{ID: "gw2", Group: "other", Role: "leader", Version: "wrong"}, At: came},  // another group: ignored
	}
	s := build(f.status(), others, now)
	if s.ID != "gw1" || s.Group != "plc" || s.Leader != "gw3" || s.Term != 4 || !s.Quorum.OK {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Members) != 3 {
		t.Fatalf("members %+v", s.Members)
	}
	byID := map[string]Member{}
	for _, m := range s.Members {
		byID[m.ID] = m
	}
	if m := byID["gw3"]; !m.Answered || m.Role != "leader" || m.Version != "v2" || m.LastSeenMS != 100 || m.Duty == nil || m.AnswerAgeMS != 300 {
		t.Fatalf("gw3 = %+v, want its own answer with gw1's last-seen", m)
	}
	if m := byID["gw2"]; m.Answered || m.Role != "" || m.Version != "" || !m.Alive || m.LastSeenMS != 200 {
		t.Fatalf("gw2 = %+v, want gw1's view only (its answer was of another group)", m)
	}
	if m := byID["gw1"]; !m.Self || !m.Answered || m.Role != "follower" || m.Version != "v1" {
		t.Fatalf("gw1 = %+v, want the serving agent's own status", m)
	}
	if !s.DutyKnown || s.Duty == nil || !s.Duty.Running || s.Duty.Restarts != 2 {
		t.Fatalf("duty %+v known %v, want the leader's", s.Duty, s.DutyKnown)
	}
	// 900 ms in the answer that came 300 ms ago by this gateway's clock.
	if s.LeaseRemainingMS != 600 {
		t.Fatalf("lease remaining %d ms, want 600", s.LeaseRemainingMS)
	}
	if s.LeaderChanges == nil {
		t.Fatal("leader_changes is null, want []")
	}

	// Without the leader's answer: unknown lease and duty.
	s = build(f.status(), nil, now)
	if s.LeaseRemainingMS != -1 || s.DutyKnown || s.Duty != nil {
		t.Fatalf("without answers: lease %d duty %+v known %v", s.LeaseRemainingMS, s.Duty, s.DutyKnown)
	}
	// The serving agent leads: its own lease.
	f.st.Role, f.st.Leader, f.st.LeaseRemainingMS = "leader", "gw1", 750
	s = build(f.status(), nil, now)
	if s.LeaseRemainingMS != 750 || !s.DutyKnown || s.Duty != nil {
		t.Fatalf("serving leader: lease %d duty %+v known %v", s.LeaseRemainingMS, s.Duty, s.DutyKnown)
	}
}

func TestPageIsSmallSelfContainedAndReadOnly(t *testing.T) {
	srv, _ := newTestServer(t, newFake(), Config{})
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	t.Logf("page: %d bytes", len(body))
	if len(body) >= 50<<10 {
		t.Fatalf("page is %d bytes, want under 50 KB", len(body))
	}
	page := strings.ToLower(string(body))
	for _, bad := range []string{"<form", "<button", "<input", "method=\"post\"", "http://", "https://", "src=\""} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: it must offer no actions and load nothing from elsewhere", bad)
		}
	}
	for _, want := range []string{"name=\"viewport\"", "eventsource(\"events\")"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /: %s, want 405 (read-only)", m, resp.Status)
		}
	}
	// Everything else is the agent's.
	resp, err = http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "next" {
		t.Fatalf("GET /status answered %q, want the agent's handler", body)
	}
}

func TestSnapshotJSON(t *testing.T) {
	f := newFake()
	f.others = []agent.StatusReport{{ID: "gw3", Group: "plc", Role: "leader", Leader: "gw3", Version: "v3"}}
	srv, _ := newTestServer(t, f, Config{Interval: time.Hour})
	resp, err := http.Get(srv.URL + "/site.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Leader != "gw3" || len(s.Members) != 3 || s.Members[0].Version != "v3" || s.Members[0].Role != "leader" {
		t.Fatalf("snapshot %+v", s)
	}
	// Polled again within the interval: no new round of asking.
	for i := 0; i < 5; i++ {
		resp, err := http.Get(srv.URL + "/site.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := f.asks.Load(); n != 1 {
		t.Fatalf("6 snapshots within the interval asked the group %d times, want 1", n)
	}
}

// TestEventsPushChangesAndTicks: a stream gets a snapshot at once, one at
// every leader change without waiting for the interval, and others at
// least every interval; the other members are asked.
func TestEventsPushChangesAndTicks(t *testing.T) {
	f := newFake()
	f.others = []agent.StatusReport{{ID: "gw3", Group: "plc", Role: "leader", Leader: "gw3", Term: 4, Version: "v3"}}
	// A long interval: a change must not wait for it.
	srv, _ := newTestServer(t, f, Config{Interval: time.Hour})
	st := openStream(t, srv.URL)
	defer st.close()
	st.next(t, 5*time.Second, "gw3 leading and its own answer", func(s Snapshot) bool {
		return s.Leader == "gw3" && s.Members[0].Answered && s.Members[0].Version == "v3"
	})
	poll.Until(t, 5*time.Second, "the stream's watch", func() bool { return f.watching.Load() == 1 })
	f.lead("gw2", 5)
	s := st.next(t, 5*time.Second, "gw2 leading", func(s Snapshot) bool { return s.Leader == "gw2" })
	if s.Term != 5 || len(s.LeaderChanges) == 0 || s.LeaderChanges[0].Leader != "gw2" {
		t.Fatalf("after the change: %+v", s)
	}
	// A change asks the group again.
	poll.Until(t, 5*time.Second, "a second round of asking", func() bool { return f.asks.Load() >= 2 })

	// Without changes, snapshots keep coming every interval.
	srv2, _ := newTestServer(t, f, Config{Interval: 20 * time.Millisecond})
	st2 := openStream(t, srv2.URL)
	defer st2.close()
	for i := 0; i < 5; i++ {
		st2.next(t, 5*time.Second, "a periodic snapshot", func(Snapshot) bool { return true })
	}
}

// TestEventsBoundedAndNoLeak: at most MaxStreams streams; when they go,
// the shared loop stops (its watch cancelled, its round of asking ended)
// and no goroutine is left.
func TestEventsBoundedAndNoLeak(t *testing.T) {
	f := newFake()
	f.askBlock = true // a member that never answers: the round must end too
	srv, s := newTestServer(t, f, Config{MaxStreams: 3, Interval: 20 * time.Millisecond})
	http.DefaultClient.CloseIdleConnections()
	base := runtime.NumGoroutine()
	for round := 0; round < 3; round++ {
		var streams []*sse
		for i := 0; i < 3; i++ {
			st := openStream(t, srv.URL)
			st.next(t, 5*time.Second, "a first snapshot", func(Snapshot) bool { return true })
			streams = append(streams, st)
		}
		resp, err := http.Get(srv.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("stream over MaxStreams: %s, want 503", resp.Status)
		}
		if f.watching.Load() != 1 {
			t.Fatalf("%d watches for 3 streams, want 1 shared", f.watching.Load())
		}
		for _, st := range streams {
			st.close()
		}
		poll.Until(t, 5*time.Second, "the streams to end", func() bool {
			s.h.mu.Lock()
			defer s.h.mu.Unlock()
			return len(s.h.streams) == 0 && s.h.stop == nil
		})
		poll.Until(t, 5*time.Second, "the shared watch to be cancelled", func() bool { return f.watching.Load() == 0 })
	}
	http.DefaultClient.CloseIdleConnections()
	var n int
	err := poll.For(5*time.Second, "goroutines back to the start", func() (bool, string) {
		n = runtime.NumGoroutine()
		return n <= base, ""
	})
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("%v: %d goroutines, %d at the start\n%s", err, n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestEventsAfterAgentStopped: the agent's watch channel closes when its
// Run returns; the stream keeps showing its last state.
func TestEventsAfterAgentStopped(t *testing.T) {
	f := newFake()
	srv, _ := newTestServer(t, f, Config{Interval: 20 * time.Millisecond})
	st := openStream(t, srv.URL)
	defer st.close()
	st.next(t, 5*time.Second, "a first snapshot", func(Snapshot) bool { return true })
	f.mu.Lock()
	for ch := range f.watches {
		close(ch)
		delete(f.watches, ch)
	}
	f.mu.Unlock()
	for i := 0; i < 3; i++ {
		st.next(t, 5*time.Second, "a snapshot after the agent stopped", func(s Snapshot) bool { return s.Leader == "gw3" })
	}
}

// TestEventsChangeReplacesSlowRound: a round of asking that waits for a
// member that does not answer does not hold up the answers after a leader
// change: the change starts a fresh round at once.
func TestEventsChangeReplacesSlowRound(t *testing.T) {
	f := newFake()
	f.askBlock = true
	srv, _ := newTestServer(t, f, Config{Interval: time.Hour}) // rounds wait half an hour
	st := openStream(t, srv.URL)
	defer st.close()
	st.next(t, 5*time.Second, "a first snapshot", func(Snapshot) bool { return true })
	poll.Until(t, 5*time.Second, "the first round and the watch", func() bool { return f.asks.Load() == 1 && f.watching.Load() == 1 })
	f.lead("gw2", 5)
	st.next(t, 5*time.Second, "gw2 leading", func(s Snapshot) bool { return s.Leader == "gw2" })
	poll.Until(t, 5*time.Second, "a fresh round after the change", func() bool { return f.asks.Load() == 2 })
}

// The page tells a witness and a drained member apart from a plain
// follower: the witness from the serving agent's member list (the group's
// witnesses), drained from the member's own answer or the serving agent's
// view.
func TestBuildMarksWitnessAndDrained(t *testing.T) {
	f := newFake()
	st := f.status()
	for i := range st.Members {
		switch st.Members[i].ID {
		case "gw2":
			st.Members[i].Witness = true
		case "gw1":
			st.Members[i].Drained = true
		}
	}
	now := time.Now()
	others := []agent.StatusReport{
		{ID: "gw2", Group: st.Group, Role: "follower", Witness: true},
		{ID: "gw3", Group: st.Group, Role: "follower", Drained: true},
	}
	var answers []Answer
	for _, r := range others {
		answers = append(answers, Answer{Report: r, At: now})
	}
	s := build(st, answers, now)
	got := map[string][2]bool{}
	for _, m := range s.Members {
		got[m.ID] = [2]bool{m.Witness, m.Drained}
	}
	want := map[string][2]bool{"gw1": {false, true}, "gw2": {true, false}, "gw3": {false, true}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: witness, drained = %v, want %v", id, got[id], w)
		}
	}
}
