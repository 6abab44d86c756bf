package safety

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edge-agent/edge-agent/election"
)

// TickUnits is how many units of real time a tick lasts on a clock that runs
// at the nominal rate. Members' clocks may run faster or slower (Options.Skew).
const TickUnits = 1000

// Options describe a simulated site.
type Options struct {
	// N members "n1".."nN"; nN ranks highest.
	N int
	// Algorithm is "bully" or "ring".
	Algorithm string
	// Tweak adjusts each member's configuration after the defaults (see
	// BaseConfig); it must keep every member's timing the same.
	Tweak func(*election.Config)
	// Skew is each member's clock rate offset (len N, or nil for none): a
	// member with skew s ticks every TickUnits*(1+s) units of real time.
	Skew []float64
	// Witnesses names the members that vote but never lead
	// (election.Config.Witnesses), the same list for every member.
	Witnesses []string
	// Routes makes the site an offline one: every member's agent embeds a
	// server clustered with the others', so a crash closes the crashed
	// member's routes, and route closures are reported to the agents.
	Routes bool
	// Fail is called with a description of the first invariant broken; the
	// world keeps running, so Fail should stop the caller (t.Fatal, a panic
	// recovered by the checker, ...).
	Fail func(msg string)
	// Trace, when set, receives one line per event.
	Trace func(line string)
}

// BaseConfig is the timing of the simulated members: H = 10 ticks, D = 3H,
// an answer timeout of H, and the longest lease the core accepts. The
// backoff is deterministic.
func BaseConfig(id string, members []election.Member) election.Config {
	return election.Config{
		ID: id, Members: members,
		HeartbeatTicks: 10, ElectionTicks: 30, LeaseTicks: 19, AnswerTicks: 10,
		HoldDownTicks: 100,
		Backoff:       &Doubling{Base: 5, Max: 40},
	}
}

// Doubling is a deterministic backoff: Base, doubling up to Max ticks.
type Doubling struct{ Base, Max, cur int }

// Next implements election.Backoff.
func (b *Doubling) Next() int {
	if b.cur == 0 {
		b.cur = b.Base
	} else {
		b.cur = min(b.cur*2, b.Max)
	}
	return b.cur
}

// Reset implements election.Backoff.
func (b *Doubling) Reset() { b.cur = 0 }

// Msg is a message in flight to one member. A broadcast becomes one Msg per
// member when it is sent, each delivered, held or lost on its own.
type Msg struct {
	ID     uint64
	M      election.Message
	To     string
	SentAt int64 // real time
	// Queued: the message had crossed the route into its receiver's queue
	// when the route closed; the route's state no longer matters to it.
	Queued bool
}

func (m *Msg) String() string {
	s := fmt.Sprintf("#%d %s %s->%s t%d", m.ID, m.M.Type, m.M.From, m.To, m.M.Term)
	if m.M.Seq != 0 {
		s += fmt.Sprintf(" s%d", m.M.Seq)
	}
	if m.M.Type == election.MsgVote || m.M.Type == election.MsgPreVoteReply {
		s += fmt.Sprintf(" granted=%v", m.M.Granted)
	}
	if m.M.Nominee != "" {
		s += " nominee=" + m.M.Nominee
	}
	if m.M.Candidate != "" {
		s += fmt.Sprintf(" cand=%s init=%s voters=%v", m.M.Candidate, m.M.Initiator, m.M.Participants)
	}
	return s
}

// Advisory is the bus's report that member About's connection Conn closed
// (a nats-server "Client Closed" disconnect advisory). It exists only once
// that connection really closed: the member crashed, or its own client
// closed it, in which case the member stopped leading at that moment.
type Advisory struct {
	About, Conn string
}

type member struct {
	id     string
	node   election.Node
	cfg    election.Config
	inc    int // incarnation: restarts so far
	up     bool
	frozen bool
	// frozenAt is when the member was frozen.
	frozenAt int64
	tau      int64 // real units per tick
	next     int64 // real time of its next tick
	ticks    int64 // ticks given to the node in this incarnation
	// wake is the tick count before which, by its NextTick answer, the
	// node would not act: an agent sleeping until then relies on it.
	wake       int64
	conn       string
	connSeq    int
	role       election.Role
	leader     string
	term       uint64
	leaseSeq   uint64
	leaseTicks int
	sent       map[uint64]int64 // heartbeat or coordinator seq -> real time of its first send, this incarnation
	// unsaved is a HardState whose messages left first (Ready.SendFirst),
	// not yet on disk: it is saved before the member's next input, and a
	// crash before that loses it.
	unsaved *election.HardState
	// routeLost holds the peers whose route this (frozen) member's server
	// lost, to report when it wakes if the route is still down.
	routeLost []string
}

