package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// witnessSite is a two-gateway site with a witness, as agent processes on a
// real nats-server: gw1 and gw2 are the gateways, wit the witness, ranked
// above both (priority 3) so that any member that did not know it never
// stands would expect it to. H = 100 ms and k = 10 (D = 1 s, a lease of
// 880 ms): the test holds the leader to one term for seconds while processes
// start and stop, and on a shared, loaded 2-core machine every agent process
// was seen to stall for over half a second at once (the leader's lease ran
// out with k = 3 in 5 runs of 20, and with k = 5 in 2).
type witnessSite struct {
	t    *testing.T
	site *harness.Site
	nats []string // the CLI's bus and group flags
}

const witnessID = "wit"

func startWitnessSite(t *testing.T, algorithm string) *witnessSite {
	t.Helper()
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 0,
		"--algorithm", algorithm, "--heartbeat", "100ms", "--heartbeat-misses", "10", "--witnesses", witnessID)
	site.Members = "gw1=1,gw2=2," + witnessID + "=3"
	site.Journals = true
	// The witness is given a duty and a VIP on an interface it does not
	// have, as a site file shared with the gateways would: it starts, and
	// warns that it ignores them.
	site.MemberArgs = func(id string) []string {
		if id != witnessID {
			return nil
		}
		return []string{"--leader-command", "/nonexistent/duty", "--leader-vip", "192.0.2.10/24@nosuchif0"}
	}
	logs := &lineLog{}
	site.Log = logs
	logs.dumpOnFailure(t)
	t.Cleanup(site.Stop)
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	const warn = "this member is a witness: it never leads, so the leader duty and virtual IPs of the config (leader.*) are ignored"
	if n := logs.count(`"level":"WARN"`, warn); n != 1 {
		t.Errorf("%d WARN lines %q at start, want 1 (from the witness)", n, warn)
	}
	return &witnessSite{t: t, site: site, nats: []string{"--nats-url", ns.ClientURL(), "--group", "site"}}
}

// check reads the /status of every running agent once and fails the test
// if one names the witness as leader or the witness is not a follower; it
// returns the reports by id (an agent that does not answer is left out).
func (w *witnessSite) check() map[string]statusView {
	w.t.Helper()
	out := map[string]statusView{}
	for _, id := range w.site.Running() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := w.site.Proc(id).Status(ctx)
		cancel()
		if err != nil {
			continue // frozen, starting or stopping
		}
		if st.Leader == witnessID || (id == witnessID && st.Role != "follower") {
			w.t.Fatalf("%s reports leader %q, role %s: the witness leads or stands", id, st.Leader, st.Role)
		}
		out[id] = statusView{leader: st.Leader, term: st.Term, role: st.Role}
	}
	return out
}

type statusView struct {
	leader, role string
	term         uint64
}

// agree waits until the agents ids agree on a gateway leading above
// minTerm (not exclude), checking the witness on every poll.
func (w *witnessSite) agree(ids []string, exclude string, minTerm uint64) harness.Agreement {
	w.t.Helper()
	var a harness.Agreement
	poll.Until(w.t, 20*time.Second, "a leader agreed by "+strings.Join(ids, ", "), func() bool {
		w.check()
		var err error
		a, err = w.site.WaitAgreement(ids, exclude, minTerm, 10*time.Millisecond, 100*time.Millisecond)
		return err == nil
	})
	return a
}

// holds checks, for d, every 50 ms, that every running agent that answers
// names leader in term, and that leader says it leads; only one agent
// says it leads.
func (w *witnessSite) holds(leader string, term uint64, d time.Duration, what string) {
	w.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	samples := 0
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		leaders := 0
		for id, st := range w.check() {
			if st.leader != leader || st.term != term {
				w.t.Fatalf("%s: %s reports leader %q term %d, want %s term %d", what, id, st.leader, st.term, leader, term)
			}
			if st.role == "leader" {
				leaders++
			}
		}
		if leaders != 1 {
			w.t.Fatalf("%s: %d agents say they lead", what, leaders)
		}
		samples++
	}
	w.t.Logf("%s: %s led term %d through %d samples over %s", what, leader, term, samples, d)
}

// TestE2EWitnessSite runs two gateways and a witness, for each algorithm:
// a gateway leads, never the witness (checked on every poll, and from the
// journals at the end: no lease of the witness, no two leases at once);
// the witness shows as a witness in /status, status and metrics; a transfer
// to it is refused; with the witness killed the leader keeps leading in the
// same term, and the witness's restart changes nothing; SIGKILL of the
// leading gateway makes the other lead; SIGSTOP of the leading gateway makes
// the other lead, and after SIGCONT exactly one leads.
func TestE2EWitnessSite(t *testing.T) {
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) { testWitnessSite(t, alg) })
	}
}

