package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// TestE2ELeaseShortenedByShortD runs three agent processes whose timings
// each pass their own config's check but not each other's, as on a site
// whose heartbeat_misses is being changed one gateway at a time: gw3 (the
// highest rank, so the leader) has heartbeat_misses 5 and the default lease
// for it (H 200 ms, D 1 s, lease 760 ms), gw1 and gw2 have 3 (D 600 ms).
// gw3's lease, resting on acknowledgements that promise 600 ms, must end
// before they vote for another leader: each time gw3 is frozen (SIGSTOP),
// gw1 and gw2 elect one of themselves, and the merged journals show no
// instant at which two agents held a valid lease. Meanwhile the shortened
// lease must not stop the leader's duty between two renewals: each of
// gw3's leaderships starts its duty once.
//
// With a build that ignored the promise (at H = 100 ms) the journals
// overlapped in every cycle, by 2 to 5 ms: the pre-vote and the vote took
// that much of the 80 ms by which gw3's lease outlived the others' D; with
// the duty's stop deadline taken from the configured lease, the duty was
// stopped before each renewal.
func TestE2ELeaseShortenedByShortD(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "duty.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $EDGE_ELECTION_ID $EDGE_ELECTION_TERM >> "+starts+"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	site := harness.NewSite(binary, ns.ClientURL(), dir, 3, "--heartbeat", "200ms", "--preemption", "immediate", "--fast-failover=false",
		"--leader-command", script)
	site.MemberArgs = func(id string) []string {
		if id == "gw3" {
			return []string{"--heartbeat-misses", "5"}
		}
		return []string{"--heartbeat-misses", "3"}
	}
	site.Journals = true
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	startsOf := func(id string, term uint64) int {
		data, _ := os.ReadFile(starts)
		return strings.Count(string(data), fmt.Sprintf("%s %d\n", id, term))
	}
	ids := site.IDs()
	var term uint64
	for cycle := range 5 {
		lead, err := site.WaitAgreement(ids, "", term, 5*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if lead.Leader != "gw3" {
			t.Fatalf("cycle %d: %s leads, want gw3 (highest rank, preemption immediate)", cycle, lead.Leader)
		}
		// The leader says whose D shortens its lease, and its lease is no
		// longer than what 600 ms allows (600 - 200 - a tick, less a
		// tick); its duty runs.
		poll.UntilWhy(t, 5*time.Second, "gw3 reports gw1 and gw2 shortening its lease", func() (bool, string) {
			st, err := site.Proc("gw3").Status(t.Context())
			if err != nil {
				return false, err.Error()
			}
			if st.LeaseRemainingMS > 360 {
				return false, fmt.Sprintf("lease remaining %d ms", st.LeaseRemainingMS)
			}
			for _, m := range st.Members {
				if m.ID != "gw3" && (m.PromiseMS != 600 || !m.ShortensLease) {
					return false, fmt.Sprintf("%s: promise %d ms, shortens %v", m.ID, m.PromiseMS, m.ShortensLease)
				}
			}
			if st.Duty == nil || !st.Duty.Running {
				return false, fmt.Sprintf("duty %+v", st.Duty)
			}
			_, body := httpGet(t, "http://"+site.Proc("gw3").HTTPAddr+"/metrics")
			samples, err := harness.ParseMetrics(strings.NewReader(body))
			if err != nil {
				return false, err.Error()
			}
			if v, _ := harness.Find(samples, "edge_election_lease_shortened_by", nil); v != 2 {
				return false, fmt.Sprintf("edge_election_lease_shortened_by %v, want 2", v)
			}
			return true, ""
		})
		// Ten renewals later the duty still runs, started once.
		ledSince := time.Now()
		poll.UntilWhy(t, 10*time.Second, "gw3 leads for ten heartbeat periods", func() (bool, string) {
			st, err := site.Proc("gw3").Status(t.Context())
			if err != nil || st.Role != "leader" || st.Term != lead.Term {
				return false, fmt.Sprintf("gw3 %s in term %d, %v", st.Role, st.Term, err)
			}
			return time.Since(ledSince) > 2*time.Second, "leading"
		})
		if n := startsOf("gw3", lead.Term); n != 1 {
			t.Fatalf("cycle %d: gw3's duty started %d times in term %d, want once", cycle, n, lead.Term)
		}
		if err := site.Freeze("gw3"); err != nil {
			t.Fatal(err)
		}
		next, err := site.WaitAgreement([]string{"gw1", "gw2"}, "gw3", lead.Term, 2*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cycle %d: gw3 frozen, %s leads term %d after %s", cycle, next.Leader, next.Term, next.At.Sub(lead.At))
		if err := site.Thaw("gw3"); err != nil {
			t.Fatal(err)
		}
		term = next.Term
	}
	checkJournals(t, site)
}