// World is a simulated site: members running election nodes, each on a clock
// of its own, a network that holds every message until the driver delivers,
// drops or duplicates it, and the bus's reports (disconnect advisories,
// route closures). After every step it checks the invariants:
//
//   - at most one member leads a term;
//   - at no instant do two members hold a valid lease (a member leads, has
//     not crashed, and the real time is before the first send of the
//     heartbeat its lease rests on plus the LeaseTicks its Ready said, of
//     its own clock: a frozen member's lease runs out by real time, not by
//     its ticks);
//   - a persisted term never goes back, and a vote persisted in a term is
//     never changed;
//   - a member asleep until the tick its NextTick named does not act before;
//   - a drained member or a witness is never candidate or leader.
//
// Routes model an offline site where every member's agent embeds a server
// clustered with the others: messages between two members cross the route
// between their servers, and both ends see a route close at the same instant.
// A World is not safe for concurrent use.
type World struct {
	opts    Options
	Now     int64
	ids     []string // by rank, lowest first
	members map[string]*member
	Flight  []*Msg
	nextID  uint64
	// delivered holds the last ReplayWindow messages delivered, for
	// Replay: a ring, the next to replace at delivered[nDelivered%len].
	delivered  []*Msg
	nDelivered int
	cut        map[[2]string]bool
	// routeDown: pairs (lower id first) whose route is down, since when.
	routeDown map[[2]string]int64
	// cutSince: pairs (lower id first) cut both ways, since when.
	cutSince   map[[2]string]int64
	Advisories []Advisory

	disk       map[string]election.HardState
	voted      map[string]map[uint64]string
	termLeader map[uint64]string
	// drained: members drained by the operator (persisted: a restart keeps it).
	drained map[string]bool
	failed  bool
	Steps   int64
}

// New builds a started site.
func New(o Options) *World {
	w := &World{
		opts: o, members: map[string]*member{}, cut: map[[2]string]bool{},
		routeDown: map[[2]string]int64{}, cutSince: map[[2]string]int64{},
		disk: map[string]election.HardState{}, voted: map[string]map[uint64]string{},
		termLeader: map[uint64]string{}, drained: map[string]bool{},
	}
	var ms []election.Member
	for i := 1; i <= o.N; i++ {
		id := fmt.Sprintf("n%d", i)
		ms = append(ms, election.Member{ID: id, Priority: i})
		w.ids = append(w.ids, id)
	}
	for i, id := range w.ids {
		cfg := BaseConfig(id, ms)
		cfg.Witnesses = slices.Clone(o.Witnesses)
		if o.Tweak != nil {
			o.Tweak(&cfg)
		}
		tau := int64(TickUnits)
		if o.Skew != nil {
			tau = int64(float64(TickUnits) * (1 + o.Skew[i]))
		}
		w.members[id] = &member{id: id, cfg: cfg, tau: tau}
		w.start(id)
	}
	return w
}

// IDs returns the members, lowest rank first.
func (w *World) IDs() []string { return w.ids }

// Config returns member id's configuration.
func (w *World) Config(id string) election.Config { return w.members[id].cfg }

func (w *World) trace(format string, args ...any) {
	if w.opts.Trace != nil {
		w.opts.Trace(fmt.Sprintf("%8d ", w.Now) + fmt.Sprintf(format, args...))
	}
}

func (w *World) fail(format string, args ...any) {
	if w.failed {
		return
	}
	w.failed = true
	msg := fmt.Sprintf("at %d: ", w.Now) + fmt.Sprintf(format, args...)
	w.trace("VIOLATION %s", msg)
	if w.opts.Fail != nil {
		w.opts.Fail(msg)
	}
}

// Failed reports whether an invariant was broken.
func (w *World) Failed() bool { return w.failed }

