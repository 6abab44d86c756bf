package dutye2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge/dutyguard"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/metricread"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// TestMain builds the duty guard the tests' duties run under: the
// edge-agent binary, without the race detector, as the agent runs it in
// production. A race-enabled guard (this test binary, which is a guard too:
// it imports package dutyguard through package agent) starts and reacts
// several times slower; TestDutyGuardIsOwnExecutable runs that one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == dutyguard.Arg {
		// Started as a guard without its environment: never run the tests
		// again from here (each would start more guards).
		fmt.Fprintln(os.Stderr, "dutye2e test binary started as a duty guard without "+dutyguard.Env)
		os.Exit(3)
	}
	code := func() int {
		if runtime.GOOS != "linux" {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "edge-agent-guard-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "edge-agent")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/edge-agent")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the duty guard: %v\n%s", err, out)
			return 1
		}
		testGuardPath = bin
		return m.Run()
	}()
	os.Exit(code)
}

// testGuardPath is the duty guard of the tests' duties (TestMain), "" for
// the default.
var testGuardPath string

// testDuty is agent.NewDuty with the tests' guard, unless c names one.
func testDuty(c agent.DutyConfig) *agent.Duty {
	if c.GuardPath == "" {
		c.GuardPath = testGuardPath
	}
	return agent.NewDuty(c)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// siteSetup customizes runSite; every field may be nil.
type siteSetup struct {
	// opts are added to agent id's options.
	opts func(id string) []agent.Option
	// wrap may replace agent id's transport.
	wrap func(id string, t agent.Transport) agent.Transport
}

// runSite starts n agents gw1..gwN (priority = index) on one in-memory
// network, customized by setup. It returns the agents and a function that
// stops them all and waits for their Run to return.
func runSite(t *testing.T, n int, hb time.Duration, setup siteSetup) (map[string]*agent.Agent, func()) {
	t.Helper()
	net := agent.NewMemNetwork()
	var members []election.Member
	for i := 1; i <= n; i++ {
		members = append(members, election.Member{ID: fmt.Sprintf("gw%d", i), Priority: i})
	}
	agents := map[string]*agent.Agent{}
	cancels := map[string]context.CancelFunc{}
	dones := map[string]chan error{}
	for _, m := range members {
		cfg := agent.Config{ID: m.ID, Group: "site", Members: members, Heartbeat: hb, StateDir: t.TempDir(), HoldDown: time.Hour}
		var tr agent.Transport = net.Join(m.ID)
		if setup.wrap != nil {
			tr = setup.wrap(m.ID, tr)
		}
		o := []agent.Option{agent.WithTransport(tr), agent.WithLogger(testLogger())}
		if setup.opts != nil {
			o = append(o, setup.opts(m.ID)...)
		}
		a, err := agent.New(cfg, o...)
		if err != nil {
			t.Fatal(err)
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
	return agents, stop
}

// testLogger discards the agents' logs, unless the tests run with -v and
// AGENT_TEST_LOG set.
func testLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if testing.Verbose() && os.Getenv("AGENT_TEST_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// agreedLeader returns the leader all agents report, if they agree and it
// holds its lease, else "".
func agreedLeader(agents map[string]*agent.Agent, ids ...string) string {
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

// metric returns the value of the agent's series of the gauge or counter
// name that has no label but the group, from its registry.
func metric(t *testing.T, a *agent.Agent, name string) float64 {
	t.Helper()
	v, found, err := metricread.Value(a.Registry(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("no metric %s", name)
	}
	return v
}
