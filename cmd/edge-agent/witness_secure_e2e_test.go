package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/attack"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// secureWitness is the witness of the secure 2+1 site: gw3, the highest
// ranked member of internal/attack's site.
const secureWitness = "gw3"

// TestE2EWitnessSecureSite runs a two-gateway site with a witness in the
// most secure documented setup (internal/attack: embedded servers clustered
// with a route password, each member logging in with its own nkey under
// per-member permissions, signed messages with pinned member keys, a site
// password for other clients, an operator key), gw3 being the witness, for
// each algorithm: a gateway leads; with the other gateway killed the leader
// keeps its lease in the same term for several leases, on the witness's
// signed acknowledgements alone; SIGKILL of the leader makes the other
// gateway lead on the witness's vote; the servers refuse the witness's key
// publishing in a gateway's name, a gateway's key publishing in the
// witness's, and the site password on either; and COORDINATORs and leader
// heartbeats signed with the witness's own key (a stolen witness seed) are
// dropped by every gateway and change nothing. The journals show no lease
// of the witness and no two leases at once.
func TestE2EWitnessSecureSite(t *testing.T) {
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) { testWitnessSecureSite(t, alg) })
	}
}

func testWitnessSecureSite(t *testing.T, alg string) {
	logs := &lineLog{}
	// k = 10 (D = 1 s, a lease of 880 ms) as in TestE2EWitnessSite: the
	// test holds one term for seconds on a shared, loaded machine.
	s, err := attack.NewSite(binary, t.TempDir(), attack.Options{Operators: true, Log: logs,
		Args: []string{"--algorithm", alg, "--heartbeat-misses", "10", "--witnesses", secureWitness}})
	if err != nil {
		t.Fatal(err)
	}
	s.Journals = true
	t.Cleanup(s.Stop)
	logs.dumpOnFailure(t)
	if err := s.StartAll(); err != nil {
		t.Fatal(err)
	}
	all := s.IDs()
	agree := func(ids []string, exclude string, minTerm uint64) harness.Agreement {
		t.Helper()
		var a harness.Agreement
		poll.Until(t, 30*time.Second, "a gateway leading, agreed by "+strings.Join(ids, ", "), func() bool {
			noWitnessLeads(t, s)
			var err error
			a, err = s.WaitAgreement(ids, exclude, minTerm, 10*time.Millisecond, 100*time.Millisecond)
			return err == nil
		})
		return a
	}
	first := agree(all, "", 0)
	other := otherGateway(first.Leader)

	// The other gateway down: the leader's lease rests on its own ack and
	// the witness's signed ones. 3 s is over three leases. (Killed right
	// after the election, the other gateway may be the only follower whose
	// acknowledgement the lease holds yet: the leader would step down on
	// the closed route, as it must. The witness's are waited for first.)
	ackedBy(t, s.Site, first, []string{secureWitness}, s.H)
	if err := s.Kill(other); err != nil {
		t.Fatal(err)
	}
	holdsLease(t, s, first.Leader, first.Term, 3*time.Second, other+" down")
	if _, err := s.Start(other); err != nil {
		t.Fatal(err)
	}
	second := agree(all, "", first.Term-1)

	// SIGKILL of the leader: the other gateway leads on the witness's vote.
	victim := second.Leader
	if err := s.Kill(victim); err != nil {
		t.Fatal(err)
	}
	third := agree([]string{otherGateway(victim), secureWitness}, victim, second.Term)
	if third.Leader != otherGateway(victim) {
		t.Fatalf("after SIGKILL of %s: %s leads, want %s", victim, third.Leader, otherGateway(victim))
	}
	if _, err := s.Start(victim); err != nil {
		t.Fatal(err)
	}
	fourth := agree(all, "", third.Term-1)

	// Per-member permissions: nobody publishes an election message in
	// another member's name, whatever key or password it holds.
	coordinator := []byte(`{"v":1,"group":"site","type":"coordinator","term":1}`)
	for _, c := range []struct{ who, as string }{
		{secureWitness, fourth.Leader}, {fourth.Leader, secureWitness}, {"", secureWitness}, {"", fourth.Leader},
	} {
		err := publishRefused(t, s, c.who, wire.BroadcastSubject(attack.Prefix, attack.Group, c.as), coordinator)
		if err != nil {
			who := c.who + "'s key"
			if c.who == "" {
				who = "the site password"
			}
			t.Errorf("%s publishing as %s: %v", who, c.as, err)
		}
	}

	// The witness's own key, stolen: its COORDINATORs and leader
	// heartbeats, signed and numbered as genuine ones, claim the next term
	// every H for 3D, first while the witness's agent runs beside them (a
	// gateway takes in none to most of them: the rest are refused as
	// replays or held for a challenge, the two epochs of one sender
	// crossing), then with it stopped (all but the first taken in). Every
	// gateway drops those it takes in, counted as rejected, and the leader
	// keeps its term.
	f, err := s.Forger(secureWitness, fourth.Leader)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	running := forgeClaims(t, s, f, fourth, "with the witness's agent running")
	if err := s.Kill(secureWitness); err != nil {
		t.Fatal(err)
	}
	stopped := forgeClaims(t, s, f, fourth, "with the witness's agent stopped")
	for _, id := range []string{"gw1", "gw2"} {
		// With the agent stopped, every claim is dropped, and all but the
		// first of the forger's epoch (held for its proof, or refused as a
		// replay while the two epochs cross, at most one in each of the two
		// rounds that may follow the genuine agent's last message) by the
		// core's rule that a witness never stands. With the agent running,
		// how many reach the core depends on which epoch a gateway heard
		// last (from none to most): the term check above is what counts.
		if stopped[id]+stopped[id+" other"] < stopped["sent"] || stopped[id] < stopped["sent"]-4 {
			t.Errorf("%s rejected %v of the %v claims to lead of the witness's key with its agent stopped (%v dropped before the core)",
				id, stopped[id], stopped["sent"], stopped[id+" other"])
		}
		t.Logf("%s rejected %v of %v claims with the witness's agent running, %v of %v with it stopped", id, running[id], running["sent"], stopped[id], stopped["sent"])
	}
	t.Logf("%s: %s led term %d; %s down: %s kept term %d; SIGKILL %s: %s term %d; %v and %v forged claims of the witness sent, %s kept term %d",
		alg, first.Leader, first.Term, other, first.Leader, first.Term, victim, third.Leader, third.Term, running["sent"], stopped["sent"], fourth.Leader, fourth.Term)

	rep := checkJournals(t, s.Site)
	for _, iv := range rep.Intervals {
		if iv.ID == secureWitness {
			t.Errorf("the witness held a lease in term %d", iv.Term)
		}
	}
}

