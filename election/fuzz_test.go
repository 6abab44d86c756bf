package election

import (
	"fmt"
	"slices"
	"testing"
)

// FuzzElection drives a simulated group with a random schedule of ticks,
// out-of-order deliveries, duplicates, drops, partitions, crashes and
// restarts, plus garbage messages, and checks after every step that no two
// members lead at once, no term has two leaders, no vote changes within a
// term and no persisted term goes back. Rejected messages must not change
// state.
func FuzzElection(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1})
	f.Add([]byte{1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 2, 0, 0, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, newNode := range algorithms {
			fuzzOne(t, name, newNode, data)
		}
	})
}

func fuzzOne(t *testing.T, name string, newNode func(Config) (Node, error), data []byte) {
	if len(data) < 2 {
		return
	}
	n := 3 + int(data[0]%3) // 3..5 members
	s := newSim(t, n, newNode, func(c *Config) {
		c.Preemption = Preemption(data[1] % 3)
		c.HoldDownTicks = 20
		if data[1]&0x08 != 0 {
			// A witness site: collectReady fails if the witness stands.
			c.Witnesses = []string{fmt.Sprintf("n%d", 1+int(data[1]>>4)%n)}
		}
	})
	pick := func(b byte) string { return s.ids[int(b)%n] }
	for i := 2; i < len(data); i++ {
		op := data[i] % 19
		arg := byte(0)
		if i+1 < len(data) {
			arg = data[i+1]
		}
		switch op {
		case 0, 1, 2, 3, 4, 5:
			// Tick without delivering: messages pile up and arrive late.
			s.now++
			for _, id := range s.ids {
				if !s.crashed[id] {
					s.nodes[id].Tick()
					s.collect(id)
				}
			}
		case 6, 7:
			if len(s.queue) > 0 {
				// Deliver a message out of order.
				j := int(arg) % len(s.queue)
				s.queue[0], s.queue[j] = s.queue[j], s.queue[0]
				s.deliverOne()
			}
			i++
		case 8:
			if len(s.queue) > 0 {
				s.queue = append(s.queue, s.queue[0]) // duplicate
				s.deliverOne()
			}
		case 9:
			if len(s.queue) > 0 {
				s.queue = s.queue[1:] // drop
			}
		case 10:
			s.crash(pick(arg))
			i++
		case 11:
			if id := pick(arg); s.crashed[id] {
				s.restart(id)
			}
			i++
		case 12:
			a, b := pick(arg), pick(arg>>4)
			s.cut[[2]string{a, b}] = true
			i++
		case 13:
			s.heal()
		case 14:
			id := pick(arg)
			if !s.crashed[id] {
				if err := s.nodes[id].Resign(""); err == nil {
					s.collect(id)
				}
			}
			i++
		case 16:
			// A crash the bus reports: some members learn at once that the
			// dead member's connection closed.
			id := pick(arg)
			if !s.crashed[id] {
				s.crash(id)
				var told []string
				for k, o := range s.ids {
					if arg&(1<<(k%8)) != 0 {
						told = append(told, o)
					}
				}
				for _, o := range told {
					if !s.crashed[o] {
						s.nodes[o].LeaderGone(id, s.connOf(id))
						s.collect(o)
					}
				}
			}
			i++
		case 17:
			// A pre-vote request, of any term, from any member: answered or
			// kept, but it never moves a member's term or vote.
			id, from := pick(arg), pick(arg>>3)
			if s.crashed[id] || id == from {
				continue
			}
			before := s.nodes[id].Status()
			_ = s.nodes[id].Step(Message{Type: MsgPreVote, From: from, Term: before.Term + uint64(arg%3), Seq: uint64(arg) + 1})
			rd := s.nodes[id].Ready()
			after := s.nodes[id].Status()
			if rd.HardStateChanged || after.Term != before.Term || after.Role != before.Role || after.Leader != before.Leader {
				t.Fatalf("%s: a pre-vote request changed %s: term %d->%d, role %v->%v", name, id, before.Term, after.Term, before.Role, after.Role)
			}
			s.queue = append(s.queue, rd.Messages...)
			i++
		case 18:
			// Drain or undrain a member, the leader at times: it never
			// stands while drained (collectReady checks every Ready).
			id := pick(arg)
			if !s.crashed[id] {
				s.setDrained(id, !s.selfDrained(id))
			}
			i++
		case 15:
			// Garbage: must be rejected without any change of state.
			id := pick(arg)
			if s.crashed[id] {
				continue
			}
			before := s.nodes[id].Status()
			bad := []Message{
				{Type: MsgHeartbeat, From: "intruder", Term: uint64(arg) + 1, Seq: 1},
				{Type: MsgType(200), From: pick(arg + 1), Term: 1},
				{Type: MsgCoordinator, From: id, Term: 1 << 40},
				{Type: MsgAck, From: pick(arg + 1), Term: 0},
			}[int(arg>>6)%4]
			if err := s.nodes[id].Step(bad); err == nil {
				t.Fatalf("%s: garbage %+v accepted", name, bad)
			}
			rd := s.nodes[id].Ready()
			after := s.nodes[id].Status()
			if len(rd.Messages) > 0 || rd.HardStateChanged || after.Term != before.Term || after.Role != before.Role || after.Leader != before.Leader {
				t.Fatalf("%s: garbage %+v changed state", name, bad)
			}
			i++
		}
	}
	// Liveness after the storm: heal, restart everyone, and a leader emerges
	// (with every member that may lead drained, the highest of them is
	// undrained first: a witness never leads, drained or not).
	s.heal()
	all, top := true, ""
	for _, id := range s.ids {
		if slices.Contains(s.cfgs[id].Witnesses, id) {
			continue
		}
		all = all && s.cfgs[id].Drained
		top = id // s.ids is in rank order: the last is the highest
	}
	if all {
		if s.crashed[top] {
			c := s.cfgs[top]
			c.Drained = false
			s.cfgs[top] = c
		} else {
			s.setDrained(top, false)
		}
	}
	for _, id := range s.ids {
		if s.crashed[id] {
			s.restart(id)
		}
	}
	s.stabilize()
	s.runUntil(2000, name+": leader after recovery", func() bool { _, ok := s.agreed(); return ok })
}
