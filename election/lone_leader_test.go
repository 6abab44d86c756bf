package election

import "testing"

// TestLoneLeaderKeepsItsLease: a leader whose quorum is itself alone (a
// one-member group, or island mode with every other member down) renews its
// lease with each heartbeat it sends. It used to renew only on
// acknowledgements, so such a leader lost its lease L after its election,
// stood again, and so on: a one-gateway site flapped every L.
func TestLoneLeaderKeepsItsLease(t *testing.T) {
	for _, alg := range []struct {
		name string
		new  func(Config) (Node, error)
	}{{"bully", NewBully}, {"ring", NewRing}} {
		for _, site := range []struct {
			name    string
			members int
			crashed []string
		}{
			{"one member", 1, nil},
			{"island mode, the others down", 3, []string{"n1", "n2"}},
		} {
			t.Run(alg.name+"/"+site.name, func(t *testing.T) {
				s := newSim(t, site.members, alg.new, func(c *Config) { c.Quorum = 1 })
				for _, id := range site.crashed {
					s.crash(id)
				}
				lone := s.ids[len(s.ids)-1]
				s.runUntil(500, lone+" to lead", func() bool { return s.nodes[lone].Status().Role == Leader })
				term := s.term(lone)
				leaseTicks := s.cfgs[lone].LeaseTicks
				for i := 0; i < 50*leaseTicks; i++ {
					s.tick()
					if st := s.nodes[lone].Status(); st.Role != Leader || st.Term != term {
						t.Fatalf("tick %d after its election: %s is %s in term %d, was leader of term %d (lease %d ticks)",
							i, lone, st.Role, st.Term, term, leaseTicks)
					}
				}
			})
		}
	}
}