func (w *World) start(id string) {
	m := w.members[id]
	cfg := m.cfg
	cfg.HardState = w.disk[id]
	cfg.Drained = w.drained[id]
	if b, ok := cfg.Backoff.(*Doubling); ok {
		cfg.Backoff = &Doubling{Base: b.Base, Max: b.Max}
	}
	var err error
	switch w.opts.Algorithm {
	case "ring":
		m.node, err = election.NewRing(cfg)
	default:
		m.node, err = election.NewBully(cfg)
	}
	if err != nil {
		panic(fmt.Sprintf("start %s: %v", id, err))
	}
	m.up, m.frozen = true, false
	m.ticks, m.wake = 0, 0
	m.next = w.Now + m.tau
	m.role, m.leader, m.term, m.leaseSeq, m.leaseTicks = election.Follower, "", cfg.HardState.Term, 0, 0
	m.sent = map[uint64]int64{}
	m.routeLost = nil
	m.connSeq++
	m.conn = fmt.Sprintf("%s#%d.%d", id, m.inc, m.connSeq)
}

// step runs f (one input) on member id and applies its Ready, as an agent
// does: persist, then send, then report.
func (w *World) step(id string, f func(n election.Node)) {
	m := w.members[id]
	w.save(m)
	f(m.node)
	w.collect(m)
}

func (w *World) collect(m *member) {
	w.Steps++
	rd := m.node.Ready()
	w.apply(m, rd)
	m.wake = m.ticks + int64(m.node.NextTick())
	w.checkLeases()
}

func (w *World) apply(m *member, rd election.Ready) {
	id := m.id
	if rd.HardStateChanged {
		if m.unsaved != nil {
			w.fail("%s: a Ready before the last one's state was saved", id)
		}
		hs := rd.HardState
		if rd.SendFirst {
			// Its messages leave now; the agent saves it after them, before
			// its next input (see save).
			m.unsaved = &hs
		} else {
			w.persist(m, hs)
		}
	}
	w.send(m, rd)
}

// save stores what member m's last Ready left unsaved (Ready.SendFirst):
// the agent's persist that followed the send has ended by the time the
// member takes its next input.
func (w *World) save(m *member) {
	if m.unsaved != nil {
		hs := *m.unsaved
		m.unsaved = nil
		w.persist(m, hs)
	}
}

// persist writes hs as member m's state on disk, checking that a term never
// goes back and a vote is never changed or given twice in a term.
func (w *World) persist(m *member, hs election.HardState) {
	id := m.id
	old := w.disk[id]
	if hs.Term < old.Term {
		w.fail("%s: persisted term went back from %d to %d", id, old.Term, hs.Term)
	}
	if hs.Term == old.Term && old.VotedFor != "" && hs.VotedFor != old.VotedFor {
		w.fail("%s: vote in term %d changed from %s to %q", id, hs.Term, old.VotedFor, hs.VotedFor)
	}
	if hs.VotedFor != "" {
		if w.voted[id] == nil {
			w.voted[id] = map[uint64]string{}
		}
		if prev, ok := w.voted[id][hs.Term]; ok && prev != hs.VotedFor {
			w.fail("%s: voted twice in term %d: %s and %s", id, hs.Term, prev, hs.VotedFor)
		}
		w.voted[id][hs.Term] = hs.VotedFor
	}
	w.disk[id] = hs
}

// send puts rd's messages in flight and takes its role, checking that no
// term has two leaders.
func (w *World) send(m *member, rd election.Ready) {
	id := m.id
	for _, out := range rd.Messages {
		if out.From != id {
			w.fail("%s sent a message from %q", id, out.From)
		}
		if out.Type == election.MsgHeartbeat || out.Type == election.MsgCoordinator {
			if _, ok := m.sent[out.Seq]; !ok {
				m.sent[out.Seq] = w.Now // an agent dates a seq by its first send
			}
		}
		if out.Type == election.MsgHeartbeat {
			out.Conn = m.conn
		}
		for _, to := range w.ids {
			if to == id || (out.To != "" && out.To != to) || w.blocked(id, to) {
				continue
			}
			w.nextID++
			c := out
			c.Alive = slices.Clone(out.Alive)
			c.Participants = slices.Clone(out.Participants)
			w.Flight = append(w.Flight, &Msg{ID: w.nextID, M: c, To: to, SentAt: w.Now})
		}
	}
	if rd.Role == election.Leader && m.role != election.Leader {
		if prev, ok := w.termLeader[rd.Term]; ok && prev != id {
			w.fail("two leaders of term %d: %s and %s", rd.Term, prev, id)
		}
		w.termLeader[rd.Term] = id
		w.trace("%s leads term %d", id, rd.Term)
	}
	if rd.Role != election.Leader && m.role == election.Leader {
		w.trace("%s no longer leads (term %d)", id, rd.Term)
	}
	if rd.Role != election.Follower && w.drained[id] {
		w.fail("%s is drained and %v in term %d", id, rd.Role, rd.Term)
	}
	if rd.Role != election.Follower && w.Witness(id) {
		w.fail("%s is a witness and %v in term %d", id, rd.Role, rd.Term)
	}
	m.role, m.leader, m.term, m.leaseSeq, m.leaseTicks = rd.Role, rd.Leader, rd.Term, rd.LeaseSeq, rd.LeaseTicks
	for _, ev := range rd.Events {
		if ev.Kind == election.EventSteppedDown || ev.Kind == election.EventElectionStarted || ev.Kind == election.EventElectionFailed {
			w.trace("%s event %d term %d %s", id, ev.Kind, ev.Term, ev.Reason)
		}
	}
}

