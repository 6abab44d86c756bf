package dutye2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/duty"
	"github.com/edge-agent/edge-agent/election"
)

// TestDutyWaitOutlastsTheCommand: Duty.Wait blocks until the command is
// gone, also when the leadership's work outlives Run (a handover that gave
// up waiting, as at shutdown when the lease ran low). Wait counted only the
// hooks, so it returned while a command that ignores SIGTERM was still in
// its grace. The duty is attached to a fixed lease (no agent loop runs), as
// the agent attaches it, with the timing of an agent at H = 1 s.
func TestDutyWaitOutlastsTheCommand(t *testing.T) {
	script, log := dutyFiles(t)
	ac := agent.Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1"}}, Heartbeat: time.Second, StateDir: t.TempDir()}
	if err := ac.Validate(); err != nil {
		t.Fatal(err)
	}
	d := testDuty(agent.DutyConfig{Command: []string{"sh", script, "stubborn"}, Env: []string{"DUTY_LOG=" + log}, Grace: 300 * time.Millisecond})
	err := d.Attach(duty.Host{ID: ac.ID, Group: ac.Group, Timing: ac.DutyTiming(),
		Lease: newFixedLease(time.Hour), Log: testLogger(), Restarts: func() {}, Running: func(bool) {}})
	if err != nil {
		t.Fatal(err)
	}
	// Leadership as the loop starts it, with a lease far off.
	ctx, cancel := context.WithCancel(context.Background())
	d.Lead(ctx, 1, new(atomic.Bool), func() bool { return ctx.Err() == nil })
	var start dutyRecord
	waitFor(t, 10*time.Second, "the duty to start", func() bool {
		r, ok := findRecord(readDutyLog(t, log), "start", "gw1")
		start = r
		return ok
	})
	cancel() // SIGTERM, which it ignores; SIGKILL after the grace
	d.Wait()
	if !processGone(start.pid) {
		t.Fatalf("Wait returned while the duty (pid %d) still ran", start.pid)
	}
}

// fixedLease is a leader's lease (duty.Lease) that ends at a fixed time on
// its own monotonic clock; the leader is connected and resigns at once.
type fixedLease struct {
	start time.Time
	end   time.Duration
}

func newFixedLease(end time.Duration) *fixedLease { return &fixedLease{start: time.Now(), end: end} }

func (l *fixedLease) Now() time.Duration              { return time.Since(l.start) }
func (l *fixedLease) LeaseEnd() (time.Duration, bool) { return l.end, true }
func (l *fixedLease) LeaseLength() time.Duration      { return time.Hour }
func (l *fixedLease) IsLeader() bool                  { return l.Now() < l.end }
func (l *fixedLease) Connected() bool                 { return true }
func (l *fixedLease) Resign(uint64) error             { return nil }

