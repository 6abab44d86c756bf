package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-agent/edge-agent/agent/duty"
	"github.com/edge-agent/edge-agent/election"
)

// TestDutyWaitOutlastsTheCommand: Duty.Wait blocks until the command is
// gone, also when the leadership's work outlives Run (a handover that gave
// up waiting, as at shutdown when the lease ran low). Wait counted only the
// hooks, so it returned while a command that ignores SIGTERM was still in
// its grace.
func TestDutyWaitOutlastsTheCommand(t *testing.T) {
	script, log := dutyFiles(t)
	members := []election.Member{{ID: "gw1"}}
	net := NewMemNetwork()
	d := testDuty(DutyConfig{Command: []string{"sh", script, "stubborn"}, Env: []string{"DUTY_LOG=" + log}, Grace: 300 * time.Millisecond})
	a, err := New(Config{ID: "gw1", Group: "site", Members: members, Heartbeat: time.Second, StateDir: t.TempDir()},
		WithTransport(net.Join("gw1")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithDuty(d))
	if err != nil {
		t.Fatal(err)
	}
	defer a.store.Close()
	// Leadership as the loop starts it, with a lease far off; no loop runs.
	a.lease.leaseEnd.Store(int64(time.Hour))
	a.lease.leading.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	a.startLeaderWork(ctx, 1)
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

// TestDutyNotRestartedAfterGuardDeadline: when the guard kills the duty
// because its deadline passed while the lease was still renewed (here: the
// guard's renewals are held back on purpose, as when the agent was frozen
// and woke just in time), the agent does not start the duty again in that
// term: it resigns, and another member leads with its duty.
func TestDutyNotRestartedAfterGuardDeadline(t *testing.T) {
	script, log := dutyFiles(t)
	ids := []string{"gw1", "gw2", "gw3"}
	duties := map[string]*Duty{}
	_, agents, _ := runSite(t, 3, 100*time.Millisecond, siteSetup{opts: func(id string) []Option {
		// gw3's duty ignores SIGTERM: the guard's soft deadline (SIGTERM,
		// after which the duty would be started again if the lease was
		// renewed) does not stop it, the hard one kills it.
		argv := []string{"sh", script}
		if id == "gw3" {
			argv = append(argv, "stubborn")
		}
		d := testDuty(DutyConfig{Command: argv, Env: []string{"DUTY_LOG=" + log}, RestartBackoff: 10 * time.Millisecond})
		duties[id] = d
		return []Option{WithDuty(d)}
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
	if got := testutil.ToFloat64(agents["gw3"].m.dutyRestarts); got != 0 {
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
	duties := map[string]*Duty{}
	_, _, stop := runSite(t, 3, 100*time.Millisecond, siteSetup{opts: func(id string) []Option {
		d := testDuty(DutyConfig{Command: dump("command", "; exec sleep 1000"), OnElected: dump("elected", ""), OnDemoted: dump("demoted", ""),
			Env: []string{"PLC=10.0.0.5", "PASS_ME", "NOT_SET_ANYWHERE"}})
		duties[id] = d
		return []Option{WithDuty(d)}
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
			"PLC": "10.0.0.5", "PASS_ME": "passed", EnvElectionGroup: "site"}
		switch name {
		case "elected":
			want[EnvElectionEvent] = "elected"
		case "demoted":
			want[EnvElectionEvent] = "demoted"
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, env[k], v)
			}
		}
		if !strings.HasPrefix(env[EnvElectionID], "gw") || env[EnvElectionTerm] == "" {
			t.Errorf("%s: %s=%q %s=%q", name, EnvElectionID, env[EnvElectionID], EnvElectionTerm, env[EnvElectionTerm])
		}
		if name == "command" {
			if _, ok := env[EnvElectionEvent]; ok {
				t.Errorf("command: %s set", EnvElectionEvent)
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
	duties := map[string]*Duty{}
	_, _, stop := runSite(t, 3, 200*time.Millisecond, siteSetup{opts: func(id string) []Option {
		d := testDuty(DutyConfig{Command: []string{"sh", script}, Env: []string{"DUTY_LOG=" + log}, GuardPath: duty.SelfGuardPath})
		duties[id] = d
		return []Option{WithDuty(d)}
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
