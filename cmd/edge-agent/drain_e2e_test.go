package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// statusOf reads the /status of a running agent of site.
func statusOf(t *testing.T, site *harness.Site, id string) (agent.StatusReport, error) {
	t.Helper()
	p := site.Proc(id)
	if p == nil {
		return agent.StatusReport{}, fmt.Errorf("%s not running", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.Status(ctx)
}

// metricOf reads one unlabelled series from the /metrics of a running agent.
func metricOf(t *testing.T, p *harness.Proc, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	samples, err := harness.ParseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := harness.Find(samples, name, nil)
	if !ok {
		t.Fatalf("%s: no %s", p.ID, name)
	}
	return v
}

// waitLeader waits until every agent of ids agrees that want leads (a
// loaded machine may start the highest member last: hold-down preemption
// then hands it leadership a hold-down later).
func waitLeader(t *testing.T, site *harness.Site, ids []string, want string, timeout time.Duration) harness.Agreement {
	t.Helper()
	var a harness.Agreement
	var err error
	poll.Until(t, timeout, want+" leads", func() bool {
		a, err = site.WaitAgreement(ids, "", 0, 20*time.Millisecond, time.Second)
		return err == nil && a.Leader == want
	})
	return a
}

// neverLeads samples, for d, every running agent's /status every 50 ms and
// fails if one of them names id as leader, or id says it leads.
func neverLeads(t *testing.T, site *harness.Site, id string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, o := range site.Running() {
			st, err := statusOf(t, site, o)
			if err != nil {
				continue // starting or stopping
			}
			if st.Leader == id || (o == id && st.Role != "follower") {
				t.Fatalf("%s reports leader %q, role %s: the drained %s leads or stands", o, st.Leader, st.Role, id)
			}
		}
		time.Sleep(50 * time.Millisecond) // the sampling period
	}
}

// TestE2EDrain drains the leader of three agent processes: another leads at
// once and the drained one never leads, past six hold-downs and after a
// restart (it does not even stand); a transfer to it is refused; undrained,
// hold-down preemption gives it leadership back; a transfer away from it
// then says that preemption will undo it. Unknown ids are refused.
func TestE2EDrain(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	logs := &lineLog{echo: testing.Verbose() && os.Getenv("E2E_LOG") != ""}
	// H = 250 ms: the shared test machine stalls processes for hundreds of
	// milliseconds at times, and this test is about who may lead, not speed.
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "250ms", "--hold-down", "1s")
	site.Log = logs
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	a := waitLeader(t, site, ids, "gw3", 20*time.Second)
	nats := []string{"--nats-url", ns.ClientURL(), "--group", "site"}

	out, errOut, code := runCLI(t, append([]string{"drain", "gw9"}, nats...)...)
	if code != 1 || !strings.Contains(errOut, `"gw9" is not a member of group "site"`) {
		t.Fatalf("drain gw9: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, append([]string{"drain", "gw3"}, nats...)...)
	if code != 0 || !strings.Contains(out, "gw3 drained: it") {
		t.Fatalf("drain gw3: exit %d, %q %q", code, out, errOut)
	}
	b, err := site.WaitAgreement(ids, "gw3", a.Term, 20*time.Millisecond, 5*time.Second)
	if err != nil || b.Leader != "gw2" {
		t.Fatalf("after drain: leader %q: %v", b.Leader, err)
	}
	st, err := statusOf(t, site, "gw3")
	if err != nil || !st.Drained {
		t.Fatalf("gw3 /status: drained=%v, %v", st.Drained, err)
	}
	neverLeads(t, site, "gw3", 4*time.Second) // four hold-downs
	out, _, _ = runCLI(t, append([]string{"status", "--json"}, nats...)...)
	var reports []map[string]any
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if d, ok := r["drained"].(bool); !ok || d != (r["id"] == "gw3") {
			t.Errorf("status --json: %v has drained=%v", r["id"], r["drained"])
		}
	}
	out, _, _ = runCLI(t, append([]string{"status"}, nats...)...)
	if !strings.Contains(out, "follower DRAINED") {
		t.Errorf("status table without the DRAINED marker:\n%s", out)
	}
	out, errOut, code = runCLI(t, append([]string{"transfer", "gw3"}, nats...)...)
	if code != 1 || !strings.Contains(errOut, "gw3 is drained") {
		t.Errorf("transfer to the drained gw3: exit %d, %q %q", code, out, errOut)
	}

	// A restart keeps it drained: it does not stand even once.
	if err := site.Kill("gw3"); err != nil {
		t.Fatal(err)
	}
	stood := logs.count("gw3:", "standing for election")
	if _, err := site.Start("gw3"); err != nil {
		t.Fatal(err)
	}
	neverLeads(t, site, "gw3", 4*time.Second)
	if n := logs.count("gw3:", "standing for election"); n != stood {
		t.Errorf("the drained gw3 stood %d times after its restart", n-stood)
	}
	if st, err := statusOf(t, site, "gw3"); err != nil || !st.Drained {
		t.Fatalf("gw3 after restart: drained=%v, %v", st.Drained, err)
	}

	// Undrained, hold-down preemption hands leadership back to it.
	out, errOut, code = runCLI(t, append([]string{"undrain", "gw3"}, nats...)...)
	if code != 0 || !strings.Contains(out, "gw3 undrained") {
		t.Fatalf("undrain gw3: exit %d, %q %q", code, out, errOut)
	}
	c, err := site.WaitAgreement(ids, "gw2", b.Term, 20*time.Millisecond, 10*time.Second)
	if err != nil || c.Leader != "gw3" {
		t.Fatalf("after undrain: leader %q: %v", c.Leader, err)
	}

	// A transfer away from the healthy highest member says that
	// preemption gives it back.
	out, errOut, code = runCLI(t, append([]string{"transfer", "gw2"}, nats...)...)
	want := "note: gw3 (the leader until now) has a higher priority than gw2 and is healthy: hold-down preemption hands leadership back to it after 1s; drain it to keep it out (edge-agent drain gw3)"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("transfer gw2: exit %d, stdout %q, stderr %q; want the note %q", code, out, errOut, want)
	}
}

