package election

import (
	"fmt"
	"slices"
	"testing"
)

// simNet is a deterministic network of election nodes driven from one
// goroutine: a FIFO queue of messages, drops, cuts, crashes and ticks. After
// every step it checks the safety invariants.
type simNet struct {
	t       testing.TB
	newNode func(Config) (Node, error)
	cfgs    map[string]Config
	ids     []string // by rank, lowest first
	nodes   map[string]Node
	crashed map[string]bool
	cut     map[[2]string]bool
	queue   []Message
	// drop, when set, drops matching messages in flight.
	drop func(Message) bool
	// rewrite, when set, changes each message in flight (an older peer
	// that ignores a field, say).
	rewrite func(Message) Message

	disk        map[string]HardState // what each node persisted
	votes       map[string]map[uint64]string
	leaderTerm  map[uint64]string // term -> the one member that led it
	role        map[string]Role
	lastRole    map[string]Role
	leaseTicks  map[string]int // each member's Ready.LeaseTicks, as last collected
	now         int
	delivered   map[MsgType]int
	failures    []string
	leaderTicks map[string]int
	incarnation map[string]int
	// wake is, per member, the sim tick until which its NextTick promised
	// it would not act, as an agent sleeping until then relies on.
	wake map[string]int
}

// fixedBackoff doubles from Base up to Max ticks, deterministically.
type fixedBackoff struct{ Base, Max, cur int }

func (b *fixedBackoff) Next() int {
	if b.cur == 0 {
		b.cur = b.Base
	} else if b.cur*2 <= b.Max {
		b.cur *= 2
	}
	return b.cur
}
func (b *fixedBackoff) Reset() { b.cur = 0 }

func testConfig(id string, members []Member) Config {
	return Config{
		ID: id, Members: members,
		HeartbeatTicks: 10, ElectionTicks: 30, LeaseTicks: 18, AnswerTicks: 10,
		HoldDownTicks: 100,
		Backoff:       &fixedBackoff{Base: 5, Max: 40},
	}
}

// newSim builds n members "n1".."nN" with priority i, so nN ranks highest.
func newSim(t testing.TB, n int, newNode func(Config) (Node, error), tweak func(*Config)) *simNet {
	s := &simNet{
		t: t, newNode: newNode,
		cfgs: map[string]Config{}, nodes: map[string]Node{}, crashed: map[string]bool{},
		cut: map[[2]string]bool{}, disk: map[string]HardState{}, votes: map[string]map[uint64]string{},
		leaderTerm: map[uint64]string{}, role: map[string]Role{}, lastRole: map[string]Role{}, leaseTicks: map[string]int{},
		delivered: map[MsgType]int{}, leaderTicks: map[string]int{}, incarnation: map[string]int{},
	}
	var members []Member
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		members = append(members, Member{ID: id, Priority: i})
		s.ids = append(s.ids, id)
	}
	for _, id := range s.ids {
		cfg := testConfig(id, members)
		if tweak != nil {
			tweak(&cfg)
		}
		s.cfgs[id] = cfg
		s.start(id)
	}
	return s
}

func (s *simNet) start(id string) {
	cfg := s.cfgs[id]
	cfg.HardState = s.disk[id]
	// A fresh backoff per (re)start, with the bounds the config was given.
	fb, _ := cfg.Backoff.(*fixedBackoff)
	if fb == nil {
		fb = &fixedBackoff{Base: 5, Max: 40}
	}
	cfg.Backoff = &fixedBackoff{Base: fb.Base, Max: fb.Max}
	node, err := s.newNode(cfg)
	if err != nil {
		s.t.Fatalf("start %s: %v", id, err)
	}
	s.nodes[id] = node
	s.role[id] = Follower
	delete(s.wake, id) // a new process: what the old one promised of its sleep is gone
}

// collect drains id's Ready: persists, checks invariants, queues messages.
// Like an agent, it then asks the member when it next needs a tick.
func (s *simNet) collect(id string) {
	s.collectReady(id, s.nodes[id].Ready())
	if s.wake == nil {
		s.wake = map[string]int{}
	}
	s.wake[id] = s.now + s.nodes[id].NextTick()
}

