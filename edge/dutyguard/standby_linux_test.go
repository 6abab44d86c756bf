package dutyguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startStandby starts a standby guard whose own environment holds
// STANDBY_OWN=1 (which its run must not pass on).
func startStandby(t *testing.T) *testGuard {
	t.Helper()
	return spawnGuard(t, []string{Standby, "--label=test/standby"},
		[]string{"PATH=" + os.Getenv("PATH"), "STANDBY_OWN=1", Env + "=" + Protocol})
}

// give sends a standby guard its run: args after Arg, the command's
// environment, then start, and after it the lines of then, all in one
// write (as they may arrive).
func (g *testGuard) give(args, env []string, then ...string) {
	g.t.Helper()
	var b strings.Builder
	for _, a := range args {
		b.WriteString(SetArg + " " + strconv.Quote(a) + "\n")
	}
	for _, e := range env {
		b.WriteString(SetEnv + " " + strconv.Quote(e) + "\n")
	}
	b.WriteString(Start + "\n")
	for _, l := range then {
		b.WriteString(l + "\n")
	}
	if _, err := g.conn.Write([]byte(b.String())); err != nil {
		g.t.Fatal(err)
	}
}

// TestStandbyGuardRuns: a standby guard given a run (arguments with
// spaces, quotes and a newline, the run's environment) runs it as a guard
// started for it would: the command gets exactly those arguments and that
// environment, not the standby's own, the reports and the deadline
// renewals follow the usual protocol.
func TestStandbyGuardRuns(t *testing.T) {
	dir := t.TempDir()
	g := startStandby(t)
	script := `env > "$1/env"; printf '%s|' "$@" > "$1/args"; read -r _ < /dev/null; exit 3`
	odd := "a b \"c\"\nd"
	g.give(runArgs(t, 0, time.Hour, nil, "sh", "-c", script, "sh", dir, odd),
		[]string{"PATH=" + os.Getenv("PATH"), "RUN=1"}, Renew+" 1 "+strconv.FormatInt(ClockMonotonic()+int64(2*time.Hour), 10))
	g.ranToExit(3)
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "RUN=1") || strings.Contains(string(env), "STANDBY_OWN") || strings.Contains(string(env), Env) {
		t.Fatalf("command environment:\n%s", env)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "|" + odd + "|"; string(args) != want {
		t.Fatalf("command arguments %q, want %q", args, want)
	}
}

// TestStandbyGuardKillsItsRun: the run of a standby guard is guarded like
// any: the whole tree goes when the agent's connection closes.
func TestStandbyGuardKillsItsRun(t *testing.T) {
	dir := t.TempDir()
	g := startStandby(t)
	g.give(runArgs(t, 0, time.Hour, nil, "sh", "-c", treeScript, "sh", dir), []string{"PATH=" + os.Getenv("PATH")})
	if l := g.line(); !strings.HasPrefix(l, Started+" ") {
		t.Fatalf("first report %q", l)
	}
	pids := treePids(t, dir)
	g.conn.Close()
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	checkGone(t, pids)
}

// TestStandbyGuardIdle: a standby guard holds and starts nothing: let go
// (its connection closed) it exits 0 without a report; a term right after
// start stops the run before it starts; a line of another protocol, or a
// standby of another protocol version, exits 2 with nothing started.
func TestStandbyGuardIdle(t *testing.T) {
	g := startStandby(t)
	g.conn.Close()
	if err := g.waitExit(); err != nil {
		t.Fatalf("let go: exit %v", err)
	}
	if l, ok := <-g.lines; ok {
		t.Fatalf("let go: report %q", l)
	}

	dir := t.TempDir()
	g = startStandby(t)
	g.give(runArgs(t, 0, time.Hour, nil, "touch", filepath.Join(dir, "ran")), nil, Term)
	if l := g.line(); l != Done+" "+Killed+" not started" {
		t.Fatalf("term after start: report %q", l)
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("term after start: exit %v", err)
	}
	if exists(filepath.Join(dir, "ran")) {
		t.Fatal("term after start: the command ran")
	}

	for name, g := range map[string]*testGuard{
		"bad line":         startStandby(t),
		"unknown argument": spawnGuard(t, []string{Standby, "--deadline=1"}, []string{Env + "=" + Protocol}),
		"other protocol":   spawnGuard(t, []string{Standby}, []string{Env + "=1"}),
	} {
		if name == "bad line" {
			g.send(Renew + " 1 2")
		}
		err := g.waitExit()
		var ee *exec.ExitError
		if !asExitError(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("%s: exit %v, want status 2", name, err)
		}
	}
}