// leaseEnd is when member m's lease runs out in real time (0: it holds none).
func (w *World) leaseEnd(m *member) int64 {
	if !m.up || m.role != election.Leader {
		return 0
	}
	at, ok := m.sent[m.leaseSeq]
	if !ok {
		return 0
	}
	return at + int64(m.leaseTicks)*m.tau
}

// HasLease reports whether member id holds a valid lease now.
func (w *World) HasLease(id string) bool { return w.Now < w.leaseEnd(w.members[id]) }

func (w *World) checkLeases() {
	holder := ""
	for _, id := range w.ids {
		m := w.members[id]
		if w.Now < w.leaseEnd(m) {
			if holder != "" {
				w.fail("%s and %s both hold a valid lease (%s term %d until %d, %s term %d until %d)",
					holder, id, holder, w.members[holder].term, w.leaseEnd(w.members[holder]), id, m.term, w.leaseEnd(m))
			}
			holder = id
		}
	}
}

// --- time -------------------------------------------------------------------

// Advance moves real time forward by d units, ticking every running member
// whose ticks fall due, in time order.
func (w *World) Advance(d int64) {
	end := w.Now + d
	for {
		var due *member
		for _, id := range w.ids {
			m := w.members[id]
			if m.up && !m.frozen && m.next <= end && (due == nil || m.next < due.next) {
				due = m
			}
		}
		if due == nil {
			break
		}
		w.Now = max(w.Now, due.next)
		w.tick(due)
	}
	w.Now = end
	w.checkLeases()
}

// Ticks advances real time by k nominal ticks.
func (w *World) Ticks(k int) { w.Advance(int64(k) * TickUnits) }

func (w *World) tick(m *member) {
	w.save(m)
	m.next += m.tau
	m.ticks++
	if m.ticks < m.wake {
		// Asleep, as far as the node said: this tick must not act.
		before := m.node.Status()
		m.node.Tick()
		rd := m.node.Ready()
		after := m.node.Status()
		if len(rd.Messages) > 0 || len(rd.Events) > 0 || rd.HardStateChanged ||
			after.Role != before.Role || after.Leader != before.Leader || after.Term != before.Term {
			w.fail("%s acted at tick %d, before the tick %d its NextTick promised: %+v", m.id, m.ticks, m.wake, rd)
		}
		w.Steps++
		w.apply(m, rd)
		w.checkLeases()
		return
	}
	m.node.Tick()
	w.collect(m)
}

// --- network ----------------------------------------------------------------

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// blocked reports whether a message from a to b is lost now: a link cut,
// a route down, or an end that is not running.
func (w *World) blocked(a, b string) bool {
	if w.cut[[2]string{a, b}] || !w.members[a].up || !w.members[b].up {
		return true
	}
	_, down := w.routeDown[pair(a, b)]
	return down
}

// lost reports whether message f is lost if delivered now.
func (w *World) lost(f *Msg) bool {
	if f.Queued {
		return !w.members[f.To].up
	}
	return w.blocked(f.M.From, f.To)
}