func testWitnessSite(t *testing.T, alg string) {
	w := startWitnessSite(t, alg)
	all := []string{"gw1", "gw2", witnessID}
	// gw2, the higher gateway, leads: at once, or a hold-down after gw1
	// led first on the witness's vote while gw2 was starting.
	var first harness.Agreement
	poll.Until(t, 20*time.Second, "gw2 leads", func() bool { first = w.agree(all, "", 0); return first.Leader == "gw2" })
	w.checkReports()

	// The witness down: the gateways are a quorum, the leader keeps leading.
	if err := w.site.Kill(witnessID); err != nil {
		t.Fatal(err)
	}
	w.holds("gw2", first.Term, 10*100*time.Millisecond, "witness down")
	// The witness back: it follows, and nothing changes.
	if _, err := w.site.Start(witnessID); err != nil {
		t.Fatal(err)
	}
	if a := w.agree(all, "", 0); a.Leader != "gw2" || a.Term != first.Term {
		t.Fatalf("after the witness's restart: %s leads term %d, want gw2 term %d", a.Leader, a.Term, first.Term)
	}
	w.holds("gw2", first.Term, 10*100*time.Millisecond, "witness restarted")

	// SIGKILL of the leading gateway: the other leads on the witness's vote.
	if err := w.site.Kill("gw2"); err != nil {
		t.Fatal(err)
	}
	second := w.agree([]string{"gw1", witnessID}, "gw2", first.Term)
	if second.Leader != "gw1" {
		t.Fatalf("after SIGKILL of gw2: %s leads, want gw1", second.Leader)
	}
	if _, err := w.site.Start("gw2"); err != nil {
		t.Fatal(err)
	}
	// Hold-down preemption may hand leadership back to gw2.
	third := w.agree(all, "", second.Term-1)

	// SIGSTOP of the leading gateway: the other leads; after SIGCONT the
	// frozen one finds its lease over and follows.
	frozen, other := third.Leader, "gw1"
	if frozen == "gw1" {
		other = "gw2"
	}
	if err := w.site.Freeze(frozen); err != nil {
		t.Fatal(err)
	}
	fourth := w.agree([]string{other, witnessID}, frozen, third.Term)
	if fourth.Leader != other {
		t.Fatalf("after SIGSTOP of %s: %s leads, want %s", frozen, fourth.Leader, other)
	}
	if err := w.site.Thaw(frozen); err != nil {
		t.Fatal(err)
	}
	fifth := w.agree(all, "", fourth.Term-1)
	w.holds(fifth.Leader, fifth.Term, 5*100*time.Millisecond, "after SIGCONT of "+frozen)
	t.Logf("%s: gw2 (term %d) -> SIGKILL -> gw1 (term %d); %s (term %d) -> SIGSTOP -> %s (term %d) -> SIGCONT -> %s (term %d)",
		alg, first.Term, second.Term, frozen, third.Term, other, fourth.Term, fifth.Leader, fifth.Term)

	rep := checkJournals(t, w.site)
	for _, iv := range rep.Intervals {
		if iv.ID == witnessID {
			t.Errorf("the witness held a lease in term %d", iv.Term)
		}
	}
}

// checkReports checks how the witness is shown: /status and members[] of
// every agent, the status table, edge_election_witness, and a transfer to
// it refused by the CLI.
func (w *witnessSite) checkReports() {
	t := w.t
	t.Helper()
	for _, id := range w.site.Running() {
		code, body := httpGet(t, "http://"+w.site.Proc(id).HTTPAddr+"/status")
		if code != 200 {
			t.Fatalf("%s /status: %d", id, code)
		}
		var raw struct {
			Witness *bool  `json:"witness"`
			Role    string `json:"role"`
			Members []struct {
				ID      string `json:"id"`
				Witness *bool  `json:"witness"`
			} `json:"members"`
		}
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Witness == nil || *raw.Witness != (id == witnessID) {
			t.Errorf("%s /status: witness %v: %s", id, raw.Witness, body)
		}
		for _, m := range raw.Members {
			if m.Witness == nil || *m.Witness != (m.ID == witnessID) {
				t.Errorf("%s /status: member %s witness %v", id, m.ID, m.Witness)
			}
		}
		want := 0.0
		if id == witnessID {
			want = 1
		}
		if v := metricOf(t, w.site.Proc(id), "edge_election_witness"); v != want {
			t.Errorf("%s: edge_election_witness %v, want %v", id, v, want)
		}
	}
	out, errOut, code := runCLI(t, append([]string{"status"}, w.nats...)...)
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, witnessID+" ") {
			row = l
		}
	}
	if code != 0 || len(strings.Fields(row)) < 2 || strings.Fields(row)[1] != "witness" {
		t.Errorf("status: exit %d, the witness's row %q, want ROLE witness:\n%s%s", code, row, out, errOut)
	}
	out, errOut, code = runCLI(t, append([]string{"transfer", witnessID}, w.nats...)...)
	if want := fmt.Sprintf("%s is a witness of group %q: it votes but never leads", witnessID, "site"); code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("transfer to the witness: exit %d, %q %q; want exit 1 and %q", code, out, errOut, want)
	}
}

// TestE2EWitnessConfigRefused: run and check-config exit 2 with one line
// naming the key for a witness that is not a member and for a group of
// witnesses only.
func TestE2EWitnessConfigRefused(t *testing.T) {
	dir := t.TempDir()
	base := "id: gw1\ngroup: site\nmembers: gw1,gw2,wit\nstate_dir: " + dir + "\nnats:\n  urls: [nats://127.0.0.1:4222]\n"
	file := func(name, extra string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(base+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, all := file("good.yaml", "witnesses: [wit]\n"), file("all.yaml", "witnesses: [gw1, gw2, wit]\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check-config", "--config", good}, 0, "witnesses: wit (this member is a gateway)"},
		{[]string{"run", "--config", good, "--witnesses", "gw9"}, 2, `--witnesses: "gw9" is not in members`},
		{[]string{"check-config", "--config", all}, 2, "line 7: witnesses: every member is a witness"},
		{[]string{"run", "--config", all}, 2, "line 7: witnesses: every member is a witness"},
	} {
		out, errOut, code := runCLI(t, tc.args...)
		got := out + errOut
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", tc.args, code, got, tc.code, tc.want)
		}
		if tc.code == 2 && strings.Count(strings.TrimSpace(got), "\n") > 0 {
			t.Errorf("%v: want one line, got %q", tc.args, got)
		}
	}
}
