package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

func TestPromiseFile(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, err := s.LoadPromise(); err != nil || d != 0 {
		t.Fatalf("no file: %s, %v; want 0", d, err)
	}
	if err := s.SavePromise(300*time.Millisecond + time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if d, err := s.LoadPromise(); err != nil || d != 301*time.Millisecond {
		t.Fatalf("saved 300.001 ms: read %s, %v; want 301ms (rounded up)", d, err)
	}
	for _, bad := range []string{`{}`, `{"promise_ms":-1}`, `{"promise_ms":6000001}`, `{"promise_ms":"3"}`, `garbage`} {
		if err := os.WriteFile(filepath.Join(dir, promiseFileName), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadPromise(); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s: %v, want a corrupt file error", bad, err)
		}
	}
}

// TestAgentKeepsLongerPromise: a one-member site stands once its start
// wait is over, so the time it takes to lead shows that wait. Started with
// D = 300 ms it waits 300 ms and keeps 300 ms as its promise; restarted
// after a run that promised 900 ms, it waits 900 ms, and writes its own
// 300 ms back only once those 900 ms have passed.
func TestAgentKeepsLongerPromise(t *testing.T) { synctest.Test(t, testAgentKeepsLongerPromise) }

func testAgentKeepsLongerPromise(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1", Priority: 1}},
		Heartbeat: 100 * time.Millisecond, HeartbeatMisses: 3, StateDir: dir}
	promised := func() time.Duration {
		t.Helper()
		s := &FileStore{dir: dir}
		d, err := s.LoadPromise()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	run := func() (time.Duration, func()) {
		t.Helper()
		a, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithTransport(NewMemNetwork().Join(cfg.ID)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- a.Run(ctx) }()
		for !a.IsLeader() {
			if time.Since(start) > 5*time.Second {
				t.Fatal("no leader within 5 s")
			}
			stall(cfg.Tick())
		}
		return time.Since(start), func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}

	took, stop := run()
	if took < 300*time.Millisecond || took > 400*time.Millisecond {
		t.Errorf("first start: led after %s, want D (300 ms) and a little", took)
	}
	stop()
	if d := promised(); d != 300*time.Millisecond {
		t.Fatalf("after the first run the promise is %s, want 300ms", d)
	}

	// A run with heartbeat_misses 9 promised 900 ms.
	if err := os.WriteFile(filepath.Join(dir, promiseFileName), []byte(`{"promise_ms":900}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	took, stop = run()
	if took < 900*time.Millisecond || took > 1000*time.Millisecond {
		t.Errorf("after a run that promised 900 ms: led after %s, want 900 ms and a little", took)
	}
	if d := promised(); d != 900*time.Millisecond && time.Since(start) < 900*time.Millisecond {
		t.Errorf("the promise is %s before 900 ms passed, want 900ms", d)
	}
	stall(900*time.Millisecond - time.Since(start) + time.Millisecond)
	synctest.Wait()
	if d := promised(); d != 300*time.Millisecond {
		t.Errorf("the promise is %s once 900 ms passed, want 300ms", d)
	}
	stop()
}

// TestAgentLeaseShortenedByOtherHeartbeat: gw3 (H 100 ms, heartbeat_misses
// 5: D 500 ms, lease 380 ms) leads gw1 and gw2 (H 50 ms, heartbeat_misses 6:
// D 300 ms), each config valid on its own. Their acknowledgements promise
// 300 ms, made in 5 ms ticks and read in gw3's 10 ms ticks, so gw3's lease
// is 300 - 100 - 10 ms, less a tick of wall clock: at most 180 ms. Read in
// the wrong unit (every member taken to have one tick), the promise looked
// long enough and the lease stayed at 380 ms.
func TestAgentLeaseShortenedByOtherHeartbeat(t *testing.T) {
	synctest.Test(t, testAgentLeaseShortenedByOtherHeartbeat)
}

func testAgentLeaseShortenedByOtherHeartbeat(t *testing.T) {
	_, agents, _ := runSite(t, 3, 50*time.Millisecond, siteSetup{config: func(id string, c *Config) {
		c.Preemption, c.HeartbeatMisses = PreemptImmediate, 6
		if id == "gw3" {
			c.Heartbeat, c.HeartbeatMisses = 100*time.Millisecond, 5
		}
	}})
	gw3 := agents["gw3"]
	var st StatusReport
	waitFor(t, 10*time.Second, "gw3 reports both followers shortening its lease", func() bool {
		st = gw3.Status()
		short := 0
		for _, m := range st.Members {
			if m.ShortensLease && m.PromiseMS == 300 {
				short++
			}
		}
		return st.Role == "leader" && short == 2
	})
	// Sampled over a few heartbeats: never more than 180 ms left.
	for range 20 {
		if left := gw3.LeaseRemaining(); left > 180*time.Millisecond {
			t.Fatalf("gw3's lease has %s left, want at most 180ms", left)
		}
		stall(17 * time.Millisecond)
	}
	if !gw3.IsLeader() {
		t.Fatal("gw3 lost its lease while both followers acknowledged it")
	}
}