// Deliver hands message f to its target now, and removes it from the
// network unless keep is set (a duplicate stays behind). A message to a
// frozen member stays in flight; one over a cut link or to a member that is
// down is lost.
func (w *World) Deliver(f *Msg, keep bool) {
	i := slices.Index(w.Flight, f)
	if i < 0 {
		return
	}
	to := w.members[f.To]
	if to.up && to.frozen {
		return
	}
	if !keep {
		w.Flight = slices.Delete(w.Flight, i, i+1)
	}
	if w.lost(f) {
		w.trace("lost %s", f)
		return
	}
	w.trace("deliver %s", f)
	if len(w.delivered) < ReplayWindow {
		w.delivered = append(w.delivered, f)
	} else {
		w.delivered[w.nDelivered%ReplayWindow] = f
	}
	w.nDelivered++
	m := f.M
	m.Alive = slices.Clone(f.M.Alive)
	m.Participants = slices.Clone(f.M.Participants)
	w.step(f.To, func(n election.Node) { _ = n.Step(m) })
}

// ReplayWindow is how many of the last delivered messages Replay picks
// from.
const ReplayWindow = 256

// Replay sends again, as a new message in flight from its sender to its
// receiver, the i-th (modulo, so any i picks one) of the last ReplayWindow
// messages delivered: a duplicate that comes late, after what was delivered
// since. Nothing happens if none was delivered yet.
func (w *World) Replay(i int) {
	n := len(w.delivered)
	if n == 0 {
		return
	}
	i %= n
	if i < 0 {
		i += n
	}
	f := w.delivered[i]
	w.nextID++
	c := f.M
	c.Alive = slices.Clone(f.M.Alive)
	c.Participants = slices.Clone(f.M.Participants)
	r := &Msg{ID: w.nextID, M: c, To: f.To, SentAt: f.SentAt}
	w.trace("replay %s as #%d", f, r.ID)
	w.Flight = append(w.Flight, r)
}

// Drop loses message f.
func (w *World) Drop(f *Msg) {
	if i := slices.Index(w.Flight, f); i >= 0 {
		w.trace("drop %s", f)
		w.Flight = slices.Delete(w.Flight, i, i+1)
	}
}

// Find returns the messages in flight that match: type, sender, target
// ("" = any) and, if term > 0, term.
func (w *World) Find(t election.MsgType, from, to string, term uint64) []*Msg {
	var out []*Msg
	for _, f := range w.Flight {
		if f.M.Type == t && (from == "" || f.M.From == from) && (to == "" || f.To == to) && (term == 0 || f.M.Term == term) {
			out = append(out, f)
		}
	}
	return out
}

// DeliverAll delivers every message in flight that match returns true for,
// in the order sent, until none is left (deliveries may send more).
func (w *World) DeliverAll(match func(*Msg) bool) {
	for i := 0; i < 100_000; i++ {
		var next *Msg
		for _, f := range w.Flight {
			if (match == nil || match(f)) && !(w.members[f.To].up && w.members[f.To].frozen) {
				next = f
				break
			}
		}
		if next == nil {
			return
		}
		w.Deliver(next, false)
	}
	w.fail("the network did not quiesce: %d deliveries without time passing", 100_000)
}

// DropAll loses every message in flight that match returns true for.
func (w *World) DropAll(match func(*Msg) bool) {
	w.Flight = slices.DeleteFunc(w.Flight, func(f *Msg) bool { return match == nil || match(f) })
}

// Cut stops messages from a to b (one way).
func (w *World) Cut(a, b string) {
	w.cut[[2]string{a, b}] = true
	if w.cut[[2]string{b, a}] {
		if _, ok := w.cutSince[pair(a, b)]; !ok {
			w.cutSince[pair(a, b)] = w.Now
		}
	}
}

// Isolate cuts every link of id both ways.
func (w *World) Isolate(id string) {
	for _, o := range w.ids {
		if o != id {
			w.Cut(id, o)
			w.Cut(o, id)
		}
	}
}

// Heal restores every link (routes stay as they are).
func (w *World) Heal() {
	clear(w.cut)
	clear(w.cutSince)
}

// HealLink restores the link a->b.
func (w *World) HealLink(a, b string) {
	delete(w.cut, [2]string{a, b})
	delete(w.cutSince, pair(a, b))
}

// --- members ------------------------------------------------------------------