// forgeClaims sends a COORDINATOR and a leader heartbeat of the next term
// through f every H for 3D, checking on every round that every running
// agent still names cur's leader in cur's term and that it leads. It returns
// by gateway how many messages it rejected meanwhile
// (edge_election_bad_messages_total{reason="rejected"}), under "ID other"
// how many it dropped before they reached the core (held for a challenge,
// or replays), and under "sent" how many messages were sent.
func forgeClaims(t *testing.T, s *attack.Site, f *attack.Forger, cur harness.Agreement, what string) map[string]float64 {
	t.Helper()
	before := map[string]map[string]float64{}
	for _, id := range []string{"gw1", "gw2"} {
		before[id] = badReasons(t, s, id)
	}
	sent := 0
	tick := time.NewTicker(s.H)
	defer tick.Stop()
	for end := time.Now().Add(30 * s.H); time.Now().Before(end); <-tick.C {
		term := s.MaxTerm() + 1
		_ = f.Send("", map[string]any{"type": "coordinator", "term": term, "seq": uint64(1)})
		_ = f.Send("", map[string]any{"type": "heartbeat", "term": term, "seq": uint64(1), "alive": s.IDs()})
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		sent += 2
		for _, id := range s.Running() {
			st, err := s.Status(id)
			if err != nil {
				t.Fatalf("%s: %s /status: %v", what, id, err)
			}
			if st.Leader != cur.Leader || st.Term != cur.Term || (id == cur.Leader && st.Role != "leader") {
				t.Fatalf("%s: %s reports leader %q term %d role %s, want %s term %d", what, id, st.Leader, st.Term, st.Role, cur.Leader, cur.Term)
			}
		}
	}
	out := map[string]float64{"sent": float64(sent)}
	for _, id := range []string{"gw1", "gw2"} {
		var after map[string]float64
		// The last messages may still be on their way: wait (up to 2 s)
		// until the gateway has dropped as many as were sent.
		_ = poll.For(2*time.Second, "", func() (bool, string) {
			after = badReasons(t, s, id)
			for r, v := range after {
				after[r] = v - before[id][r]
			}
			return after["rejected"]+after["unverified"]+after["replayed"] >= float64(sent), ""
		})
		out[id], out[id+" other"] = after["rejected"], after["unverified"]+after["replayed"]
		t.Logf("%s: %s: dropped while the witness's key sent %d claims to lead, by reason: %v", what, id, sent, after)
	}
	return out
}

