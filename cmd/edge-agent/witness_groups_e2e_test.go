package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
	"github.com/edge-agent/edge-agent/internal/poll"
	"github.com/edge-agent/edge-agent/witness"
)

// witnessHost is one `edge-agent witness` process serving several
// two-gateway groups (gw1, gw2 and the witness wit in each).
type witnessHost struct {
	t      *testing.T
	args   []string
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	log    *lineLog
}

func startWitnessHost(t *testing.T, args []string, log *lineLog) *witnessHost {
	t.Helper()
	w := &witnessHost{t: t, args: args, log: log}
	w.start()
	t.Cleanup(func() { w.kill() })
	return w
}

func (w *witnessHost) start() {
	w.t.Helper()
	cmd := exec.Command(binary, append([]string{"witness"}, w.args...)...)
	// The witness's own runtime defaults are checked below: not the
	// environment's.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMAXPROCS=")
	})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	addr := make(chan string, 1)
	w.exited = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(w.log, "witness: %s\n", line)
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http listening" {
				addr <- rec.Addr
			}
		}
	}()
	exited := w.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case w.addr = <-addr:
	case <-exited:
		w.t.Fatal("the witness process exited at start (its log is in the test's output)")
	case <-time.After(20 * time.Second):
		w.t.Fatal("the witness process: no http address within 20 s")
	}
	w.cmd = cmd
}

// kill stops the process with SIGKILL and waits for it.
func (w *witnessHost) kill() {
	if w.cmd != nil {
		_ = w.cmd.Process.Kill()
		<-w.exited
		w.cmd = nil
	}
}

// terminate stops the process with SIGTERM, as systemd does, and waits.
func (w *witnessHost) terminate() {
	w.t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		w.t.Fatal("the witness process did not exit within 20 s of SIGTERM")
	}
	if code := w.cmd.ProcessState.ExitCode(); code != 0 {
		w.t.Errorf("the witness process exited %d on SIGTERM, want 0", code)
	}
	w.cmd = nil
}

type witnessSummaryView struct {
	ID     string   `json:"id"`
	Groups int      `json:"groups"`
	Led    int      `json:"led"`
	Failed []string `json:"failed"`
	Group  []struct {
		Group  string `json:"group"`
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
	} `json:"group"`
}

