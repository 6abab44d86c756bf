package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// runCLI runs the built binary with args and returns its stdout, its
// stderr and its exit status.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("edge-agent %s: %v", strings.Join(args, " "), err)
	return "", "", -1
}

// TestCLIHelp: every subcommand's -h (and --help) prints its usage with its
// flags to stdout and exits 0.
func TestCLIHelp(t *testing.T) {
	ops := []string{"config", "nats-url", "group", "timeout", "subject-prefix", "nats-creds", "nats-nkey-seed",
		"nats-user", "nats-password", "nats-token", "nats-tls-ca", "nats-tls-cert", "nats-tls-key", "signing-seed", "member-keys"}
	cases := []struct {
		args  []string
		flags []string
	}{
		{[]string{"status"}, append([]string{"json", "wait"}, ops...)},
		{[]string{"resign"}, ops},
		{[]string{"transfer"}, ops},
		{[]string{"transfer", "gw2"}, ops},
		{[]string{"drain"}, ops},
		{[]string{"drain", "gw2"}, ops},
		{[]string{"undrain"}, ops},
		{[]string{"watch"}, append([]string{"json", "count"}, ops...)},
		{[]string{"demo"}, []string{"gateways", "heartbeat", "algorithm", "v"}},
		{[]string{"check-config"}, []string{"config"}},
		{[]string{"reset-term"}, []string{"config", "state-dir", "term", "force"}},
		{[]string{"run"}, []string{"config", "id", "group", "members", "nats-url", "heartbeat", "state-dir", "http-addr"}},
	}
	for _, c := range cases {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string{}, c.args...), h)
			out, errOut, code := runCLI(t, args...)
			if code != 0 {
				t.Errorf("edge-agent %s: exit %d, want 0; stderr %q", strings.Join(args, " "), code, errOut)
				continue
			}
			if !strings.HasPrefix(out, "usage: edge-agent "+c.args[0]) {
				t.Errorf("edge-agent %s: stdout does not start with its usage:\n%s", strings.Join(args, " "), out)
			}
			for _, f := range c.flags {
				if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") && !strings.Contains(out, "\n  -"+f+"\t") {
					t.Errorf("edge-agent %s: flag -%s not listed:\n%s", strings.Join(args, " "), f, out)
				}
			}
		}
	}
}

