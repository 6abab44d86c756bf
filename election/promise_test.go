package election

import "testing"

// promiseSite is three members whose timings each pass their own config's
// check but not each other's: n1's D (25 ticks) is shorter than the lease
// of n2 and n3 (29 ticks) plus a heartbeat period, as on a site whose
// heartbeat_misses was lowered on one gateway only. n2 starts crashed, so
// that n3's first leadership rests on n1's acknowledgements alone.
func promiseSite(t *testing.T, newNode func(Config) (Node, error)) *simNet {
	t.Helper()
	s := newSim(t, 3, newNode, func(c *Config) {
		c.ElectionTicks, c.LeaseTicks = 40, 29
		if c.ID == "n1" {
			c.ElectionTicks, c.LeaseTicks = 25, 14
		}
	})
	s.crash("n2")
	s.runUntil(settle, "n3 leads with n1", func() bool { l, ok := s.agreed("n1", "n3"); return ok && l == "n3" })
	return s
}

// TestLeaseShortenedByShortPromise: n3's lease, resting on n1's
// acknowledgements, lasts no longer than n1's promise allows (25 - 10 - 1 =
// 14 ticks instead of 29), so that when n3 is cut off, n1 may vote for
// another leader only after n3's lease is over. Without the promise, n3
// led (and held its lease) for 29 ticks after the last heartbeat n1
// acknowledged, while n1 voted for n2 after 25: two leaders at once, which
// the sim's checks report.
func TestLeaseShortenedByShortPromise(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := promiseSite(t, newNode)
		if got := s.leaseTicks["n3"]; got != 14 {
			t.Fatalf("n3's lease on n1's acknowledgements is %d ticks, want 14 (n1's D 25 - H 10 - 1)", got)
		}
		// n2 returns, but cut off from n3: it hears no leader, and n1
		// refuses it while n3 is heard.
		s.partition([]string{"n2"}, []string{"n3"})
		s.restart("n2")
		s.run(80)
		if l, ok := s.agreed("n1", "n3"); !ok || l != "n3" {
			t.Fatalf("n3 no longer leads n1: %s", s.describe())
		}
		// Now n1 loses n3 too. It votes (or stands) after its D of 25
		// ticks; n3 must have stopped leading by then.
		s.partition([]string{"n1"}, []string{"n3"})
		s.runUntil(settle, "n1 and n2 elect n2", func() bool { l, ok := s.agreed("n1", "n2"); return ok && l == "n2" })
		if s.role["n3"] == Leader {
			t.Fatalf("n3 still leads beside n2: %s", s.describe())
		}
	})
}

// TestFullPromiseKeepsFullLease: members that promise a D long enough for
// the leader's lease (the leader's own D, or longer) leave the lease as
// configured; so does a member that says nothing (an older build).
func TestFullPromiseKeepsFullLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		promise func(Message) Message
	}{
		{"own D", nil},
		{"longer D", func(m Message) Message {
			if m.Promise != 0 {
				m.Promise = 90
			}
			return m
		}},
		{"not said", func(m Message) Message { m.Promise = 0; return m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
				s := newSim(t, 3, newNode, nil)
				s.rewrite = tc.promise
				s.runUntil(settle, "a leader", func() bool { _, ok := s.agreed(); return ok })
				s.run(50)
				l, _ := s.agreed()
				if got, want := s.leaseTicks[l], s.cfgs[l].LeaseTicks; got != want {
					t.Fatalf("%s's lease is %d ticks, want %d", l, got, want)
				}
			})
		})
	}
}

// TestRestartWithShorterDKeepsPromise: a member that acknowledged the
// leader with a promise of D = 90 ticks and restarts with D = 30 (an
// operator lowered heartbeat_misses) waits the old 90 before it votes
// (StartWaitTicks, which the agent keeps in the state directory), since the
// leader's lease counts on the promise. Waiting only its new D, n1 voted
// for n2 while n3's lease, 69 ticks from the last heartbeat n1
// acknowledged, still ran: two leaders, which the sim reports.
func TestRestartWithShorterDKeepsPromise(t *testing.T) {
	forEachAlgorithm(t, func(t *testing.T, newNode func(Config) (Node, error)) {
		s := newSim(t, 3, newNode, func(c *Config) { c.ElectionTicks, c.LeaseTicks = 90, 69 })
		s.crash("n2")
		s.runUntil(settle, "n3 leads with n1", func() bool { l, ok := s.agreed("n1", "n3"); return ok && l == "n3" })
		s.partition([]string{"n2"}, []string{"n3"})
		s.restart("n2")
		s.run(120)
		if l, ok := s.agreed("n1", "n3"); !ok || l != "n3" || s.leaseTicks["n3"] != 69 {
			t.Fatalf("n3 no longer leads n1 with its full lease: %s", s.describe())
		}
		// n1 restarts at once, cut off from n3, with a shorter D.
		s.partition([]string{"n1"}, []string{"n3"})
		s.crash("n1")
		cfg := s.cfgs["n1"]
		cfg.ElectionTicks, cfg.LeaseTicks, cfg.StartWaitTicks = 30, 14, 90
		s.cfgs["n1"] = cfg
		s.restart("n1")
		s.runUntil(2*settle, "n1 and n2 elect n2", func() bool { l, ok := s.agreed("n1", "n2"); return ok && l == "n2" })
	})
}