// badReasons returns edge_election_bad_messages_total of member id by
// reason.
func badReasons(t *testing.T, s *attack.Site, id string) map[string]float64 {
	t.Helper()
	return badReasonsOf(t, s.Proc(id))
}

func otherGateway(id string) string {
	if id == "gw1" {
		return "gw2"
	}
	return "gw1"
}

// noWitnessLeads fails the test if a running agent names the witness as
// leader, or the witness says it leads.
func noWitnessLeads(t *testing.T, s *attack.Site) {
	t.Helper()
	for _, id := range s.Running() {
		st, err := s.Status(id)
		if err != nil {
			continue // starting or stopping
		}
		if st.Leader == secureWitness || (id == secureWitness && st.Role != "follower") {
			t.Fatalf("%s reports leader %q, role %s: the witness leads", id, st.Leader, st.Role)
		}
	}
}

// holdsLease checks every 50 ms for d that every running agent names
// leader in term and that leader says it leads.
func holdsLease(t *testing.T, s *attack.Site, leader string, term uint64, d time.Duration, what string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	samples := 0
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		for _, id := range s.Running() {
			st, err := s.Status(id)
			if err != nil {
				t.Fatalf("%s: %s /status: %v", what, id, err)
			}
			if st.Leader != leader || st.Term != term || (id == leader && st.Role != "leader") {
				t.Fatalf("%s: %s reports leader %q term %d role %s, want %s term %d", what, id, st.Leader, st.Term, st.Role, leader, term)
			}
		}
		samples++
	}
	t.Logf("%s: %s led term %d through %d samples over %s", what, leader, term, samples, d)
}

// publishRefused publishes data on subject through gw1's server as member
// who (with its key; "" is a client with the site password) and returns nil
// once the server reports a permissions violation, an error if it does not
// within 10 s.
func publishRefused(t *testing.T, s *attack.Site, who, subject string, data []byte) error {
	t.Helper()
	errs := make(chan error, 4)
	handler := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	opts := []nats.Option{handler, nats.Name("witness-e2e")}
	if who == "" {
		opts = append(opts, nats.UserInfo(attack.SiteUser, attack.SitePassword))
	} else {
		opts = append(opts, nats.Nkey(s.Keys[who], s.Pairs[who].Sign))
	}
	nc, err := nats.Connect(s.ClientURLs["gw1"], opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := nc.Publish(subject, data); err != nil {
		return err
	}
	_ = nc.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			return err
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the server took the message: no permissions violation within 10 s")
	}
}
