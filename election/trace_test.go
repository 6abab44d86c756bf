package election

import (
	"flag"
	"testing"
)

var traceSim = flag.Bool("trace", false, "log every delivered message of the simulated network")

func (s *simNet) trace(m Message, to string) {
	if *traceSim {
		if tl, ok := s.t.(*testing.T); ok {
			tl.Logf("t=%d %s->%s %v term=%d seq=%d granted=%v nominee=%s init=%s parts=%v", s.now, m.From, to, m.Type, m.Term, m.Seq, m.Granted, m.Nominee, m.Initiator, m.Participants)
		}
	}
}
