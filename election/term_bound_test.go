package election

import (
	"errors"
	"fmt"
	"testing"
)

// The term bound (MaxTerm): a message of a term above it is refused before
// it changes anything, no node persists, sends or stands in a term above it,
// and a group whose members reached it stays safe (no leader) instead of
// wrapping to term 0. The driver below is deliberately tiny and independent
// of the simulated network of sim_test.go.

// boundNet delivers every message at once, in order, and records the
// highest term any node persisted or sent.
type boundNet struct {
	t       *testing.T
	nodes   map[string]Node
	ids     []string
	maxSent uint64
	maxHS   uint64
	leaders map[uint64]string
}

func newBoundNet(t *testing.T, newNode func(Config) (Node, error), n int, term uint64) *boundNet {
	t.Helper()
	b := &boundNet{t: t, nodes: map[string]Node{}, leaders: map[uint64]string{}}
	var members []Member
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		members = append(members, Member{ID: id, Priority: i})
		b.ids = append(b.ids, id)
	}
	for _, id := range b.ids {
		cfg := Config{ID: id, Members: members, HeartbeatTicks: 10, ElectionTicks: 30, LeaseTicks: 18,
			AnswerTicks: 10, HoldDownTicks: 100, HardState: HardState{Term: term}}
		nd, err := newNode(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.nodes[id] = nd
	}
	return b
}

// run ticks every node ticks times, delivering each Ready's messages at
// once, and checks after every Ready that nothing went above MaxTerm and
// that a term had at most one leader.
func (b *boundNet) run(ticks int) {
	var queue []Message
	drain := func(id string) {
		rd := b.nodes[id].Ready()
		if rd.HardState.Term > b.maxHS {
			b.maxHS = rd.HardState.Term
		}
		if rd.HardState.Term > MaxTerm {
			b.t.Fatalf("%s persisted term %d above MaxTerm", id, rd.HardState.Term)
		}
		for _, m := range rd.Messages {
			if m.Term > b.maxSent {
				b.maxSent = m.Term
			}
			if m.Term > MaxTerm {
				b.t.Fatalf("%s sent %s of term %d above MaxTerm", id, m.Type, m.Term)
			}
		}
		queue = append(queue, rd.Messages...)
		if rd.Role == Leader {
			if other, ok := b.leaders[rd.Term]; ok && other != id {
				b.t.Fatalf("two leaders in term %d: %s and %s", rd.Term, other, id)
			}
			b.leaders[rd.Term] = id
		}
	}
	for range ticks {
		for _, id := range b.ids {
			b.nodes[id].Tick()
			drain(id)
		}
		for len(queue) > 0 {
			m := queue[0]
			queue = queue[1:]
			for _, id := range b.ids {
				if id == m.From || (m.To != "" && m.To != id) {
					continue
				}
				_ = b.nodes[id].Step(m)
				drain(id)
			}
		}
	}
}

func (b *boundNet) leader() (string, uint64) {
	for _, id := range b.ids {
		if st := b.nodes[id].Status(); st.Role == Leader {
			return id, st.Term
		}
	}
	return "", 0
}

func TestTermAboveMaxTermIsRefusedWithoutEffect(t *testing.T) {
	for _, alg := range []struct {
		name string
		new  func(Config) (Node, error)
	}{{"bully", NewBully}, {"ring", NewRing}} {
		t.Run(alg.name, func(t *testing.T) {
			b := newBoundNet(t, alg.new, 3, 5)
			b.run(200)
			leader, term := b.leader()
			if leader == "" {
				t.Fatal("no leader elected")
			}
			// Every message type, from a member, with every term above the
			// bound up to the largest the wire can carry.
			for _, tt := range []MsgType{MsgHeartbeat, MsgAck, MsgElection, MsgOK, MsgCoordinator, MsgVote,
				MsgResign, MsgRingToken, MsgRingAck, MsgPreVote, MsgPreVoteReply, MsgWithdraw} {
				for _, bad := range []uint64{MaxTerm + 1, 1<<63 + 7, ^uint64(0)} {
					for _, id := range b.ids {
						from := "n1"
						if id == "n1" {
							from = "n2"
						}
						m := Message{Type: tt, From: from, Term: bad, Seq: 1, Granted: true, Initiator: from, Candidate: from}
						if tt == MsgRingToken || tt == MsgRingAck || tt == MsgPreVoteReply {
							m.To = id
						}
						err := b.nodes[id].Step(m)
						if !errors.Is(err, ErrBadMessage) {
							t.Fatalf("%s: %s of term %d from %s: got %v, want ErrBadMessage", id, tt, bad, from, err)
						}
						if rd := b.nodes[id].Ready(); rd.HardStateChanged || len(rd.Messages) > 0 || rd.Term != term {
							t.Fatalf("%s: refused %s of term %d still changed something: %+v", id, tt, bad, rd)
						}
					}
				}
			}
			b.run(100)
			if l, tm := b.leader(); l != leader || tm != term {
				t.Fatalf("leader %s term %d after the refused messages, want %s term %d", l, tm, leader, term)
			}
		})
	}
}

func TestGroupAtMaxTermNeverWrapsAndElectsNoOne(t *testing.T) {
	for _, alg := range []struct {
		name string
		new  func(Config) (Node, error)
	}{{"bully", NewBully}, {"ring", NewRing}} {
		t.Run(alg.name, func(t *testing.T) {
			// One term left: the group elects once, in MaxTerm, and never again.
			b := newBoundNet(t, alg.new, 3, MaxTerm-1)
			b.run(200)
			leader, term := b.leader()
			if leader == "" || term != MaxTerm {
				t.Fatalf("leader %q term %d, want an election in MaxTerm", leader, term)
			}
			// The leader resigns: nobody can stand in a higher term, and
			// nothing wraps (a wrapped term 0 would be refused by Step and
			// by every store, as in the attack).
			if err := b.nodes[leader].Resign(""); err != nil {
				t.Fatal(err)
			}
			b.run(500)
			if l, _ := b.leader(); l != "" {
				t.Fatalf("%s leads after the group ran out of terms", l)
			}
			if b.maxSent > MaxTerm || b.maxHS > MaxTerm {
				t.Fatalf("max sent %d, max persisted %d: above MaxTerm", b.maxSent, b.maxHS)
			}
			for _, id := range b.ids {
				if st := b.nodes[id].Status(); st.Term != MaxTerm {
					t.Fatalf("%s at term %d, want MaxTerm", id, st.Term)
				}
			}
		})
	}
}

func TestPersistedTermAboveMaxTermIsRefused(t *testing.T) {
	members := []Member{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	cfg := Config{ID: "a", Members: members, HeartbeatTicks: 10, ElectionTicks: 30, LeaseTicks: 18, AnswerTicks: 10,
		HardState: HardState{Term: MaxTerm + 1}}
	if _, err := NewBully(cfg); err == nil {
		t.Fatal("a persisted term above MaxTerm was accepted")
	}
	cfg.HardState.Term = MaxTerm
	if _, err := NewBully(cfg); err != nil {
		t.Fatalf("a persisted term of MaxTerm was refused: %v", err)
	}
}