// Crash stops member id: its state is lost but what it persisted. The bus
// reports its connection closed.
func (w *World) Crash(id string) {
	m := w.members[id]
	if !m.up {
		return
	}
	if m.unsaved != nil {
		// Its request for votes left, and the save of its own vote had not
		// ended: lost.
		w.trace("crash %s before saving %+v", id, *m.unsaved)
		m.unsaved = nil
	} else {
		w.trace("crash %s", id)
	}
	m.up = false
	w.Advisories = append(w.Advisories, Advisory{About: id, Conn: m.conn})
	if w.opts.Routes {
		// Its server goes with it: every route to it closes, and the
		// other ends see that at once.
		for _, o := range w.ids {
			if o != id {
				w.RouteDown(o, id, false, nil)
			}
		}
	}
	w.checkLeases()
}

// Restart brings a crashed member back from what it persisted.
func (w *World) Restart(id string) {
	m := w.members[id]
	if m.up {
		return
	}
	w.trace("restart %s", id)
	m.inc++
	w.start(id)
	if w.opts.Routes {
		for _, o := range w.ids {
			if o != id && w.members[o].up {
				w.RouteUp(o, id)
			}
		}
	}
	w.collect(m)
}

// Freeze stops member id's process (SIGSTOP): no ticks, no messages, and
// its lease runs out by real time. Messages to it wait.
func (w *World) Freeze(id string) {
	m := w.members[id]
	if m.up && !m.frozen {
		w.trace("freeze %s", id)
		m.frozen, m.frozenAt = true, w.Now
	}
}

// Thaw resumes a frozen member: it first catches up on the ticks it
// missed, as an agent's loop does, then reports the routes it lost.
func (w *World) Thaw(id string) {
	m := w.members[id]
	if !m.up || !m.frozen {
		return
	}
	w.trace("thaw %s", id)
	m.frozen = false
	d := w.drained[id]
	w.step(id, func(n election.Node) { n.Drain(d) })
	for m.next <= w.Now {
		w.tick(m)
	}
	lost := m.routeLost
	m.routeLost = nil
	for _, p := range lost {
		if _, down := w.routeDown[pair(id, p)]; down {
			w.reportRoute(id, p)
		}
	}
}

// Up reports whether member id runs (it may be frozen).
func (w *World) Up(id string) bool { return w.members[id].up }

// Frozen reports whether member id is frozen.
func (w *World) Frozen(id string) bool { return w.members[id].frozen }

// Resign asks member id to hand over to nominee ("" = the next in rank).
func (w *World) Resign(id, nominee string) error {
	m := w.members[id]
	if !m.up || m.frozen {
		return nil
	}
	var err error
	w.trace("resign %s nominee=%q", id, nominee)
	w.step(id, func(n election.Node) { err = n.Resign(nominee) })
	return err
}

// Drain drains (or undrains) member id, as `edge-agent drain` does: the
// flag is persisted first, then the running node is told. A frozen member
// is not (its agent's loop does not run); it is told when it thaws.
func (w *World) Drain(id string, on bool) {
	m := w.members[id]
	w.drained[id] = on
	w.trace("drain %s %v", id, on)
	if m.up && !m.frozen {
		w.step(id, func(n election.Node) { n.Drain(on) })
	}
}

// Drained reports whether member id is drained.
func (w *World) Drained(id string) bool { return w.drained[id] }

// Witness reports whether member id is a witness.
func (w *World) Witness(id string) bool { return slices.Contains(w.opts.Witnesses, id) }

// Disconnect closes member id's own bus connection (its client gave up on
// it); the agent reconnects with a new one. A leader stops leading, and a
// candidate stops standing, at that moment (see StepDown): the bus reports
// the old connection closed, which releases whoever backed what it sent on
// it.
func (w *World) Disconnect(id string) {
	m := w.members[id]
	if !m.up || m.frozen {
		return
	}
	w.trace("disconnect %s", id)
	old := m.conn
	m.connSeq++
	m.conn = fmt.Sprintf("%s#%d.%d", id, m.inc, m.connSeq)
	if m.role != election.Follower {
		w.StepDown(id)
	}
	w.Advisories = append(w.Advisories, Advisory{About: id, Conn: old})
}

// StepDown makes leader or candidate id stop leading or standing without a
// handover, as its agent does when it loses its own connection. Messages of that step are lost
// (the connection is down).
func (w *World) StepDown(id string) {
	m := w.members[id]
	w.save(m)
	m.node.StepDown(election.ReasonConnectionLost)
	n := len(w.Flight)
	w.collect(m)
	w.Flight = w.Flight[:n] // sent while disconnected: lost
}

// ConnOf returns member id's current bus connection.
func (w *World) ConnOf(id string) string { return w.members[id].conn }