func (w *witnessHost) summary() witnessSummaryView {
	w.t.Helper()
	code, body := httpGet(w.t, "http://"+w.addr+"/status")
	if code != 200 {
		w.t.Fatalf("witness /status: %d %s", code, body)
	}
	var s witnessSummaryView
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// TestE2EWitnessGroups runs one witness process for three two-gateway
// groups on one nats-server, each gateway its own `edge-agent run`: every
// group elects a gateway, which the witness names; the CLI's status of a
// group shows the shared witness as its witness; SIGKILL of one group's
// leading gateway makes its other gateway lead, which only the witness's
// vote allows, and leaves the other groups' leaders and terms alone; the
// witness process restarted (SIGTERM, start) changes no group's leader or
// term, and it learns every leader again.
func TestE2EWitnessGroups(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	logs := &lineLog{}
	logs.dumpOnFailure(t)
	common := []string{"--heartbeat", "100ms", "--heartbeat-misses", "10", "--witnesses", witnessID}
	members := "gw1=1,gw2=2," + witnessID + "=3"
	groups := []string{"north", "south", "east"}
	sites := map[string]*harness.Site{}
	for _, g := range groups {
		s := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 0, common...)
		s.Group, s.Members, s.Journals, s.Log = g, members, true, logs
		t.Cleanup(s.Stop)
		sites[g] = s
	}
	wdir := t.TempDir()
	w := startWitnessHost(t, append([]string{"--id", witnessID, "--members", members, "--groups", strings.Join(groups, ","),
		"--state-dir", filepath.Join(wdir, "state"), "--nats-url", ns.ClientURL(), "--http-addr", "127.0.0.1:0",
		"--log-format", "json", "--journal", filepath.Join(wdir, "wit.journal")}, common...), logs)
	for _, g := range groups {
		for _, id := range []string{"gw1", "gw2"} {
			if _, err := sites[g].Start(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	gws := []string{"gw1", "gw2"}
	agree := func(g, exclude string, minTerm uint64) harness.Agreement {
		t.Helper()
		ids := gws
		if exclude != "" {
			ids = []string{"gw1"}
			if exclude == "gw1" {
				ids = []string{"gw2"}
			}
		}
		a, err := sites[g].WaitAgreement(ids, exclude, minTerm, 20*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatalf("group %s: %v", g, err)
		}
		return a
	}
	// seen waits until the witness names every group's leader as want.
	seen := func(want map[string]harness.Agreement, what string) {
		t.Helper()
		poll.Until(t, 20*time.Second, "the witness names every group's leader "+what, func() bool {
			s := w.summary()
			if s.Groups != len(groups) || len(s.Failed) != 0 || s.ID != witnessID {
				t.Fatalf("witness summary %+v", s)
			}
			for _, gs := range s.Group {
				if a := want[gs.Group]; gs.Leader != a.Leader || gs.Term != a.Term {
					return false
				}
			}
			return s.Led == len(groups)
		})
	}
	first := map[string]harness.Agreement{}
	for _, g := range groups {
		first[g] = agree(g, "", 0)
	}
	seen(first, "at start")

	// The group's status, asked over the bus, shows the shared witness.
	out, errOut, code := runCLI(t, "status", "--nats-url", ns.ClientURL(), "--group", "south")
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, witnessID+" ") {
			row = l
		}
	}
	if code != 0 || len(strings.Fields(row)) < 2 || strings.Fields(row)[1] != "witness" {
		t.Errorf("status of south: exit %d, the witness's row %q, want ROLE witness:\n%s%s", code, row, out, errOut)
	}
	// The witness's /status of one group is run's /status.
	code, body := httpGet(t, "http://"+w.addr+"/status?group=east")
	var one struct {
		ID, Group, Leader string
	}
	if code != 200 || json.Unmarshal([]byte(body), &one) != nil || one.Group != "east" || one.ID != witnessID || one.Leader != first["east"].Leader {
		t.Errorf("witness /status?group=east: %d %s", code, body)
	}
	if code, _ := httpGet(t, "http://"+w.addr+"/status?group=west"); code != 404 {
		t.Errorf("witness /status?group=west (not served): %d, want 404", code)
	}
	// A witness runs on one processor unless GOMAXPROCS says otherwise.
	if code, body := httpGet(t, "http://"+w.addr+"/metrics"); code != 200 || !strings.Contains(body, "\ngo_sched_gomaxprocs_threads 1\n") {
		line := ""
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "go_sched_gomaxprocs") {
				line = l
			}
		}
		t.Errorf("witness /metrics: %d, GOMAXPROCS line %q, want go_sched_gomaxprocs_threads 1", code, line)
	}
	// And with GOGC=50 unless GOGC says otherwise.
	if code, body := httpGet(t, "http://"+w.addr+"/metrics"); code != 200 || !strings.Contains(body, fmt.Sprintf("\ngo_gc_gogc_percent %d\n", witness.GCPercent)) {
		t.Errorf("witness /metrics: %d, want go_gc_gogc_percent %d", code, witness.GCPercent)
	}

	// SIGKILL of south's leader: gw1 or gw2 alone is no quorum of three;
	// with the witness's vote the other gateway leads.
	victim := first["south"].Leader
	if err := sites["south"].Kill(victim); err != nil {
		t.Fatal(err)
	}
	second := agree("south", victim, first["south"].Term)
	if second.Leader == victim || second.Leader == witnessID {
		t.Fatalf("south after SIGKILL of %s: %s leads", victim, second.Leader)
	}
	now := map[string]harness.Agreement{"north": first["north"], "south": second, "east": first["east"]}
	seen(now, "after the failover of south")
	for _, g := range []string{"north", "east"} {
		if a := agree(g, "", 0); a.Leader != first[g].Leader || a.Term != first[g].Term {
			t.Errorf("group %s changed from %+v to %+v while south failed over", g, first[g], a)
		}
	}

	// The witness process restarted: no group's leader or term changes.
	w.terminate()
	w.start()
	seen(now, "after its restart")
	for g, want := range now {
		exclude := ""
		if g == "south" {
			exclude = victim
		}
		if a := agree(g, exclude, 0); a.Leader != want.Leader || a.Term != want.Term {
			t.Errorf("group %s changed from %+v to %+v across the witness's restart", g, want, a)
		}
	}
	// The journals of each group, its witness's included: no overlap, no
	// double vote, no lease of the witness.
	w.terminate()
	for _, g := range groups {
		sites[g].Stop()
		entries, err := journalcheck.ReadFiles(filepath.Join(sites[g].Dir, "gw1.journal"), filepath.Join(sites[g].Dir, "gw2.journal"),
			filepath.Join(wdir, "wit.journal."+g))
		if err != nil {
			t.Fatal(err)
		}
		rep := journalcheck.Check(entries, time.Now())
		if !rep.OK() {
			t.Errorf("group %s journals: %s; overlaps %v; double votes %v; split terms %v", g, rep, rep.Overlaps, rep.DoubleVotes, rep.SplitTerms)
		}
		votes := 0
		for _, e := range entries {
			if e.ID == witnessID && e.Event == "state" && e.VotedFor != "" {
				votes++
			}
		}
		if votes == 0 {
			t.Errorf("group %s: the witness's journal has no vote", g)
		}
		for _, iv := range rep.Intervals {
			if iv.ID == witnessID {
				t.Errorf("group %s: the witness held a lease in term %d", g, iv.Term)
			}
		}
	}
}

// TestE2EWitnessGroupsRefused: edge-agent witness exits 2 with one line
// for a member that is not a witness, a group listed twice and an empty
// groups file.
func TestE2EWitnessGroupsRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "groups")
	if err := os.WriteFile(empty, []byte("# no group yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--members", "gw1=1,gw2=2,wit=3", "--witnesses", "wit", "--state-dir", dir, "--nats-url", "nats://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"--id", "gw1", "--groups", "a,b"}, base...), `id: "gw1" is not one of witnesses [wit]`},
		{append([]string{"--id", "wit", "--groups", "a,b,a"}, base...), `group "a" is listed twice`},
		{append([]string{"--id", "wit", "--groups-file", empty}, base...), "no group in it"},
		{append([]string{"--id", "wit", "--groups", "a", "--embedded-nats"}, base...), "embedded_nats: a witness process connects"},
	} {
		_, errOut, code := runCLI(t, append([]string{"witness"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("witness %v: exit %d, %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
}
