package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestE2EClusteredEmbeddedNATS runs an offline site: three agent processes,
// each with its own embedded nats-server clustered with the others' through
// routes, and no other server. SIGKILL of the leader takes its server down
// with it; the two survivors elect a leader over what remains of the
// cluster, and the restarted gateway rejoins the cluster as a follower. The
// site's bus requires a password, as a real one should.
func TestE2EClusteredEmbeddedNATS(t *testing.T) {
	site, err := harness.NewClusterSite(binary, t.TempDir(), 3,
		"--heartbeat", "100ms", "--heartbeat-misses", "3", "--preemption", "never",
		"--nats-user", "site", "--nats-password", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// gw3, the highest rank, leads unless gw1 and gw2 settled before it was
	// up (a loaded machine; preemption never keeps their choice): either way
	// the leader is the victim.
	victim := first.Leader
	var survivors []string
	for _, id := range site.IDs() {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	successor := survivors[len(survivors)-1] // the highest-ranked survivor

	// Status requests travel the routes: asked at gw1's server, every agent
	// answers. The servers require the site's password of every client.
	out, err := exec.Command(binary, "status", "--json", "--nats-url", site.ClientURLs["gw1"], "--group", site.Group,
		"--nats-user", "site", "--nats-password", "s3cret").Output()
	if err != nil {
		t.Fatalf("status --json: %v", err)
	}
	if out, err := exec.Command(binary, "status", "--nats-url", site.ClientURLs["gw1"], "--group", site.Group).CombinedOutput(); err == nil ||
		!strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Fatalf("status without the password: %v\n%s; want an authorization error", err, out)
	}
	var reports []map[string]any
	if err := json.Unmarshal(out, &reports); err != nil || len(reports) != 3 {
		t.Fatalf("status --json through gw1's server: %d reports, err %v:\n%s", len(reports), err, out)
	}

	// SIGKILL the leader: its embedded server dies with it.
	if err := site.Kill(victim); err != nil {
		t.Fatal(err)
	}
	second, err := site.WaitAgreement(survivors, victim, first.Term, 2*time.Millisecond, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second.Leader != successor {
		t.Fatalf("after SIGKILL of %s: %+v, want %s to lead", victim, second, successor)
	}
	// The survivors learned of the crash from their servers' route to the
	// dead gateway closing, not from missed heartbeats.
	fast := 0
	for _, id := range survivors {
		_, m := httpGet(t, "http://"+site.Proc(id).HTTPAddr+"/metrics")
		if strings.Contains(m, `edge_election_fast_suspicions_total{group="site"} 1`) {
			fast++
		}
	}
	if fast == 0 {
		t.Fatal("no survivor acted on the route closure")
	}

	// The gateway comes back: its server routes to the survivors' and its
	// agent follows the new leader (preemption never: no takeover).
	if _, err := site.Start(victim); err != nil {
		t.Fatal(err)
	}
	third, err := site.WaitAgreement(site.IDs(), "", second.Term-1, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if third.Leader != successor || third.Term != second.Term {
		t.Fatalf("after %s restarted: %+v, want %s still leading term %d", victim, third, successor, second.Term)
	}
	st, err := site.Proc(victim).Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Role != "follower" || !st.NATSConnected || st.Term != second.Term {
		t.Fatalf("restarted %s: role %s, connected %v, term %d; want a connected follower in term %d", victim, st.Role, st.NATSConnected, st.Term, second.Term)
	}
}