// TestE2EStatusWaitAndHandoverChecks runs real agents on a real NATS
// server: status --wait fails clearly while no agent answers and while the
// agents that answer have no leader, and succeeds as soon as they agree;
// transfer and resign say when no leader answers; transfer to the leader or
// to a stranger fails before any request reaches an agent.
func TestE2EStatusWaitAndHandoverChecks(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	logs := &lineLog{}
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "100ms", "--preemption", "never")
	site.Log = logs
	defer site.Stop()
	bus := []string{"--nats-url", ns.ClientURL(), "--group", "site"}
	cli := func(args ...string) (string, string, int) { return runCLI(t, append(args, bus...)...) }

	// Nobody runs yet.
	if _, errOut, code := cli("status", "--wait", "500ms"); code != 1 || !strings.Contains(errOut, `no agent of group "site" answered within --wait 500ms`) {
		t.Errorf("status --wait with no agent: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := cli("transfer", "gw1"); code != 1 || !strings.Contains(errOut, `no agent of group "site" answered`) || !strings.Contains(errOut, "status --wait") {
		t.Errorf("transfer with no agent: exit %d, stderr %q", code, errOut)
	}

	// One agent of three: it answers, but has no quorum and no leader.
	if _, err := site.Start("gw1"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli("status", "--wait", "1500ms")
	if code != 1 || !strings.Contains(errOut, `no agreed leader of group "site" within --wait 1.5s: 1 agent(s) answered, none knows a leader`) {
		t.Errorf("status --wait without a leader: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "group site: no leader, 1 agent(s) answered") || !strings.Contains(out, "1 live / 2 needed LOST") {
		t.Errorf("status --wait without a leader printed:\n%s", out)
	}
	for _, verb := range []string{"resign", "transfer"} {
		args := []string{verb}
		if verb == "transfer" {
			args = append(args, "gw2")
		}
		if _, errOut, code := cli(args...); code != 1 || !strings.Contains(errOut, `no leader of group "site" answered within 1s: 1 agent(s) answered, none as leader: is a leader elected? try edge-agent status --wait`) {
			t.Errorf("%s without a leader: exit %d, stderr %q", verb, code, errOut)
		}
	}

	// The others start; status --wait, right after, waits for the leader.
	if _, err := site.Start("gw2"); err != nil {
		t.Fatal(err)
	}
	if _, err := site.Start("gw3"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli("status", "--wait", "30s")
	if code != 0 {
		t.Fatalf("status --wait 30s: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "group site: leader "+first.Leader+", 3 agent(s) answered") || strings.Count(out, "3 live / 2 needed") != 3 {
		t.Errorf("status --wait printed, with %s leading:\n%s", first.Leader, out)
	}

	// --json keeps its fields.
	jout, errOut, code := cli("status", "--json", "--wait", "10s")
	if code != 0 {
		t.Fatalf("status --json --wait: exit %d, %q", code, errOut)
	}
	var reports []map[string]any
	if err := json.Unmarshal([]byte(jout), &reports); err != nil || len(reports) != 3 {
		t.Fatalf("status --json: %v, %d reports:\n%s", err, len(reports), jout)
	}
	for _, k := range []string{"id", "group", "algorithm", "role", "leader", "term", "quorum", "members", "island_mode", "lease_remaining_ms", "nats_connected", "version", "time"} {
		if _, ok := reports[0][k]; !ok {
			t.Errorf("status --json lacks %q: %v", k, reports[0])
		}
	}
	if q, _ := reports[0]["quorum"].(map[string]any); q["size"] != 2.0 || q["live"] != 3.0 || q["ok"] != true {
		t.Errorf("status --json quorum = %v", reports[0]["quorum"])
	}

	// Transfer to the leader itself or to a stranger: refused, unsent.
	if _, errOut, code := cli("transfer", first.Leader); code != 1 || !strings.Contains(errOut, first.Leader+` is the leader of group "site" already`) {
		t.Errorf("transfer to the leader: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := cli("transfer", "gw9"); code != 1 || !strings.Contains(errOut, `"gw9" is not a member of group "site" (members: gw1, gw2, gw3)`) {
		t.Errorf("transfer to a stranger: exit %d, stderr %q", code, errOut)
	}
	if n := logs.count(`"msg":"control request"`); n != 0 {
		t.Errorf("%d control requests reached the agents", n)
	}
	if a, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second); err != nil || a.Leader != first.Leader || a.Term != first.Term {
		t.Errorf("the leadership changed: %+v, %v; was %+v", a, err, first)
	}
	// A good transfer still works.
	nominee := "gw1"
	if first.Leader == nominee {
		nominee = "gw2"
	}
	if out, errOut, code := cli("transfer", nominee); code != 0 || !strings.Contains(out, first.Leader+" handed over to "+nominee) {
		t.Errorf("transfer %s: exit %d, %q %q", nominee, code, out, errOut)
	}
	if _, err := site.WaitAgreement(site.IDs(), first.Leader, first.Term, 5*time.Millisecond, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// watchProc is a running `edge-agent watch` whose stdout lines are kept.
type watchProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
	err    error
}

func startWatch(t *testing.T, args ...string) *watchProc {
	t.Helper()
	w := &watchProc{cmd: exec.Command(binary, append([]string{"watch"}, args...)...), exited: make(chan struct{})}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	go func() {
		<-read
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() { _ = w.cmd.Process.Kill(); <-w.exited })
	return w
}

func (w *watchProc) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

func (w *watchProc) done() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// TestE2EWatchCountsLeaderChanges: watch --json starts with a line naming
// the leader; --count 2 outlasts the many per-agent lines of one transfer
// and exits once the second change's new leader is named.
func TestE2EWatchCountsLeaderChanges(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "100ms", "--preemption", "never")
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	first, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bus := []string{"--nats-url", ns.ClientURL(), "--group", "site"}
	w := startWatch(t, append([]string{"--json", "--count", "2"}, bus...)...)
	var start struct {
		Start  bool   `json:"start"`
		Group  string `json:"group"`
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
		Agents int    `json:"agents"`
	}
	poll.UntilWhy(t, 10*time.Second, "watch's first line", func() (bool, string) {
		l := w.snapshot()
		return len(l) > 0, "no line yet"
	})
	if line := w.snapshot()[0]; json.Unmarshal([]byte(line), &start) != nil || !start.Start || start.Group != "site" ||
		start.Leader != first.Leader || start.Term != first.Term || start.Agents != 3 {
		t.Fatalf("watch --json's first line %q, want the start naming %s in term %d", line, first.Leader, first.Term)
	}

	// change transfers the leadership from leader to another member and
	// waits until watch printed every agent's line about it.
	type leaderLine struct {
		ID     string `json:"id"`
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
	}
	change := func(from harness.Agreement) harness.Agreement {
		t.Helper()
		nominee := ids[0]
		if nominee == from.Leader {
			nominee = ids[1]
		}
		if out, errOut, code := runCLI(t, append([]string{"transfer", nominee}, bus...)...); code != 0 {
			t.Fatalf("transfer %s: exit %d, %q %q", nominee, code, out, errOut)
		}
		to, err := site.WaitAgreement(ids, from.Leader, from.Term, 5*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		poll.UntilWhy(t, 10*time.Second, "watch to print every agent's view of "+to.Leader, func() (bool, string) {
			seen := map[string]bool{}
			for _, l := range w.snapshot() {
				var c leaderLine
				if json.Unmarshal([]byte(l), &c) == nil && c.Leader == to.Leader && c.Term == to.Term {
					seen[c.ID] = true
				}
			}
			return len(seen) == len(ids) || w.done(), "not yet"
		})
		return to
	}
	second := change(first)
	if w.done() {
		t.Fatalf("watch --count 2 exited after one leader change:\n%s", strings.Join(w.snapshot(), "\n"))
	}
	n := len(w.snapshot())
	if n < 1+len(ids) {
		t.Fatalf("watch printed %d lines", n)
	}
	third := change(second)
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("watch --count 2 did not exit after two leader changes:\n%s", strings.Join(w.snapshot(), "\n"))
	}
	if w.err != nil {
		t.Fatalf("watch: %v", w.err)
	}
	lines := w.snapshot()
	var last leaderLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Leader != third.Leader || last.Term != third.Term {
		t.Errorf("watch's last line %q, want the new leader %s in term %d", lines[len(lines)-1], third.Leader, third.Term)
	}
}