// TestDutyNotRestartedAfterGuardDeadline: when the guard kills the duty
// because its deadline passed while the lease was still renewed (here: the
// guard's renewals are held back on purpose, as when the agent was frozen
// and woke just in time), the agent does not start the duty again in that
// term: it resigns, and another member leads with its duty.
func TestDutyNotRestartedAfterGuardDeadline(t *testing.T) {
	script, log := dutyFiles(t)
	ids := []string{"gw1", "gw2", "gw3"}
	duties := map[string]*agent.Duty{}
	agents, _ := runSite(t, 3, 100*time.Millisecond, siteSetup{opts: func(id string) []agent.Option {
		// gw3's duty ignores SIGTERM: the guard's soft deadline (SIGTERM,
		// after which the duty would be started again if the lease was
		// renewed) does not stop it, the hard one kills it.
		argv := []string{"sh", script}
		if id == "gw3" {
			argv = append(argv, "stubborn")
		}
		d := testDuty(agent.DutyConfig{Command: argv, Env: []string{"DUTY_LOG=" + log}, RestartBackoff: 10 * time.Millisecond})
		duties[id] = d
		return []agent.Option{agent.WithDuty(d)}
	}})
	var term uint64
	waitFor(t, 10*time.Second, "gw3 to lead and start its duty", func() bool {
		r, ok := findRecord(readDutyLog(t, log), "start", "gw3")
		term = r.term
		return ok
	})
	duties["gw3"].HoldRenewals(true)
	waitFor(t, 10*time.Second, "another member to lead and run its duty", func() bool {
		l := agreedLeader(agents, ids...)
		if l == "" || l == "gw3" {
			return false
		}
		r, ok := findRecord(readDutyLog(t, log), "start", l)
		return ok && r.term == agents[l].Term()
	})
	starts := 0
	for _, r := range readDutyLog(t, log) {
		if r.event == "start" && r.id == "gw3" && r.term == term {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("gw3 started its duty %d times in term %d, want once: %+v", starts, term, readDutyLog(t, log))
	}
	if got := metric(t, agents["gw3"], "edge_election_duty_restarts_total"); got != 0 {
		t.Fatalf("gw3 duty_restarts_total = %v", got)
	}
}

// TestDutyEnvironment: the duty and the hooks get the documented
// environment, not the agent's: PATH, HOME, LANG, LC_*, TZ and the like,
// DutyConfig.Env (set and passed through), the EDGE_ELECTION_* variables;
// never NOTIFY_SOCKET or anything else of the agent's.
func TestDutyEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("AGENT_SECRET", "s3cret")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_TIME", "C")
	t.Setenv("TZ", "UTC")
	t.Setenv("PASS_ME", "passed")
	dump := func(name string, then string) []string {
		return []string{"sh", "-c", `env > "$0.tmp" && mv "$0.tmp" "$0"` + then, filepath.Join(dir, name)}
	}
	duties := map[string]*agent.Duty{}
	_, stop := runSite(t, 3, 100*time.Millisecond, siteSetup{opts: func(id string) []agent.Option {
		d := testDuty(agent.DutyConfig{Command: dump("command", "; exec sleep 1000"), OnElected: dump("elected", ""), OnDemoted: dump("demoted", ""),
			Env: []string{"PLC=10.0.0.5", "PASS_ME", "NOT_SET_ANYWHERE"}})
		duties[id] = d
		return []agent.Option{agent.WithDuty(d)}
	}})
	waitFor(t, 10*time.Second, "the duty and on_elected to run", func() bool {
		_, e1 := os.Stat(filepath.Join(dir, "command"))
		_, e2 := os.Stat(filepath.Join(dir, "elected"))
		return e1 == nil && e2 == nil
	})
	stop()
	for _, d := range duties {
		d.Wait()
	}
	for _, name := range []string{"command", "elected", "demoted"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		env := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		want := map[string]string{"PATH": os.Getenv("PATH"), "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
			"PLC": "10.0.0.5", "PASS_ME": "passed", agent.EnvElectionGroup: "site"}
		switch name {
		case "elected":
			want[agent.EnvElectionEvent] = "elected"
		case "demoted":
			want[agent.EnvElectionEvent] = "demoted"
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, env[k], v)
			}
		}
		if !strings.HasPrefix(env[agent.EnvElectionID], "gw") || env[agent.EnvElectionTerm] == "" {
			t.Errorf("%s: %s=%q %s=%q", name, agent.EnvElectionID, env[agent.EnvElectionID], agent.EnvElectionTerm, env[agent.EnvElectionTerm])
		}
		if name == "command" {
			if _, ok := env[agent.EnvElectionEvent]; ok {
				t.Errorf("command: %s set", agent.EnvElectionEvent)
			}
		}
		for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "AGENT_SECRET", "NOT_SET_ANYWHERE", "EDGE_AGENT_DUTY_GUARD"} {
			if v, ok := env[k]; ok {
				t.Errorf("%s: %s=%q leaked to the duty", name, k, v)
			}
		}
	}
}

// TestDutyGuardIsOwnExecutable: with GuardPath left to the agent's own
// executable, as for a program that embeds the agent (here the race-enabled
// test binary, which imports package dutyguard), the duty runs under the
// guard and stops with the leadership.
func TestDutyGuardIsOwnExecutable(t *testing.T) {
	script, log := dutyFiles(t)
	duties := map[string]*agent.Duty{}
	_, stop := runSite(t, 3, 200*time.Millisecond, siteSetup{opts: func(id string) []agent.Option {
		d := testDuty(agent.DutyConfig{Command: []string{"sh", script}, Env: []string{"DUTY_LOG=" + log}, GuardPath: duty.SelfGuardPath})
		duties[id] = d
		return []agent.Option{agent.WithDuty(d)}
	}})
	var start dutyRecord
	waitFor(t, 10*time.Second, "the duty to start", func() bool {
		rs := readDutyLog(t, log)
		if len(rs) == 0 {
			return false
		}
		start = rs[0]
		return true
	})
	// Its parent is the guard, run from this test binary.
	ppid := parentPid(t, start.pid)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(ppid) + "/exe")
	self, _ := os.Executable()
	if err != nil || exe != self {
		t.Fatalf("the duty's parent %d runs %q (%v), want this test binary %q", ppid, exe, err, self)
	}
	stop()
	for _, d := range duties {
		d.Wait()
	}
	if !processGone(start.pid) || !processGone(ppid) {
		t.Fatal("the duty or its guard outlived the agent")
	}
	if _, ok := findRecord(readDutyLog(t, log), "stop", start.id); !ok {
		t.Fatal("the duty got no SIGTERM")
	}
}

func parentPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
