package main

import (
	"fmt"
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
// for it (D 500 ms, lease 380 ms), gw1 and gw2 have 3 (D 300 ms). gw3's
// lease, resting on acknowledgements that promise 300 ms, must end before
// they vote for another leader: each time gw3 is frozen (SIGSTOP), gw1 and
// gw2 elect one of themselves, and the merged journals show no instant at
// which two agents held a valid lease. With gw3's configured lease (a
// build that ignored the promise) they overlapped in every cycle, by 2 to
// 5 ms: the pre-vote and the vote took that much of the 80 ms by which
// gw3's lease outlived gw1's and gw2's D.
func TestE2ELeaseShortenedByShortD(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "100ms", "--preemption", "immediate", "--fast-failover=false")
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
		// longer than what 300 ms allows (300 - 100 - a tick, less a tick).
		poll.UntilWhy(t, 5*time.Second, "gw3 reports gw1 and gw2 shortening its lease", func() (bool, string) {
			st, err := site.Proc("gw3").Status(t.Context())
			if err != nil {
				return false, err.Error()
			}
			if st.LeaseRemainingMS > 180 {
				return false, fmt.Sprintf("lease remaining %d ms", st.LeaseRemainingMS)
			}
			for _, m := range st.Members {
				if m.ID != "gw3" && (m.PromiseMS != 300 || !m.ShortensLease) {
					return false, fmt.Sprintf("%s: promise %d ms, shortens %v", m.ID, m.PromiseMS, m.ShortensLease)
				}
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