// TestE2EDuplicateID starts a second process with the leader's id: both
// log an ERROR naming the id, export edge_election_duplicate_id 1 and stand
// aside, the other two elect among themselves, and the leader changes at
// most a few times in 15 s (an agent without the check flapped 60 times).
// Once the duplicate is gone the member takes part again.
func TestE2EDuplicateID(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	logs := &lineLog{echo: testing.Verbose() && os.Getenv("E2E_LOG") != ""}
	bin := binary
	if b := os.Getenv("E2E_DUPLICATE_BINARY"); b != "" {
		bin = b // to measure another build
	}
	h := "250ms"
	if v := os.Getenv("E2E_DUPLICATE_HEARTBEAT"); v != "" {
		h = v // to measure at another H
	}
	site := harness.NewSite(bin, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", h)
	site.Log = logs
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	waitLeader(t, site, ids, "gw3", 20*time.Second)
	// The duplicate: the same id, its own state directory.
	dup := harness.NewSite(bin, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", h)
	dup.Log = &prefixed{w: logs, prefix: "dup-"}
	defer dup.Stop()
	// Leader changes as gw1 counts them (changes of the leader's id: a
	// handover between two processes of one id is not one) and elections
	// (its term: every one is).
	before := metricOf(t, site.Proc("gw1"), "edge_election_leader_changes_total")
	termBefore := metricOf(t, site.Proc("gw1"), "edge_election_term")
	start := time.Now()
	if _, err := dup.Start("gw3"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(15 * time.Second))) // the measuring period
	changes := metricOf(t, site.Proc("gw1"), "edge_election_leader_changes_total") - before
	terms := metricOf(t, site.Proc("gw1"), "edge_election_term") - termBefore
	t.Logf("in the 15 s after a second gw3 started (H = %s), gw1 saw %v leader changes and %v new terms", h, changes, terms)
	if changes > 4 || terms > 3 {
		t.Errorf("%v leader changes and %v terms in 15 s with a duplicate id, want at most 4 and 3 (gw3 -> none -> gw2)", changes, terms)
	}
	poll.Until(t, 5*time.Second, "both gw3 processes log the duplicate", func() bool {
		all := logs.count(`gw3:`, `"level":"ERROR"`, `another process speaks with this member's id`, `"duplicate_id":"gw3"`)
		dups := logs.count(`dup-gw3:`, `"level":"ERROR"`, `another process speaks with this member's id`, `"duplicate_id":"gw3"`)
		return dups > 0 && all > dups // "gw3:" is in "dup-gw3:" too
	})
	for _, p := range []*harness.Proc{site.Proc("gw3"), dup.Proc("gw3")} {
		if v := metricOf(t, p, "edge_election_duplicate_id"); v != 1 {
			t.Errorf("edge_election_duplicate_id = %v", v)
		}
	}
	others, err := site.WaitAgreement([]string{"gw1", "gw2"}, "gw3", 0, 20*time.Millisecond, 5*time.Second)
	if err != nil || others.Leader != "gw2" {
		t.Fatalf("with the duplicate: leader %q, %v", others.Leader, err)
	}
	for _, p := range []*harness.Proc{site.Proc("gw3"), dup.Proc("gw3")} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := p.Status(ctx)
		cancel()
		if err != nil || st.DuplicateInstance == "" || st.Role != "follower" {
			t.Errorf("a gw3 process: %+v, %v", st, err)
		}
	}
	if logs.count(`"level":"ERROR"`, "another process speaks") > 2*16 {
		t.Errorf("the duplicate's ERROR was not rate-limited: %d lines", logs.count("another process speaks"))
	}
	// The duplicate goes: gw3 takes part again, and (hold-down) leads.
	if err := dup.Kill("gw3"); err != nil {
		t.Fatal(err)
	}
	if _, err := site.WaitAgreement(ids, "gw2", others.Term, 20*time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := metricOf(t, site.Proc("gw3"), "edge_election_duplicate_id"); v != 0 {
		t.Errorf("edge_election_duplicate_id = %v after the duplicate left", v)
	}
}

// prefixed writes to w with prefix before every line.
type prefixed struct {
	w      *lineLog
	prefix string
}

func (p *prefixed) Write(b []byte) (int, error) {
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out.WriteString(p.prefix + l + "\n")
	}
	_, err := p.w.Write([]byte(out.String()))
	return len(b), err
}