// Report delivers advisory a to member to (late reports included).
func (w *World) Report(to string, a Advisory) {
	m := w.members[to]
	if !m.up || m.frozen || to == a.About {
		return
	}
	w.trace("advisory to %s: %s's %s closed", to, a.About, a.Conn)
	w.step(to, func(n election.Node) { n.LeaderGone(a.About, a.Conn) })
}

// --- routes -------------------------------------------------------------------

// RouteDown closes the route between a's and b's servers. Messages in flight
// between them are lost, but those queued returns true for: they had crossed
// the route already and wait in the receiver's queue (an agent may handle the
// route's closure before them). Both ends see the route close at once: each running
// end's agent reports it (a frozen one when it wakes, if the route is still
// down then). With oneSided, only a's end sees it now; b's end only when
// ReportRoute is called for it. Networks close a live route only from one
// side after the route's pings failed for long (seconds), so a one-sided
// close should come only after a has been cut from b both ways for longer
// than D (see SilentFor).
func (w *World) RouteDown(a, b string, oneSided bool, queued func(*Msg) bool) {
	p := pair(a, b)
	if _, down := w.routeDown[p]; down {
		return
	}
	w.trace("route %s-%s down (one-sided %v)", a, b, oneSided)
	w.routeDown[p] = w.Now
	w.DropAll(func(f *Msg) bool {
		if pair(f.M.From, f.To) != p || f.Queued {
			return false
		}
		if queued != nil && queued(f) {
			f.Queued = true
			return false
		}
		return true
	})
	w.ReportRoute(a, b)
	if !oneSided {
		w.ReportRoute(b, a)
	}
}

// ReportRoute makes at's agent notice that its route to peer's server is
// down (if it is).
func (w *World) ReportRoute(at, peer string) {
	m := w.members[at]
	if _, down := w.routeDown[pair(at, peer)]; !down || !m.up {
		return
	}
	if m.frozen {
		m.routeLost = append(m.routeLost, peer)
		return
	}
	w.reportRoute(at, peer)
}

func (w *World) reportRoute(at, peer string) {
	w.trace("%s: route to %s lost", at, peer)
	w.step(at, func(n election.Node) { n.RouteLost(peer) })
}

// RouteUp restores the route between a's and b's servers.
func (w *World) RouteUp(a, b string) {
	if _, down := w.routeDown[pair(a, b)]; down {
		w.trace("route %s-%s up", a, b)
		delete(w.routeDown, pair(a, b))
	}
}

// SilentFor returns how long nothing could have crossed between a and b:
// how long they have been cut from each other both ways, or one of them
// frozen (0 if neither).
func (w *World) SilentFor(a, b string) int64 {
	var d int64
	if at, ok := w.cutSince[pair(a, b)]; ok {
		d = w.Now - at
	}
	for _, id := range []string{a, b} {
		if m := w.members[id]; m.up && m.frozen {
			d = max(d, w.Now-m.frozenAt)
		}
	}
	return d
}

// --- views ------------------------------------------------------------------

// Status returns member id's node status.
func (w *World) Status(id string) election.Status { return w.members[id].node.Status() }

// Role returns member id's role as of its last Ready.
func (w *World) Role(id string) election.Role { return w.members[id].role }

// Term returns member id's term as of its last Ready.
func (w *World) Term(id string) uint64 { return w.members[id].term }

// Leader returns who member id believes leads, as of its last Ready.
func (w *World) Leader(id string) string { return w.members[id].leader }

// Agreed returns the leader every running, unfrozen member reports, if they
// all report the same one and it holds a valid lease.
func (w *World) Agreed() (string, bool) {
	leader := ""
	for _, id := range w.ids {
		m := w.members[id]
		if !m.up || m.frozen {
			continue
		}
		if m.leader == "" || (leader != "" && m.leader != leader) {
			return "", false
		}
		leader = m.leader
	}
	if leader == "" || !w.HasLease(leader) {
		return "", false
	}
	return leader, true
}

// Describe summarises every member's state, for failure messages.
func (w *World) Describe() string {
	var b strings.Builder
	for _, id := range w.ids {
		m := w.members[id]
		st := m.node.Status()
		fmt.Fprintf(&b, "[%s up=%v frozen=%v role=%v leader=%q term=%d lease=%v] ", id, m.up, m.frozen, st.Role, st.Leader, st.Term, w.HasLease(id))
	}
	return b.String()
}
