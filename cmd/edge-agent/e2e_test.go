package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// binary is the edge-agent built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edge-agent-e2e-")
	if err != nil {
		panic(err)
	}
	binary, err = harness.BuildBinary(dir)
	if err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestE2EFailoverWithProcesses runs five agent processes on a real
// nats-server: the highest rank leads, SIGKILL of the leader gives a new
// leader in a higher term, SIGTERM hands over and exits 0.
func TestE2EFailoverWithProcesses(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	dir := t.TempDir()
	site := harness.NewSite(binary, ns.ClientURL(), dir, 5, "--heartbeat", "100ms", "--heartbeat-misses", "3", "--preemption", "never")
	site.Journals = true
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	first, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Leader != "gw5" {
		t.Fatalf("leader %s, want gw5 (highest priority)", first.Leader)
	}

	// The operating contract of /status, by field name.
	leader := site.Proc("gw5")
	code, body := httpGet(t, "http://"+leader.HTTPAddr+"/status")
	if code != 200 {
		t.Fatalf("/status: %d", code)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "group", "algorithm", "role", "leader", "term", "quorum", "members"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/status lacks %q: %s", k, body)
		}
	}
	if raw["role"] != "leader" || raw["id"] != "gw5" || raw["algorithm"] != "bully" {
		t.Errorf("/status of the leader: %s", body)
	}
	q, _ := raw["quorum"].(map[string]any)
	if q["size"] != float64(3) || q["ok"] != true {
		t.Errorf("quorum: %v", q)
	}
	members, _ := raw["members"].([]any)
	if len(members) != 5 {
		t.Fatalf("members: %v", members)
	}
	m0, _ := members[0].(map[string]any)
	for _, k := range []string{"id", "priority", "alive"} {
		if _, ok := m0[k]; !ok {
			t.Errorf("member lacks %q: %v", k, m0)
		}
	}
	if code, _ := httpGet(t, "http://"+leader.HTTPAddr+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := httpGet(t, "http://"+leader.HTTPAddr+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
	if _, metrics := httpGet(t, "http://"+leader.HTTPAddr+"/metrics"); !strings.Contains(metrics, `edge_election_is_leader{group="site"} 1`) ||
		!strings.Contains(metrics, `edge_election_messages_total{direction="out",group="site",type="heartbeat"}`) {
		t.Errorf("/metrics of the leader lacks series:\n%s", metrics)
	}

	// edge-agent status --json asks every agent over NATS.
	out, err := exec.Command(binary, "status", "--json", "--nats-url", ns.ClientURL(), "--group", "site").Output()
	if err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var reports []map[string]any
	if err := json.Unmarshal(out, &reports); err != nil || len(reports) != 5 {
		t.Fatalf("status --json: %d reports, err %v:\n%s", len(reports), err, out)
	}
	for _, r := range reports {
		if r["leader"] != "gw5" {
			t.Errorf("status --json: %v", r)
		}
	}
	table, err := exec.Command(binary, "status", "--nats-url", ns.ClientURL(), "--group", "site").Output()
	if err != nil || !strings.Contains(string(table), "leader gw5") {
		t.Errorf("status table: %v\n%s", err, table)
	}

	// Crash: SIGKILL the leader.
	if err := site.Kill("gw5"); err != nil {
		t.Fatal(err)
	}
	survivors := []string{"gw1", "gw2", "gw3", "gw4"}
	second, err := site.WaitAgreement(survivors, "gw5", first.Term, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second.Leader != "gw4" || second.Term <= first.Term {
		t.Fatalf("after SIGKILL: %+v (before %+v)", second, first)
	}

	// Graceful: SIGTERM the new leader; it hands over and exits 0.
	if err := site.Terminate("gw4"); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
	third, err := site.WaitAgreement([]string{"gw1", "gw2", "gw3"}, "gw4", second.Term, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if third.Leader != "gw3" {
		t.Fatalf("after SIGTERM: %+v", third)
	}

	// The killed leader restarts from its persisted term and follows.
	if _, err := site.Start("gw5"); err != nil {
		t.Fatal(err)
	}
	if _, err := site.WaitAgreement([]string{"gw1", "gw2", "gw3", "gw5"}, "", second.Term, 5*time.Millisecond, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := os.ReadFile(filepath.Join(dir, "gw5", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hs struct{ Term uint64 }
	if err := json.Unmarshal(st, &hs); err != nil || hs.Term < third.Term {
		t.Fatalf("gw5 persisted %s, want term >= %d", st, third.Term)
	}

	// resign through the CLI: the leader steps down, another takes over.
	out, err = exec.Command(binary, "resign", "--nats-url", ns.ClientURL(), "--group", "site").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "gw3 resigned") {
		t.Fatalf("resign: %v\n%s", err, out)
	}
	if _, err := site.WaitAgreement([]string{"gw1", "gw2", "gw3", "gw5"}, "gw3", third.Term, 2*time.Millisecond, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// Across the crash, the handover and the resign: never two valid leases
	// at once, one vote per term, terms never back.
	if rep := checkJournals(t, site); len(rep.Intervals) < 4 {
		t.Fatalf("journals: %s; want at least 4 lease intervals", rep)
	}
}

// checkJournals stops the site and fails the test unless the merged
// leadership journals show no lease overlap, no double vote, no term led
// twice and no term going back.
func checkJournals(t *testing.T, site *harness.Site) *journalcheck.Report {
	t.Helper()
	site.Stop()
	entries, err := journalcheck.ReadFiles(site.JournalPaths()...)
	if err != nil {
		t.Fatal(err)
	}
	rep := journalcheck.Check(entries, time.Now())
	t.Logf("journals: %s", rep)
	if !rep.OK() {
		t.Fatalf("journals: %s; overlaps %v; double votes %v; split terms %v; regressions %v",
			rep, rep.Overlaps, rep.DoubleVotes, rep.SplitTerms, rep.TermRegressions)
	}
	return rep
}

// TestE2EBadConfigExitsTwo: a bad config or flag is one clear error naming
// the key, and exit code 2.
func TestE2EBadConfigExitsTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("id: gw1\ngroup: site\nmembers: gw1,gw2,gw3\nheartbeat: soon\nstate_dir: "+dir+"\nnats:\n  urls: [nats://127.0.0.1:4222]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("id: gw1\ngroup: site\nmembers: gw1,gw2,gw3\nheartbeat: 100ms\nstate_dir: "+dir+"\nnats:\n  urls: [nats://127.0.0.1:4222]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check-config", "--config", bad}, 2, "heartbeat"},
		{[]string{"run", "--config", bad}, 2, "heartbeat"},
		{[]string{"run", "--config", good, "--heartbeat-misses", "x"}, 2, "--heartbeat-misses"},
		{[]string{"run", "--config", good, "--id", "gw9"}, 2, "id"},
		{[]string{"check-config", "--config", good}, 0, "config OK"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"version"}, 0, "edge-agent"},
	} {
		cmd := exec.Command(binary, tc.args...)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d mentioning %q", tc.args, code, out, tc.code, tc.want)
		}
		if tc.code == 2 && strings.Count(strings.TrimSpace(string(out)), "\n") > 0 && tc.args[0] != "frobnicate" {
			t.Errorf("%v: want one line, got %q", tc.args, out)
		}
	}
}

// TestE2EFastFailoverOnServerAdvisory: with system-account access, the
// survivors act on the server's report that the leader's connection closed
// (the fast path, counted in edge_election_fast_suspicions_total), and no
// two agents ever hold a lease at once.
func TestE2EFastFailoverOnServerAdvisory(t *testing.T) {
	ns, err := harness.StartNATSWithSystemAccount()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	// A long heartbeat makes the heartbeat path slow (D = 3s), so a quick
	// failover can only come from the advisory.
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "1s", "--preemption", "never",
		"--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword)
	site.Journals = true
	logs := &lineLog{}
	site.Log = logs
	logs.dumpOnFailure(t)
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Every follower must have a heartbeat that carries the leader's
	// connection identity: poll until each has received two.
	heard := map[string]bool{first.Leader: true}
	poll.UntilWhy(t, 10*time.Second, "two heartbeats at every follower", func() (bool, string) {
		for _, id := range site.IDs() {
			if heard[id] {
				continue
			}
			_, m := httpGet(t, "http://"+site.Proc(id).HTTPAddr+"/metrics")
			if !strings.Contains(m, `edge_election_messages_total{direction="in",group="site",type="heartbeat"} 2`) &&
				!strings.Contains(m, `edge_election_messages_total{direction="in",group="site",type="heartbeat"} 3`) {
				return false, id + " received no heartbeats"
			}
			heard[id] = true
		}
		return true, ""
	})
	if err := site.Kill(first.Leader); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, id := range site.IDs() {
		if id != first.Leader {
			survivors = append(survivors, id)
		}
	}
	killed := time.Now()
	next, err := site.WaitAgreement(survivors, first.Leader, first.Term, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s in %s (D is 3s)", next.Leader, next.At.Sub(killed))
	fast := 0
	for _, id := range survivors {
		_, m := httpGet(t, "http://"+site.Proc(id).HTTPAddr+"/metrics")
		if strings.Contains(m, `edge_election_fast_suspicions_total{group="site"} 1`) {
			fast++
		}
	}
	if fast == 0 {
		t.Fatalf("no survivor took the fast path")
	}
	// The agents run no leader work (no leader.* in their config): the
	// leader's heartbeats said so, and a survivor that acted on the report
	// started no fence (protocol 6, docs/DESIGN-NOTES.md, Fast failover, 6).
	leader := `"leader":"` + first.Leader + `"`
	acted, unfenced := logs.count("electing now", leader), logs.count("electing now", leader, `"fence":0}`)
	if acted != fast || unfenced != acted {
		t.Fatalf("%d survivors took the fast path, %d logged acting on the report, %d of them without a fence", fast, acted, unfenced)
	}
	checkJournals(t, site)
}

// TestE2ERingFailover: five Ring agent processes; SIGKILL the leader, then
// the new leader's ring successor too: every survivor agrees on one leader
// and no two leases ever overlap.
func TestE2ERingFailover(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 5, "--algorithm", "ring", "--heartbeat", "100ms", "--preemption", "never")
	site.Journals = true
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Leader != "gw5" {
		t.Fatalf("ring elected %s, want gw5", first.Leader)
	}
	st, err := site.Proc("gw1").Status(t.Context())
	if err != nil || st.Algorithm != "ring" {
		t.Fatalf("status %+v %v", st, err)
	}
	if err := site.Kill("gw5"); err != nil {
		t.Fatal(err)
	}
	second, err := site.WaitAgreement([]string{"gw1", "gw2", "gw3", "gw4"}, "gw5", first.Term, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The ring runs by rank, lowest first: gw4's successor is gw5 (dead),
	// then gw1.
	if err := site.Kill("gw1"); err != nil {
		t.Fatal(err)
	}
	survivors := []string{"gw2", "gw3", "gw4"}
	third, err := site.WaitAgreement(survivors, "", second.Term-1, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ring: %s (term %d) -> %s (term %d) -> %s (term %d)", first.Leader, first.Term, second.Leader, second.Term, third.Leader, third.Term)
	checkJournals(t, site)
}