func (s *simNet) collectReady(id string, rd Ready) {
	if rd.HardStateChanged {
		old := s.disk[id]
		if rd.HardState.Term < old.Term {
			s.fail("%s: persisted term went back from %d to %d", id, old.Term, rd.HardState.Term)
		}
		if rd.HardState.Term == old.Term && old.VotedFor != "" && rd.HardState.VotedFor != old.VotedFor {
			s.fail("%s: vote in term %d changed from %s to %s", id, old.Term, old.VotedFor, rd.HardState.VotedFor)
		}
		if v := rd.HardState.VotedFor; v != "" {
			if s.votes[id] == nil {
				s.votes[id] = map[uint64]string{}
			}
			if prev, ok := s.votes[id][rd.HardState.Term]; ok && prev != v {
				s.fail("%s: double vote in term %d: %s and %s", id, rd.HardState.Term, prev, v)
			}
			s.votes[id][rd.HardState.Term] = v
		}
		s.disk[id] = rd.HardState
	}
	if rd.Role == Leader && s.cfgs[id].Quorum != 1 {
		if prev, ok := s.leaderTerm[rd.Term]; ok && prev != id {
			s.fail("two leaders in term %d: %s and %s", rd.Term, prev, id)
		}
		s.leaderTerm[rd.Term] = id
	}
	s.role[id] = rd.Role
	s.leaseTicks[id] = rd.LeaseTicks
	if rd.Role != Follower && s.selfDrained(id) {
		s.fail("tick %d: %s is drained and %v", s.now, id, rd.Role)
	}
	if rd.Role != Follower && slices.Contains(s.cfgs[id].Witnesses, id) {
		s.fail("tick %d: %s is a witness and %v", s.now, id, rd.Role)
	}
	s.checkOneLeader()
	for _, m := range rd.Messages {
		if m.From != id {
			s.fail("%s sent a message from %q", id, m.From)
		}
		if m.Type == MsgHeartbeat {
			m.Conn = s.connOf(id) // as the agent stamps its bus connection
		}
		s.queue = append(s.queue, m)
	}
}

// checkOneLeader: at no instant do two running members both lead. Leases
// make this hold even across partitions, since all members tick together.
func (s *simNet) checkOneLeader() {
	var leaders []string
	for _, id := range s.ids {
		if !s.crashed[id] && s.role[id] == Leader {
			leaders = append(leaders, id)
		}
	}
	if len(leaders) > 1 && s.cfgs[s.ids[0]].Quorum != 1 {
		s.fail("tick %d: %d simultaneous leaders %v", s.now, len(leaders), leaders)
	}
}

func (s *simNet) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.failures = append(s.failures, msg)
	s.t.Helper()
	s.t.Fatal(msg)
}

func (s *simNet) reachable(from, to string) bool {
	return !s.crashed[to] && !s.crashed[from] && !s.cut[[2]string{from, to}]
}

// deliverOne delivers the queue head (to one target or to all).
func (s *simNet) deliverOne() {
	m := s.queue[0]
	s.queue = s.queue[1:]
	if s.drop != nil && s.drop(m) {
		return
	}
	if s.rewrite != nil {
		m = s.rewrite(m)
	}
	for _, to := range s.ids {
		if to == m.From || (m.To != "" && m.To != to) || !s.reachable(m.From, to) {
			continue
		}
		if m.Type.IsElectionTraffic() {
			s.delivered[m.Type]++
		}
		if m.Type.IsElectionTraffic() {
			s.trace(m, to)
		}
		_ = s.nodes[to].Step(cloneMsg(m))
		s.collect(to)
	}
}

func cloneMsg(m Message) Message {
	m.Alive = append([]string(nil), m.Alive...)
	m.Participants = append([]string(nil), m.Participants...)
	return m
}

// stabilize delivers until the queue is empty.
func (s *simNet) stabilize() {
	for i := 0; len(s.queue) > 0; i++ {
		if i > 1_000_000 {
			s.t.Fatal("network did not quiesce")
		}
		s.deliverOne()
	}
}

// tick advances every running member by one tick, then delivers.
func (s *simNet) tick() {
	s.now++
	for _, id := range s.ids {
		if s.crashed[id] {
			continue
		}
		if s.now < s.wake[id] {
			// Asleep, as far as the member said: this tick must do nothing
			// an agent sleeping through it would have to act on.
			before := s.nodes[id].Status()
			s.nodes[id].Tick()
			rd := s.nodes[id].Ready()
			after := s.nodes[id].Status()
			if len(rd.Messages) > 0 || len(rd.Events) > 0 || rd.HardStateChanged ||
				after.Role != before.Role || after.Leader != before.Leader || after.Term != before.Term {
				s.fail("%s acted at tick %d, before the tick %d its NextTick promised: %+v", id, s.now, s.wake[id], rd)
			}
			s.collectReady(id, rd)
			continue
		}
		s.nodes[id].Tick()
		s.collect(id)
	}
	s.stabilize()
	for _, id := range s.ids {
		if !s.crashed[id] && s.role[id] == Leader {
			s.leaderTicks[id]++
		}
	}
}

func (s *simNet) run(ticks int) {
	for i := 0; i < ticks; i++ {
		s.tick()
	}
}

// runUntil ticks until cond holds, failing after limit ticks; it returns the
// ticks taken.
func (s *simNet) runUntil(limit int, what string, cond func() bool) int {
	s.t.Helper()
	for i := 0; i <= limit; i++ {
		if cond() {
			return i
		}
		s.tick()
	}
	s.t.Fatalf("tick %d: %s did not happen within %d ticks; %s", s.now, what, limit, s.describe())
	return 0
}

func (s *simNet) describe() string {
	out := ""
	for _, id := range s.ids {
		st := s.nodes[id].Status()
		out += fmt.Sprintf("[%s crashed=%v role=%v leader=%q term=%d] ", id, s.crashed[id], st.Role, st.Leader, st.Term)
	}
	return out
}

// connOf names id's current bus connection: a new one after each restart.
func (s *simNet) connOf(id string) string { return fmt.Sprintf("%s#%d", id, s.incarnation[id]) }

// leaderGone tells the listed members that id's current connection closed.
func (s *simNet) leaderGone(id string, to ...string) {
	for _, o := range to {
		if !s.crashed[o] {
			s.nodes[o].LeaderGone(id, s.connOf(id))
			s.collect(o)
		}
	}
	s.stabilize()
}

func (s *simNet) crash(id string) {
	s.crashed[id] = true
	s.role[id] = Follower
}

// restart brings a crashed member back from what it persisted.
func (s *simNet) restart(id string) {
	s.crashed[id] = false
	s.incarnation[id]++
	s.start(id)
}

func (s *simNet) isolate(id string) {
	for _, o := range s.ids {
		if o != id {
			s.cut[[2]string{id, o}] = true
			s.cut[[2]string{o, id}] = true
		}
	}
}

// partition cuts every link between the two sides.
func (s *simNet) partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			s.cut[[2]string{x, y}] = true
			s.cut[[2]string{y, x}] = true
		}
	}
}

func (s *simNet) heal() { s.cut = map[[2]string]bool{} }

// agreed returns the leader every running member in ids reports, and whether
// they all agree on one that itself leads.
func (s *simNet) agreed(ids ...string) (string, bool) {
	if len(ids) == 0 {
		ids = s.running()
	}
	leader := ""
	for i, id := range ids {
		st := s.nodes[id].Status()
		if i == 0 {
			leader = st.Leader
		}
		if st.Leader == "" || st.Leader != leader {
			return "", false
		}
	}
	if s.crashed[leader] || s.nodes[leader].Status().Role != Leader {
		return "", false
	}
	return leader, true
}

func (s *simNet) running() []string {
	var out []string
	for _, id := range s.ids {
		if !s.crashed[id] {
			out = append(out, id)
		}
	}
	return out
}

func (s *simNet) term(id string) uint64 { return s.nodes[id].Status().Term }

func (s *simNet) electionDeliveries() int {
	n := 0
	for _, c := range s.delivered {
		n += c
	}
	return n
}

func (s *simNet) resetCounts() { s.delivered = map[MsgType]int{} }

// selfDrained reports whether member id says it is drained.
func (s *simNet) selfDrained(id string) bool {
	for _, m := range s.nodes[id].Status().Members {
		if m.ID == id {
			return m.Drained
		}
	}
	return false
}

// drain drains or undrains member id and delivers what follows.
func (s *simNet) drain(id string, on bool) {
	s.setDrained(id, on)
	s.stabilize()
}

// setDrained drains or undrains member id, persisted as an agent does: a
// restart keeps it.
func (s *simNet) setDrained(id string, on bool) {
	c := s.cfgs[id]
	c.Drained = on
	s.cfgs[id] = c
	s.nodes[id].Drain(on)
	s.collect(id)
}
