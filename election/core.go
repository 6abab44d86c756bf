package election

import (
	"cmp"
	"fmt"

	"github.com/edge-agent/edge-agent/election/quorum"
)

// algorithm is the part of a Node that differs between Bully and Ring: how a
// member that suspects its leader finds the member that should proclaim.
// Everything else (terms, votes, heartbeats, leases, hand-over) is shared in
// core.
type algorithm interface {
	// startElection is called when the node suspects its leader (or has
	// never had one) and may stand; expected is the member the node expects
	// to proclaim ("" = work it out).
	startElection(expected string)
	// deadline is the tick at which the current phase times out.
	deadline() int64
	// onDeadline is called when the algorithm's phase deadline passes.
	onDeadline()
	// step handles the algorithm's own message types.
	step(m Message) error
	// reset abandons any election in progress (a leader was found, or this
	// node proclaimed).
	reset()
	// busy reports whether an election of the algorithm is in progress.
	busy() bool
	// leaderReleased is called whenever the node stops backing its leader;
	// an algorithm that held election messages back meanwhile (Ring keeps
	// tokens) handles them now. It reports whether the node joined an
	// election on what it held.
	leaderReleased() bool
	// announcesAlive reports whether a member that never stands (drained,
	// or a witness) tells every member it is alive while no leader is
	// heard (core.tellAlive): Ring members skip a member they do not hear
	// from, Bully members only wait for one.
	announcesAlive() bool
}

// core holds the state both algorithms share. It is the Node; the algorithm
// is plugged in as alg.
type core struct {
	cfg     Config
	self    Member
	members []Member // by rank, highest first
	rankOf  map[string]int
	quorum  quorum.Size
	alg     algorithm

	hs        HardState
	hsChanged bool
	readyRole Role // the role the last Ready reported
	role      Role
	leader    string

	now int64 // logical clock, in ticks

	// Follower side: backing. A member backs a leader (or candidate) with
	// what that member's lease or win may count: an acknowledgement of its
	// heartbeat, a vote for its COORDINATOR. From the last such message,
	// at tick lastLeaderContact, it grants no vote to anyone else and does
	// not stand for D (stickiness), unless the member it backs released it:
	// a RESIGN (the resigner stopped leading first), the bus reporting the
	// connection it announced closed (it stopped when its client did), or
	// the route between their servers closing (both ends stop counting on
	// each other at once). See docs/DESIGN-NOTES.md, "Safety invariants".
	lastLeaderContact int64
	backed            string // "" when unknown (just started: see newCore)
	backedTerm        uint64
	backedConn        string // the connection backed announced in its heartbeats of backedTerm
	released          bool
	// downAt: member -> the tick it was last marked down (left out of the
	// leader's heartbeat view, suspected, reported gone, silent when asked).
	// A mark is evidence of its moment only: after 2D it lapses (see inView).
	downAt     map[string]int64
	lastSeen   map[string]int64 // member -> tick last heard from, directly or via view
	standAfter int64            // backoff: do not proclaim before this tick
	pending    *pendingMsg      // a COORDINATOR deferred because a live leader was still heard
	nominee    string           // the member the last hand-over named (by this member or the leader), until a leader is heard
	nominated  int64            // when nominee was set
	aliveAt    int64            // when this member, never standing, last told the others it is alive (tellAlive)
	// goneAt is the tick at which the bus reported the backed leader's
	// connection closed, in term goneTerm. An election this member starts
	// on that report, in that term and within AnswerTicks, needs no
	// pre-vote: the leader stopped, and the others were told too.
	goneAt   int64
	goneTerm uint64
	// goneLeader is the leadership that report was about: the member, the
	// term it was backed in, the connection its heartbeats announced, and
	// the tick of the report. A heartbeat of that term announcing that
	// connection that arrives within AnswerTicks of the report was most
	// likely sent before the connection closed (it came over the election
	// connection, the report over another): it does not back the member
	// again. After that window it does, so that a false report (a
	// middlebox's close, a live leader) costs a member one failed election,
	// as before, and not its leader for the rest of the term.
	goneLeader struct {
		id, conn string
		term     uint64
		at       int64
	}
	// pendingPre holds pre-vote requests deferred while a live leader was
	// heard, by requester; they are answered when the leader goes silent.
	pendingPre map[string]pendingMsg

	// Pre-vote side: preVotes is non-nil while this member asks whether a
	// quorum would vote for it in the next term. Members that suspect the
	// leader tell the member they expect to proclaim at once, unasked
	// (earlyPre); the request goes out only if they have not after
	// preVoteAsk.
	preVotes   map[string]bool
	preVoteAsk int64
	preVoteEnd int64
	preVoteSq  uint64
	earlyPre   map[string]pendingMsg

	// Candidate side.
	votes map[string]uint64 // voter -> seq of the request it granted (itself: the latest sent)
	// votePromise: voter -> the shortest D it promised with a vote of
	// this candidacy (Message.Promise, 0 read as this member's own D).
	votePromise map[string]int
	refusals    map[string]bool
	voteEnd     int64
	resentAt    int64 // tick the COORDINATOR was last sent
	widenAt     int64 // tick to repeat to every member a COORDINATOR sent to a few (never: sent to all)
	proclaimSq  uint64
	// standing is the term of this member's candidacy until it ends (see
	// settleCandidacy); 0 when it has none.
	standing uint64
	// announced: this candidate won a Ring round and announced itself with
	// a heartbeat (see stand); it counts acknowledgements of that heartbeat,
	// never votes, and has no COORDINATOR to repeat.
	announced bool

	// Leader side.
	hbSeq        uint64
	hbAt         int64            // tick of the last heartbeat sent
	sentAt       map[uint64]int64 // heartbeat/coordinator seq -> tick sent
	acked        map[string]uint64
	ackedAt      map[string]int64
	healthySince map[string]int64
	// promised: member -> the D it promised with the acknowledgement
	// counted in acked (Message.Promise; see ackLease).
	promised map[string]int
	// The lease runs for leaseTicks from the send of heartbeat leaseSeq.
	leaseSeq    uint64
	leaseTicks  int
	leaderSince int64
	// cutOff: member -> this member's heartbeat counter when the route
	// between their servers closed. A vote or an acknowledgement of a
	// request sent before then no longer counts: the member was released
	// from backing this one at that moment (see RouteLost).
	cutOff map[string]uint64

	// drained: this member never stands (see Node.Drain). peerDrained:
	// members whose last acknowledgement said they are drained; a leader
	// hands leadership to none of them.
	drained     bool
	peerDrained map[string]bool
	// witness: the members that never lead (Config.Witnesses), known to
	// every member from the start.
	witness map[string]bool

	msgs   []Message
	events []Event
}

func newCore(cfg Config) (*core, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &core{
		cfg:      cfg,
		members:  SortByRank(cfg.Members),
		rankOf:   make(map[string]int, len(cfg.Members)),
		quorum:   quorum.Size(cfg.Quorum),
		hs:       cfg.HardState,
		downAt:   make(map[string]int64, len(cfg.Members)),
		lastSeen: make(map[string]int64, len(cfg.Members)),
		sentAt:   make(map[uint64]int64),
	}
	for i, m := range c.members {
		c.rankOf[m.ID] = i
		c.lastSeen[m.ID] = -1
		if m.ID == cfg.ID {
			c.self = m
		}
	}
	c.lastSeen[c.self.ID] = 0
	c.cutOff = make(map[string]uint64, len(cfg.Members))
	c.pendingPre = make(map[string]pendingMsg)
	c.earlyPre = make(map[string]pendingMsg)
	// A member that just started may have acknowledged a leader right
	// before it went down: it grants no vote and does not stand for D ticks,
	// exactly as if it had just heard that leader, or for StartWaitTicks if
	// longer (the D it promised then). This keeps leases safe across
	// restarts. Whom it backed is unknown, but not in a term above the one
	// it persisted (a term is persisted before it is acknowledged).
	c.lastLeaderContact = int64(max(cfg.StartWaitTicks, cfg.ElectionTicks) - cfg.ElectionTicks)
	c.backedTerm = c.hs.Term
	c.goneAt = neverTick
	c.drained = cfg.Drained
	c.peerDrained = make(map[string]bool)
	c.witness = make(map[string]bool, len(cfg.Witnesses))
	for _, w := range cfg.Witnesses {
		c.witness[w] = true
	}
	return c, nil
}

// mayStand reports whether this member may stand for election: it is not
// drained and not a witness. Every path to candidacy (proclaim, a Ring
// round, a nomination) goes through stand or is guarded by it.
func (c *core) mayStand() bool { return !c.drained && !c.witness[c.self.ID] }

// mayLead reports whether id may be handed leadership: it is not a witness
// and, as far as this node knows, not drained.
func (c *core) mayLead(id string) bool {
	if id == c.self.ID {
		return c.mayStand()
	}
	return !c.peerDrained[id] && !c.witness[id]
}

// markDown records that id is believed down now; markUp that it is alive.
func (c *core) markDown(id string) { c.downAt[id] = c.now }
func (c *core) markUp(id string)   { delete(c.downAt, id) }

// inView reports whether id may be alive: it was not marked down, or the
// mark is older than 2D. Views come from a leader's heartbeats; once no
// leader has been heard for long, a member left out of the last one may be
// back, and an election that skipped it for ever could fall short of a
// quorum with every member up.
func (c *core) inView(id string) bool {
	at, ok := c.downAt[id]
	return !ok || c.now-at >= 2*int64(c.cfg.ElectionTicks)
}

// outranks reports whether member a ranks above member b.
func (c *core) outranks(a, b string) bool { return c.rankOf[a] < c.rankOf[b] }

func (c *core) isMember(id string) bool { _, ok := c.rankOf[id]; return ok }

func (c *core) send(m Message) {
	m.From = c.self.ID
	if (m.Type == MsgAck && m.Seq != 0) || (m.Type == MsgVote && m.Granted) {
		m.Promise = c.cfg.ElectionTicks
	}
	c.msgs = append(c.msgs, m)
}

func (c *core) event(k EventKind, peer string, reason Reason) {
	c.events = append(c.events, Event{Kind: k, Term: c.hs.Term, Peer: peer, Reason: reason})
}

func (c *core) setLeader(id string) {
	if c.leader != id {
		c.leader = id
		c.event(EventNewLeader, id, ReasonNone)
	}
}

// leaderLive reports whether the node still backs a leader (or a candidate
// it voted for) recently enough that it must not vote for anyone else.
func (c *core) leaderLive() bool {
	if c.role == Leader {
		return true
	}
	if c.released {
		return false
	}
	return c.now-c.lastLeaderContact < int64(c.cfg.ElectionTicks)
}

// back records that this member now backs id in term, with a message that
// id's lease or win may count; conn is the connection id announced.
func (c *core) back(id string, term uint64, conn string) {
	c.lastLeaderContact = c.now
	c.backed, c.backedTerm, c.backedConn = id, term, conn
	c.released = false
	c.nominee = ""
	c.endPreVote() // stickiness: it may not stand for D now, whatever pre-votes come
}

// releases reports whether a RESIGN from id in term releases this member's
// backing: it comes from the member backed, in the term backed or later, or
// it is of a later term (a leader of that term was elected, so every lease
// of an older term had ended before).
func (c *core) releases(id string, term uint64) bool {
	return term > c.backedTerm || (term == c.backedTerm && (c.backed == "" || c.backed == id))
}

// mayBack reports whether this member may back id in term despite backing
// another (stickiness): only the member it backs may ask, for a later term
// (it stepped down and stands again; its old lease is its own).
func (c *core) mayBack(id string, term uint64) bool {
	return !c.leaderLive() || (c.role != Leader && id == c.backed && term > c.backedTerm)
}

func (c *core) backoffTicks() int {
	if c.cfg.Backoff == nil {
		return c.cfg.ElectionTicks
	}
	n := c.cfg.Backoff.Next()
	if n < 1 {
		n = 1
	}
	return n
}

// adoptTerm moves the node to a higher term as a follower.
func (c *core) adoptTerm(t uint64) {
	if t <= c.hs.Term {
		return
	}
	if c.role == Leader {
		c.stepDown(ReasonHigherTerm, "")
	}
	c.hs = HardState{Term: t}
	c.hsChanged = true
	if c.role == Candidate {
		c.role = Follower
	}
	c.votes, c.refusals = nil, nil
	c.endPreVote()
	clear(c.earlyPre)
}

// --- Node interface ---------------------------------------------------------

func (c *core) Ready() Ready {
	rd := Ready{
		HardState:        c.hs,
		HardStateChanged: c.hsChanged,
		Messages:         c.msgs,
		Role:             c.role,
		Leader:           c.leader,
		Term:             c.hs.Term,
		LeaseSeq:         c.leaseSeq,
		LeaseTicks:       c.leaseTicks,
		Events:           c.events,
	}
	rd.SendFirst = c.hsChanged && c.readyRole != Leader && c.role == Candidate && c.hs.VotedFor == c.self.ID &&
		onlyRequests(c.msgs, c.hs.Term)
	c.readyRole = c.role
	c.msgs, c.events, c.hsChanged = nil, nil, false
	return rd
}

// onlyRequests reports whether msgs are nothing but COORDINATORs of term
// (see Ready.SendFirst).
func onlyRequests(msgs []Message, term uint64) bool {
	for _, m := range msgs {
		if m.Type != MsgCoordinator || m.Term != term {
			return false
		}
	}
	return len(msgs) > 0
}

func (c *core) Status() Status {
	var st Status
	c.StatusInto(&st)
	return st
}

func (c *core) StatusInto(into *Status) {
	st := Status{ID: c.self.ID, Role: c.role, Leader: c.leader, Term: c.hs.Term, Quorum: int(c.quorum), Members: into.Members[:0]}
	for _, m := range c.members {
		drained := c.peerDrained[m.ID] && !c.witness[m.ID] // a witness's acknowledgements always say drained
		if m.ID == c.self.ID {
			drained = c.drained
		}
		ms := MemberStatus{Member: m, Alive: c.alive(m.ID), TicksSinceSeen: -1, Drained: drained, Witness: c.witness[m.ID]}
		if c.lastSeen[m.ID] >= 0 {
			ms.TicksSinceSeen = int(c.now - c.lastSeen[m.ID])
		}
		if p, ok := c.promised[m.ID]; ok {
			ms.Promise, ms.ShortensLease = p, c.ackLease(m.ID) < c.cfg.LeaseTicks
		}
		if ms.Alive {
			st.Live++
		}
		st.Members = append(st.Members, ms)
	}
	*into = st
}

// alive is the node's best knowledge of whether id is up.
func (c *core) alive(id string) bool {
	if id == c.self.ID {
		return true
	}
	if c.role == Leader {
		// A member the leader has not heard from yet counts as alive until
		// it has had D ticks to answer, so a new leader's first heartbeats
		// do not declare slow voters dead.
		at, ok := c.ackedAt[id]
		if !ok {
			at = c.leaderSince
		}
		return c.now-at < int64(c.cfg.ElectionTicks)
	}
	ls := c.lastSeen[id]
	return ls >= 0 && c.now-ls < int64(c.cfg.ElectionTicks)
}

// timer names one of the core's timeouts. Every timeout is a deadline in
// ticks, derived from the state by deadlines; Tick fires those that are due,
// NextTick returns the earliest, and every input fires those it made due, so
// that what an input makes possible happens at once rather than at the next
// tick. The order is the order in which timers due at the same tick fire.
type timer uint8

const (
	tHeartbeat  timer = iota // leader: send the next heartbeat
	tLease                   // leader: no quorum acknowledged a heartbeat within the lease
	tPreempt                 // leader: a higher-ranked member was healthy for the hold-down
	tVotes                   // candidate: the votes did not come in time
	tResend                  // candidate: repeat the COORDINATOR (a lossy link)
	tSuspect                 // follower: the backed leader was silent for D
	tPreVoteEnd              // follower: the pre-votes did not come in time
	tPreVoteAsk              // follower: ask for pre-votes (again)
	tAlgorithm               // follower: the algorithm's phase timed out
	tAlive                   // follower that never stands: tell the others it is alive
	tStand                   // follower: the backoff ended; stand
	numTimers
)

// never is a deadline that does not come.
const never = int64(1<<62 - 1)

// deadlines derives every timer's deadline from the state (never when the
// timer is not armed). It is the only place that knows when the core acts
// without an input.
func (c *core) deadlines() (d [numTimers]int64) {
	for i := range d {
		d[i] = never
	}
	h := int64(c.cfg.HeartbeatTicks)
	switch c.role {
	case Leader:
		d[tHeartbeat] = c.hbAt + h
		d[tLease] = c.leaseEnd()
		d[tPreempt] = c.preemptAt()
	case Candidate:
		d[tVotes] = c.voteEnd
		if !c.announced {
			d[tResend] = min(c.resentAt+h, c.widenAt)
		}
	default:
		if !c.released && (c.leaderLive() || c.leader != "" || c.pending != nil || len(c.pendingPre) > 0) {
			// Backing a leader; or the silence just began and what was kept
			// while it was heard waits for the suspicion to be handled.
			d[tSuspect] = c.lastLeaderContact + int64(c.cfg.ElectionTicks)
		}
		if !c.mayStand() && !c.leaderLive() && c.alg.announcesAlive() {
			d[tAlive] = c.aliveAt + h
		}
		switch {
		case c.leaderLive():
			if c.alg.busy() {
				d[tAlgorithm] = c.alg.deadline()
			}
		case c.preVotes != nil:
			d[tPreVoteEnd] = c.preVoteEnd
			d[tPreVoteAsk] = c.preVoteAsk
		case c.alg.busy():
			d[tAlgorithm] = c.alg.deadline()
		default:
			d[tStand] = c.standAfter
		}
	}
	return d
}

// fire runs the timer t, which is due.
func (c *core) fire(t timer) {
	switch t {
	case tHeartbeat:
		c.heartbeat()
	case tLease:
		c.stepDown(ReasonLeaseExpired, "")
		c.standAfter = c.now + int64(c.backoffTicks())
	case tPreempt:
		c.maybePreempt()
	case tVotes:
		c.electionFailed(ReasonNoVotes)
	case tResend:
		c.resendCoordinator()
	case tSuspect:
		c.suspectLeader()
	case tPreVoteEnd:
		c.preVoteFailed()
	case tPreVoteAsk:
		// Asked, and asked again every H while the answer window lasts
		// (only when answer_timeout is longer than H: a lossy link), as a
		// candidate repeats its COORDINATOR.
		c.preVoteAsk = c.now + int64(c.cfg.HeartbeatTicks)
		c.send(Message{Type: MsgPreVote, Term: c.hs.Term + 1, Seq: c.preVoteSq})
	case tAlgorithm:
		c.alg.onDeadline()
	case tAlive:
		c.tellAlive()
	case tStand:
		if !c.mayStand() {
			// Drained: it takes part in the others' election (its
			// suspicion to the member it expects to stand, the fallback
			// ELECTION) but never stands; it looks again after D.
			c.standAfter = c.now + int64(c.cfg.ElectionTicks)
		}
		c.alg.startElection("")
	}
}

// fireDue fires every timer that is due now, in timer order, deriving the
// deadlines again after each (a timer's handler moves its own deadline on,
// and may make another one due).
func (c *core) fireDue() {
	c.fireTimers()
	c.settleCandidacy()
}

func (c *core) fireTimers() {
	for range 4 * numTimers {
		d := c.deadlines()
		due := numTimers
		for t := timer(0); t < numTimers; t++ {
			if d[t] <= c.now {
				due = t
				break
			}
		}
		if due == numTimers {
			return
		}
		c.fire(due)
	}
}

func (c *core) Tick() {
	c.now++
	c.fireDue()
}

// NextTick implements Node: the earliest deadline.
func (c *core) NextTick() int {
	next := never
	for _, t := range c.deadlines() {
		next = min(next, t)
	}
	return int(min(max(next-c.now, 1), 1<<30))
}

// suspectLeader runs when the backed leader has been silent for D: the
// member now suspects it, and grants what it kept back while it heard it.
func (c *core) suspectLeader() {
	if c.leader != "" {
		c.markDown(c.leader) // the member we now suspect
		c.setLeader("")
	}
	if c.votePending() {
		return
	}
	c.preVotePending()
}

// votePending grants a vote deferred while a leader was still heard, now
// that it is not, if the request is still fresh. It reports whether a vote
// was granted.
func (c *core) votePending() bool {
	if c.alg.leaderReleased() {
		return true
	}
	if c.pending == nil {
		return false
	}
	p := *c.pending
	c.pending = nil
	if p.m.Term <= c.hs.Term || c.now-p.at > int64(c.cfg.AnswerTicks) {
		return false
	}
	_ = c.stepCoordinator(p.m)
	return c.leaderLive()
}

// --- leader ----------------------------------------------------------------

func (c *core) heartbeat() {
	c.hbAt = c.now
	// Forget the heartbeats too old to date a lease: the lease falls back
	// to an older one only when a member's acknowledgements stop counting
	// (RouteLost), and only within LeaseTicks.
	for s, at := range c.sentAt {
		if c.now-at >= int64(c.cfg.LeaseTicks) && s != c.leaseSeq {
			delete(c.sentAt, s)
		}
	}
	c.hbSeq++
	c.sentAt[c.hbSeq] = c.now
	// A leader that is a quorum on its own (one member, island mode) backs
	// its own heartbeat: with nobody to acknowledge it, the lease must
	// still run from this send. With a larger quorum this changes nothing:
	// the leader's own seq is always the newest.
	c.renewLease()
	alive := make([]string, 0, len(c.members))
	for _, m := range c.members {
		if c.alive(m.ID) {
			alive = append(alive, m.ID)
		}
	}
	c.send(Message{Type: MsgHeartbeat, Term: c.hs.Term, Seq: c.hbSeq, Alive: alive})
}

func (c *core) becomeLeader() {
	c.endPreVote()
	c.goneAt = neverTick
	clear(c.pendingPre)
	clear(c.earlyPre)
	c.role = Leader
	c.leaderSince = c.now
	c.nominee = ""
	c.pending = nil
	c.alg.reset()
	c.acked = make(map[string]uint64, len(c.members))
	c.ackedAt = make(map[string]int64, len(c.members))
	c.healthySince = make(map[string]int64, len(c.members))
	c.promised = make(map[string]int, len(c.members))
	for id, seq := range c.votes {
		if id != c.self.ID {
			c.acked[id] = seq
			c.ackedAt[id] = c.now
			c.healthySince[id] = c.now
			c.promised[id] = c.promiseOf(c.votePromise[id])
		}
	}
	// The lease runs from the newest request that a quorum answered: each
	// vote echoes the seq of the COORDINATOR it answered (a repeat has a
	// seq of its own), and a voter backs this member from when it got it.
	c.leaseSeq, c.leaseTicks = c.quorumLease()
	c.votes, c.refusals, c.votePromise = nil, nil, nil
	c.event(EventElectionWon, "", ReasonNone)
	c.setLeader(c.self.ID)
	if c.cfg.Backoff != nil {
		c.cfg.Backoff.Reset()
	}
	c.heartbeat()
}

// stepDown leaves leadership (or candidacy) and becomes a follower.
func (c *core) stepDown(reason Reason, peer string) {
	if c.role == Leader {
		c.event(EventSteppedDown, peer, reason)
	}
	c.role = Follower
	c.leaseSeq, c.leaseTicks = 0, 0
	c.acked, c.ackedAt, c.healthySince, c.promised = nil, nil, nil, nil
	c.sentAt = make(map[uint64]int64)
	c.setLeader("")
	c.lastLeaderContact = neverTick
	c.backed, c.backedConn, c.released = "", "", false
	c.backedTerm = c.hs.Term
}

// neverTick is a tick long before any other.
const neverTick = -1 << 60

// MaxTerm is the highest term a node adopts, persists or stands in. Step
// refuses a message of a higher term before it changes anything, and a node
// at MaxTerm no longer stands (its term cannot grow), so term+1 never wraps
// and no term above MaxTerm is ever sent or persisted. Honest elections raise
// the term by one at a time: only forged or corrupt terms come near it.
const MaxTerm uint64 = 1 << 62

// termExhausted reports whether this node's term is at MaxTerm, so that it
// cannot stand; it then reports the failed attempt and waits D before the
// next one.
func (c *core) termExhausted() bool {
	if c.hs.Term < MaxTerm {
		return false
	}
	c.event(EventElectionFailed, "", ReasonTermExhausted)
	c.standAfter = c.now + int64(c.cfg.ElectionTicks)
	return true
}

func (c *core) stepAck(m Message) error {
	if m.Term > c.hs.Term {
		// A member answered this leader's (or candidate's) heartbeat from a
		// later term: it took part in an election this member missed. Follow
		// it, and stand again (if still leaderless) only after a backoff, as
		// after a refused pre-vote: standing at once would depose the winner
		// of that election in turn, and two members doing so to each other
		// never settle.
		stood := c.role != Follower
		c.adoptTerm(m.Term)
		if stood {
			c.standAfter = max(c.standAfter, c.now+int64(c.backoffTicks()))
		}
		return nil
	}
	if m.Term < c.hs.Term {
		return fmt.Errorf("%w: ack of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	if m.Drained {
		c.peerDrained[m.From] = true
	} else {
		delete(c.peerDrained, m.From)
	}
	if c.announced && c.role == Candidate && m.Seq == c.proclaimSq && m.Seq > c.cutOff[m.From] {
		// A Ring winner holds its votes already and announced itself with
		// a heartbeat: a quorum of acknowledgements starts its lease (see
		// ring.go, claim).
		c.noteVote(m.From, m.Seq, m.Promise)
		if c.quorum.Reached(len(c.votes)) {
			c.becomeLeader()
		}
		return nil
	}
	if c.role != Leader {
		return nil
	}
	c.noteAck(m.From, m.Seq, m.Promise)
	return nil
}

// noteVote counts from's vote (or, for a Ring winner, acknowledgement)
// answering request seq, with the D it promised.
func (c *core) noteVote(from string, seq uint64, promise int) {
	c.votes[from] = max(c.votes[from], seq)
	p := c.promiseOf(promise)
	if prev, ok := c.votePromise[from]; ok {
		p = min(p, prev)
	}
	c.votePromise[from] = p
}

func (c *core) noteAck(from string, seq uint64, promise int) {
	if _, ok := c.sentAt[seq]; !ok || seq > c.hbSeq || seq <= c.cutOff[from] {
		return // not a heartbeat of this leadership, or sent before the route to from closed
	}
	if prev, ok := c.ackedAt[from]; !ok || c.now-prev >= int64(c.cfg.ElectionTicks) {
		c.healthySince[from] = c.now
	}
	c.ackedAt[from] = c.now
	p := c.promiseOf(promise)
	switch {
	case seq > c.acked[from]:
		c.acked[from], c.promised[from] = seq, p
	case seq == c.acked[from]:
		c.promised[from] = min(c.promised[from], p)
	}
	c.renewLease()
}

// promiseOf reads a promise as a message carries it: 0 (not said) is this
// member's own D, what an older member's acknowledgement was always taken
// to promise.
func (c *core) promiseOf(p int) int {
	if p <= 0 {
		return c.cfg.ElectionTicks
	}
	return p
}

// ackLease is how long member id's acknowledgement backs this leader's
// lease from the send of the heartbeat it answered: LeaseTicks, or less if
// id promised a D that LeaseTicks + HeartbeatTicks does not stay below (by
// the tick Config.LeaseTicks leaves). A member's D is its own config's,
// which the leader's config was never checked against: on a site whose
// timing is changed one gateway at a time, a lease may be longer than
// another member's D allows, and without this the member could vote for
// another leader while the lease still counted its acknowledgement. The
// lease is shortened rather than refused, so that such a site keeps one
// leader (with a shorter lease) instead of flapping.
func (c *core) ackLease(id string) int {
	return min(c.cfg.LeaseTicks, c.promised[id]-c.cfg.HeartbeatTicks-1)
}

// quorumLease is the lease the acknowledgements give: each member that
// acknowledged backs the leader from the send of the newest heartbeat it
// acknowledged, for ackLease; the leader backs itself from its newest
// heartbeat, for LeaseTicks. The lease lasts while a quorum still backs it:
// it is the backing that ends quorum-th latest (0, 0 if there are fewer).
// With every member promising the leader's own D this is the newest
// heartbeat a quorum acknowledged, for LeaseTicks.
func (c *core) quorumLease() (seq uint64, ticks int) {
	type backing struct {
		seq   uint64
		ticks int
		end   int64
	}
	bs := make([]backing, 0, len(c.acked)+1)
	add := func(s uint64, t int) {
		if at, ok := c.sentAt[s]; ok && s != 0 {
			bs = append(bs, backing{s, t, at + int64(t)})
		}
	}
	add(c.hbSeq, c.cfg.LeaseTicks)
	for id, s := range c.acked {
		add(s, c.ackLease(id))
	}
	// Equal ends are ordered by seq, so that the result does not depend
	// on the map's order.
	b, ok := quorum.Latest(c.quorum, bs, func(a, b backing) int {
		if r := cmp.Compare(a.end, b.end); r != 0 {
			return r
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if !ok {
		return 0, 0
	}
	return b.seq, b.ticks
}

// leaseEnd is the tick at which the leader's lease runs out.
func (c *core) leaseEnd() int64 {
	at, ok := c.sentAt[c.leaseSeq]
	if !ok || c.leaseSeq == 0 {
		return 0
	}
	return at + int64(c.leaseTicks)
}

// renewLease moves the lease to what the acknowledgements give now, if
// that lasts longer: a backing once counted stays promised.
func (c *core) renewLease() {
	s, t := c.quorumLease()
	if at, ok := c.sentAt[s]; ok && s != 0 && at+int64(t) > c.leaseEnd() {
		c.leaseSeq, c.leaseTicks = s, t
	}
}

// preemptAt is when maybePreempt may next hand over: the earliest tick at
// which a higher-ranked member, alive now, will have been healthy for the
// hold-down (never under PreemptNever). A member not alive now becomes
// alive only by acknowledging: an input, after which this is derived again.
func (c *core) preemptAt() int64 {
	at := never
	if c.cfg.Preemption == PreemptNever {
		return at
	}
	hold := int64(c.cfg.HoldDownTicks)
	if c.cfg.Preemption == PreemptImmediate {
		hold = 0
	}
	for _, m := range c.members {
		if m.ID == c.self.ID {
			break
		}
		if since, ok := c.healthySince[m.ID]; ok && c.alive(m.ID) && c.mayLead(m.ID) {
			at = min(at, since+hold)
		}
	}
	return at
}

// maybePreempt hands leadership to a higher-ranked member that has been
// healthy long enough, under the hold-down and immediate policies.
func (c *core) maybePreempt() {
	if c.cfg.Preemption == PreemptNever {
		return
	}
	hold := int64(c.cfg.HoldDownTicks)
	if c.cfg.Preemption == PreemptImmediate {
		hold = 0
	}
	for _, m := range c.members {
		if m.ID == c.self.ID {
			return // no one above us is ready
		}
		since, ok := c.healthySince[m.ID]
		if ok && c.alive(m.ID) && c.mayLead(m.ID) && c.now-since >= hold {
			_ = c.resign(m.ID, ReasonPreempted)
			return
		}
	}
}

func (c *core) Resign(nominee string) error {
	if err := c.resign(nominee, ReasonResigned); err != nil {
		return err
	}
	c.fireDue()
	return nil
}

func (c *core) resign(nominee string, reason Reason) error {
	if c.role != Leader {
		return ErrNotLeader
	}
	if nominee != "" && (!c.isMember(nominee) || nominee == c.self.ID) {
		return fmt.Errorf("election: cannot hand over to %q", nominee)
	}
	if nominee != "" && c.witness[nominee] {
		return fmt.Errorf("%w: %q", ErrWitness, nominee)
	}
	if nominee != "" && !c.mayLead(nominee) {
		return fmt.Errorf("%w: %q", ErrDrained, nominee)
	}
	if nominee == "" {
		// The highest member that has actually acknowledged us lately: a
		// member only presumed alive may be dead, and the hand-over would
		// then wait for its answer timeout.
		for _, m := range c.members {
			at, ok := c.ackedAt[m.ID]
			if m.ID != c.self.ID && ok && c.now-at < int64(c.cfg.ElectionTicks) && c.mayLead(m.ID) {
				nominee = m.ID
				break
			}
		}
	}
	c.stepDown(reason, "")
	// The nominee's COORDINATOR must find this member willing: it named
	// the nominee itself, so it does not refuse it as outranked.
	c.nominee, c.nominated = nominee, c.now
	c.standAfter = c.now + int64(c.backoffTicks())
	c.send(Message{Type: MsgResign, Term: c.hs.Term, Nominee: nominee})
	if nominee != "" {
		c.alg.reset()
		c.alg.startElection(nominee)
	}
	return nil
}

// LeaderGone implements Node. The report must name the member this one
// backs and the connection that member announced in its heartbeats of the
// term backed: a report about an earlier connection (it reconnected since,
// or the report is about an earlier leadership), about a member not backed,
// or about a member only voted for (no heartbeat of its term heard yet)
// changes nothing.
func (c *core) LeaderGone(id, conn string) bool {
	if c.role == Leader || id == c.self.ID || id != c.backed || c.released || conn == "" || conn != c.backedConn {
		return false
	}
	c.goneAt, c.goneTerm = c.now, c.hs.Term
	c.goneLeader.id, c.goneLeader.conn, c.goneLeader.term, c.goneLeader.at = id, conn, c.backedTerm, c.now
	c.release(id)
	c.fireDue()
	return true
}

// RouteLost implements Node.
func (c *core) RouteLost(id string) bool {
	acted := c.routeLost(id)
	if acted {
		c.fireDue()
	}
	return acted
}

func (c *core) routeLost(id string) bool {
	if id == c.self.ID || !c.isMember(id) {
		return false
	}
	switch c.role {
	case Leader:
		c.cutOff[id] = c.hbSeq
		if _, ok := c.acked[id]; !ok {
			return false
		}
		delete(c.acked, id)
		delete(c.ackedAt, id)
		delete(c.healthySince, id)
		delete(c.promised, id)
		// The lease falls back to what a quorum gives without id; if that
		// is over, so is the leadership.
		s, t := c.quorumLease()
		if at, ok := c.sentAt[s]; !ok || s == 0 || at+int64(t) < c.leaseEnd() {
			c.leaseSeq, c.leaseTicks = s, t
			if c.now >= c.leaseEnd() {
				c.stepDown(ReasonRouteLost, id)
				c.standAfter = c.now + int64(c.backoffTicks())
			}
		}
		return true
	case Candidate:
		c.cutOff[id] = c.hbSeq
		if _, ok := c.votes[id]; !ok {
			return false
		}
		delete(c.votes, id)
		return true
	}
	if id != c.backed || c.released {
		return false
	}
	// Not goneAt: the route may have closed because this member's own side
	// was cut off, so it still asks for pre-votes before it stands.
	c.release(id)
	return true
}

// release ends this member's backing of id, which will not count on it any
// longer, and elects at once if it can.
func (c *core) release(id string) {
	c.released = true
	c.markDown(id)
	if c.leader == id {
		c.setLeader("")
	}
	if c.votePending() {
		return
	}
	c.preVotePending()
	if !c.alg.busy() && c.now >= c.standAfter {
		c.alg.startElection("")
	}
}

// StepDown implements Node.
func (c *core) StepDown(reason Reason) {
	if c.role == Follower {
		return
	}
	c.stepDown(reason, "")
	c.votes, c.refusals = nil, nil
	c.alg.reset()
	c.standAfter = c.now + int64(c.backoffTicks())
	c.fireDue()
}

// Drain implements Node.
func (c *core) Drain(drained bool) {
	if c.drained == drained {
		return
	}
	c.drained = drained
	switch {
	case !drained:
	case c.role == Leader:
		_ = c.resign("", ReasonDrained)
	case c.role == Candidate:
		c.role = Follower
		c.votes, c.refusals = nil, nil
		c.alg.reset()
		c.setLeader("")
		c.standAfter = c.now + int64(c.backoffTicks())
	default:
		c.endPreVote()
	}
	c.fireDue()
}

// --- follower and candidate -------------------------------------------------

func (c *core) Step(m Message) error {
	if !c.isMember(m.From) || m.From == c.self.ID {
		return fmt.Errorf("%w: %q", ErrNotMember, m.From)
	}
	if m.To != "" && m.To != c.self.ID {
		return fmt.Errorf("%w: %q", ErrWrongTarget, m.To)
	}
	// Election, OK and ring acks may carry term 0, as the wire format
	// allows: they are sent before any leader was seen, carry the sender's
	// term for information only, and grant nothing. (A ring token names its
	// round's term, at least 1; the ring checks that itself.)
	if m.Term == 0 && !preTermType(m.Type) {
		return fmt.Errorf("%w: term 0", ErrBadMessage)
	}
	if m.Term > MaxTerm {
		return fmt.Errorf("%w: term %d above MaxTerm", ErrBadMessage, m.Term)
	}
	if c.witness[m.From] && standingType(m.Type) {
		// A witness never stands or leads: only a member whose own config
		// does not name it a witness sends this. Dropped, so that it can
		// never be elected while the lists differ.
		return fmt.Errorf("%w: %v from %q, a witness (do all members list the same witnesses?)", ErrBadMessage, m.Type, m.From)
	}
	if err := c.dispatch(m); err != nil {
		return err
	}
	c.lastSeen[m.From] = c.now
	if showsMayStand(m.Type) {
		delete(c.peerDrained, m.From)
	}
	c.fireDue()
	return nil
}

// dispatch hands m to the step of its type. A step that returns an error has
// changed nothing and sent nothing.
func (c *core) dispatch(m Message) error {
	switch m.Type {
	case MsgHeartbeat:
		return c.stepHeartbeat(m)
	case MsgAck:
		return c.stepAck(m)
	case MsgCoordinator:
		return c.stepCoordinator(m)
	case MsgVote:
		return c.stepVote(m)
	case MsgResign:
		return c.stepResign(m)
	case MsgPreVote:
		return c.stepPreVote(m)
	case MsgPreVoteReply:
		return c.stepPreVoteReply(m)
	case MsgWithdraw:
		return c.stepWithdraw(m)
	case MsgElection, MsgOK, MsgRingToken, MsgRingAck:
		return c.alg.step(m)
	}
	return fmt.Errorf("%w: type %v", ErrBadMessage, m.Type)
}

// standingType reports whether messages of type t are sent only by a member
// that stands for election or leads.
func standingType(t MsgType) bool {
	switch t {
	case MsgHeartbeat, MsgCoordinator, MsgPreVote, MsgResign, MsgWithdraw, MsgOK:
		return true
	}
	return false
}

// showsMayStand reports whether a message of type t shows that its sender
// may stand: a drained member never asks for pre-votes, proclaims or answers
// an ELECTION with OK (a drained leader's heartbeats, RESIGN and WITHDRAW
// say nothing of it). What a member learned of another being drained (from
// its acknowledgements, see stepAck) is dropped on such a message: kept, it
// could outlive the drain by any time, and a member that waits for the
// highest member it believes may stand, passing over every one it believes
// drained, then waited for a lower member whose rounds never reached it,
// marked it dead on each silence, and every round skipped it (the checker:
// a Ring of five with quorum 5, leaderless with every member up).
func showsMayStand(t MsgType) bool {
	return t == MsgCoordinator || t == MsgPreVote || t == MsgOK
}

// preTermType reports whether messages of type t may carry term 0.
func preTermType(t MsgType) bool {
	switch t {
	case MsgElection, MsgOK, MsgRingToken, MsgRingAck:
		return true
	}
	return false
}

func (c *core) stepHeartbeat(m Message) error {
	if m.Term < c.hs.Term {
		// Tell the stale leader the current term so it steps down now. The
		// answer carries no seq: it acknowledges nothing. (Echoing the stale
		// heartbeat's seq, it once renewed the lease of the sender's next
		// incarnation, whose counter starts again at 1, for a heartbeat of
		// the same seq that this member never heard.)
		c.send(Message{Type: MsgAck, To: m.From, Term: c.hs.Term})
		c.event(EventStaleTerm, m.From, ReasonStaleHeartbeat)
		return nil
	}
	if g := c.goneLeader; m.From == g.id && m.Term == g.term && m.Conn == g.conn && c.now-g.at <= int64(c.cfg.AnswerTicks) {
		// Sent, most likely, before the connection it announces closed,
		// and arrived after the report: it changes nothing.
		return nil
	}
	if m.Term == c.hs.Term && c.role == Leader {
		// Only possible without a majority quorum (island mode): the lower
		// rank yields.
		if c.outranks(c.self.ID, m.From) {
			return nil
		}
		c.stepDown(ReasonOutranked, "")
	}
	c.adoptTerm(m.Term)
	if c.role == Candidate {
		c.role = Follower
		c.votes, c.refusals = nil, nil
	}
	c.alg.reset()
	c.pending = nil
	c.goneAt = neverTick
	clear(c.pendingPre)
	clear(c.earlyPre)
	c.back(m.From, m.Term, m.Conn)
	c.setLeader(m.From)
	for _, mb := range c.members {
		c.markDown(mb.ID)
	}
	for _, id := range m.Alive {
		if c.isMember(id) {
			c.markUp(id)
			c.lastSeen[id] = c.now
		}
	}
	c.markUp(m.From)
	// A leader is heard: the group is healthy again, so the damping of this
	// member's failed elections ends, the backoff it drew included. Kept,
	// it would hold the member back (up to 30 H) when this leader fails,
	// and everyone would wait for it.
	if c.cfg.Backoff != nil {
		c.cfg.Backoff.Reset()
	}
	c.standAfter = 0
	c.send(Message{Type: MsgAck, To: m.From, Term: m.Term, Seq: m.Seq, Drained: !c.mayStand()})
	return nil
}

// tryProclaim proclaims unless the node is still backing off. Unless the
// bus confirmed that the leader is gone, it first asks for pre-votes: a
// member cut off from the group (one-way cut, black hole, a partition's
// minority) then never raises its term, and so cannot depose a healthy
// leader with that term when the link heals.
func (c *core) tryProclaim() {
	if c.now < c.standAfter || c.preVotes != nil || !c.mayStand() {
		return
	}
	if c.goneConfirmed() || c.quorum.Reached(1) {
		c.proclaim()
		return
	}
	c.startPreVote()
}

// goneConfirmed reports whether the bus reported the backed leader's
// connection closed lately enough, in this term, that this member may stand
// without pre-votes: every member was told, and the leader stopped.
func (c *core) goneConfirmed() bool {
	return c.goneTerm == c.hs.Term && c.now-c.goneAt <= int64(c.cfg.AnswerTicks)
}

// highestInView returns the highest-ranked member believed alive.
func (c *core) highestInView() string {
	for _, m := range c.members {
		if m.ID == c.self.ID && c.mayStand() || m.ID != c.self.ID && c.inView(m.ID) && c.mayLead(m.ID) {
			return m.ID
		}
	}
	return c.self.ID
}

// proclaim makes this node a candidate for a new term: it votes for itself
// (persisted before the request goes out, or while it does: see
// Ready.SendFirst) and asks every member for a vote.
func (c *core) proclaim() { c.proclaimTo(nil) }

// proclaimTo is proclaim with the request sent to the members of to only
// (nil: to every member). The request is repeated to every member (see
// resendCoordinator) if those do not make a quorum in time.
func (c *core) proclaimTo(to []string) {
	c.alg.reset()
	c.pending = nil
	c.endPreVote()
	if c.termExhausted() {
		return
	}
	c.stand(c.hs.Term+1, false, to)
}

// stand makes this node a candidate in term, which is above its own or its
// own without a vote: it votes for itself, persisted before anything is
// sent (or, for a COORDINATOR alone, while it is: Ready.SendFirst). Without
// announce it asks for votes with a COORDINATOR, to the members of to or
// (nil) to every member, and becomes leader on a quorum of votes. With announce it holds a quorum's
// votes already (a Ring round) and announces itself with a heartbeat instead;
// it becomes leader on a quorum of acknowledgements of that heartbeat, which
// also dates its lease (the votes were cast at times it does not know).
func (c *core) stand(term uint64, announce bool, to []string) {
	c.alg.reset()
	c.pending = nil
	c.endPreVote()
	if !c.mayStand() {
		return
	}
	c.goneAt = neverTick
	c.adoptTerm(term)
	c.settleCandidacy()
	c.standing = term
	c.hs.VotedFor = c.self.ID
	c.hsChanged = true
	c.role = Candidate
	c.announced = announce
	c.setLeader("")
	c.votes = map[string]uint64{}
	c.votePromise = map[string]int{}
	c.refusals = map[string]bool{}
	c.voteEnd = c.now + int64(c.cfg.AnswerTicks)
	c.resentAt = c.now
	c.sentAt = map[uint64]int64{}
	c.event(EventElectionStarted, "", ReasonNone)
	if announce {
		c.heartbeat()
	} else {
		c.hbSeq++
		c.sentAt[c.hbSeq] = c.now
		req := Message{Type: MsgCoordinator, Term: c.hs.Term, Seq: c.hbSeq}
		c.widenAt = never
		if to == nil {
			c.send(req)
		} else {
			// Asked a few: if they do not make a quorum within a Ring
			// hop's wait (one of them died with the leader, unreported),
			// the request goes to every member, as a round would skip a
			// successor that does not acknowledge.
			c.widenAt = c.now + int64(c.cfg.RingHopTicks)
		}
		for _, id := range to {
			req.To = id
			c.send(req)
		}
	}
	c.proclaimSq = c.hbSeq
	c.votes[c.self.ID] = c.hbSeq
	if c.quorum.Reached(len(c.votes)) {
		c.becomeLeader()
	}
}

// resendCoordinator repeats the vote request every H while the votes are
// not in (only when the answer timeout is longer than H: a lossy link). It
// is the same request in the same term, under a seq of its own: a member
// that granted it grants it again, echoing that seq, and the lease runs from
// the newest repeat a quorum answered (dating it from the first send, a
// repeat answered after LeaseTicks won an election with its lease already
// over). On a link that loses 30% of the messages each way, one request and
// its vote get through about half the time; eight tries in a 4 s answer
// timeout almost always do.
func (c *core) resendCoordinator() {
	c.resentAt, c.widenAt = c.now, never
	c.hbSeq++
	c.sentAt[c.hbSeq] = c.now
	c.votes[c.self.ID] = c.hbSeq
	c.send(Message{Type: MsgCoordinator, Term: c.hs.Term, Seq: c.hbSeq})
}

func (c *core) electionFailed(reason Reason) {
	c.event(EventElectionFailed, "", reason)
	c.role = Follower
	c.votes, c.refusals = nil, nil
	c.standAfter = c.now + int64(c.backoffTicks())
}

func (c *core) stepCoordinator(m Message) error {
	if m.Term < c.hs.Term {
		// The current term, for the stale candidate to follow; no seq, so
		// it counts as no answer to anything.
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term})
		c.event(EventStaleTerm, m.From, ReasonStaleCoordinator)
		return nil
	}
	c.markUp(m.From)
	if m.Term == c.hs.Term && c.hs.VotedFor == m.From && c.role == Follower && (c.backed == m.From || !c.leaderLive()) {
		// A repeated request of the candidate this member voted for: the
		// same vote again (its first answer may have been lost), and the
		// same backing: the candidate may count this vote for its lease.
		// What this member started while released (its own election, a
		// pre-vote) ends with it, as on the first vote. Only while it backs
		// that candidate or no live leader: another member may have won the
		// term without this vote, and this member may have acknowledged
		// that winner's heartbeats since, which its lease counts. A late
		// repeat (or a duplicate) of the losing candidacy backed the loser
		// instead, whose next-term request or WITHDRAW then freed the
		// member at once, and the loser led the next term within the
		// winner's lease (docs/DESIGN-NOTES.md, invariant 4). Such a
		// repeat falls through to stickiness below: kept, not granted.
		c.alg.reset()
		c.back(m.From, m.Term, "")
		c.send(Message{Type: MsgVote, To: m.From, Term: m.Term, Seq: m.Seq, Granted: true})
		return nil
	}
	if m.Term == c.backedTerm && m.From == c.backed {
		// A late copy of the election that the leader this member follows
		// already won (it heard that leader's heartbeats of this term, and
		// did not vote for it): nothing to answer, nothing to start.
		return nil
	}
	if !c.mayBack(m.From, m.Term) {
		// Stickiness: a live leader is still backed. Keep the request: if
		// that leader goes silent soon, the vote is granted then, without a
		// second round. Only a request of a later term: one of this
		// member's term is never granted later (votePending), and kept, it
		// pushed out a later one (a stale repeat of a higher-ranked
		// member's candidacy over a lower one's request for the next term).
		if c.role == Follower && m.Term > c.hs.Term && (c.pending == nil || c.outranks(m.From, c.pending.m.From) || m.Term > c.pending.m.Term) {
			c.pending = &pendingMsg{m: m, at: c.now}
		}
		if c.role == Leader {
			c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		}
		c.event(EventVoteRefused, m.From, ReasonLiveLeader)
		return nil
	}
	if c.outranks(c.self.ID, m.From) && c.now >= c.standAfter && m.From != c.nominee && c.mayStand() {
		// Bully: a lower-ranked member proclaimed while we are alive. Refuse
		// and stand ourselves.
		preVoting := c.preVotes != nil
		c.adoptTerm(m.Term)
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventVoteRefused, m.From, ReasonOutrankedBy)
		switch {
		case preVoting:
			// It was asking for pre-votes, its waits for the ranks above
			// over, and the candidate's term ended that round: ask again
			// in the new term now. Starting the election over instead
			// sent it back to waiting for the ranks above, and lower
			// members that stood more often than it got through those
			// waits ended each of its rounds (the checker: seven members,
			// quorum 6, two drained, answer timeouts from 4 to 90 ticks).
			c.tryProclaim()
		case c.role != Candidate && !c.alg.busy():
			// Already waiting (for a higher member's COORDINATOR, or its
			// OK): keep that wait's deadline. Starting over would put it
			// off again with every lower candidacy, and lower members
			// that stand in turn, each refused, would keep this member
			// waiting for ever on a higher one that never stands.
			c.alg.startElection("")
		}
		return nil
	}
	c.adoptTerm(m.Term)
	if c.hs.VotedFor != "" && c.hs.VotedFor != m.From {
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventVoteRefused, m.From, ReasonAlreadyVoted)
		return nil
	}
	if c.role == Candidate {
		c.role = Follower
		c.votes, c.refusals = nil, nil
	}
	c.alg.reset()
	c.hs.VotedFor = m.From
	c.hsChanged = true
	c.back(m.From, m.Term, "")
	c.pending = nil
	c.send(Message{Type: MsgVote, To: m.From, Term: m.Term, Seq: m.Seq, Granted: true})
	return nil
}

func (c *core) stepVote(m Message) error {
	if m.Term > c.hs.Term {
		c.adoptTerm(m.Term)
		if c.role != Leader {
			c.standAfter = c.now + int64(c.backoffTicks())
		}
		return nil
	}
	if m.Term < c.hs.Term {
		return fmt.Errorf("%w: vote of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	switch c.role {
	case Leader:
		if m.Granted {
			c.noteAck(m.From, m.Seq, m.Promise)
		}
	case Candidate:
		if m.Seq < c.proclaimSq || m.Seq > c.hbSeq || (m.Granted && m.Seq <= c.cutOff[m.From]) {
			return nil // another candidacy's, or answers a request sent before the route to its voter closed
		}
		if !m.Granted {
			c.refusals[m.From] = true
			if c.outranks(m.From, c.self.ID) && !c.witness[m.From] {
				// A higher-ranked member is alive and standing: wait for it.
				// (A witness refuses only a second vote in a term; it never
				// stands, so there is nothing to wait for.)
				c.role = Follower
				c.votes, c.refusals = nil, nil
				c.alg.startElection(m.From)
				return nil
			}
			if c.quorum.Vote(len(c.members), len(c.votes), len(c.refusals)) == quorum.Lost {
				c.electionFailed(ReasonVotesRefused)
			}
			return nil
		}
		c.noteVote(m.From, m.Seq, m.Promise)
		if c.quorum.Reached(len(c.votes)) {
			c.becomeLeader()
		}
	}
	return nil
}

func (c *core) stepResign(m Message) error {
	if m.Term < c.hs.Term {
		return fmt.Errorf("%w: resign of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	if m.Nominee != "" && !c.isMember(m.Nominee) {
		return fmt.Errorf("%w: nominee %q", ErrNotMember, m.Nominee)
	}
	if !c.releases(m.From, m.Term) {
		return nil // from a member this one does not back, in the term it backs: ignore
	}
	c.adoptTerm(m.Term)
	if c.role == Leader {
		return nil
	}
	c.released = true
	c.nominee, c.nominated = m.Nominee, c.now
	if c.witness[m.Nominee] {
		c.nominee = "" // a leader whose list lacks the witness: proceed as if it named no one
	}
	c.setLeader("")
	c.markDown(m.From)
	if m.Nominee == c.self.ID {
		if c.mayStand() {
			c.proclaim()
			return nil
		}
		// Drained, and nominated by a leader that did not know it: decline,
		// and let the election proceed as if the leader had named no one.
		c.nominee = ""
	}
	// The nominee's COORDINATOR may have overtaken this RESIGN (they come
	// from different members): grant it now.
	if c.votePending() {
		return nil
	}
	c.alg.reset()
	c.alg.startElection(c.nominee)
	return nil
}

// settleCandidacy ends the record of a candidacy that is over. One that
// ended without leading (refused by a higher-ranked member, out of time,
// overtaken by a higher term, drained, told to step down) says so to every
// member with a WITHDRAW: a member that voted for it keeps that vote as a
// promise not to back anyone else for D (the candidate might lead on it),
// and without the WITHDRAW it stays held for D by a candidacy that no longer
// exists. When the candidate gave way to a higher-ranked member, that
// member's pre-votes would then wait on those voters past its answer window,
// it would fail, the lower member would stand again and be refused again: a
// site with every member up and no leader. A candidate never stands again in
// a term it withdrew from (it voted for itself in it), so the promise it
// releases can no longer matter.
func (c *core) settleCandidacy() {
	if c.standing == 0 || (c.role == Candidate && c.hs.Term == c.standing) {
		return
	}
	if c.role != Leader || c.hs.Term != c.standing {
		c.send(Message{Type: MsgWithdraw, Term: c.standing})
	}
	c.standing = 0
}

// stepWithdraw frees this member from the vote it gave m.From in m.Term,
// whose candidacy ended without leading (see settleCandidacy), and grants
// what it kept back meanwhile. Only that vote is freed: a WITHDRAW says
// nothing of any other member's leadership or lease.
func (c *core) stepWithdraw(m Message) error {
	if c.role != Follower || c.released || m.From != c.backed || m.Term != c.backedTerm {
		return nil // not held by that candidacy
	}
	// Also when this member took the candidate's announcement for a
	// leader's heartbeat: a candidate that announced and was then overtaken
	// by a higher term before a quorum acknowledged it never led in that
	// term, and never will (it withdraws only from a term it did not lead).
	c.released = true
	if c.leader == m.From {
		c.setLeader("")
	}
	if c.votePending() {
		return nil
	}
	c.preVotePending()
	if !c.alg.busy() && c.now >= c.standAfter {
		c.alg.startElection("")
	}
	return nil
}

// --- pre-vote ---------------------------------------------------------------

// pendingMsg is a request kept for later, with the tick it arrived.
type pendingMsg struct {
	m  Message
	at int64
}

// startPreVote finds out whether a quorum would vote for this node in the
// next term. Nothing is persisted and no term changes: a member that cannot
// reach a quorum learns it without leaving a higher term behind.
//
// In the common case nothing is sent: every member that notices the
// leader's silence sends its pre-vote, unasked, to the member it expects to
// proclaim (see suspect), and they all notice within a tick or two of each
// other. The grants already received count; only if a quorum is not there
// after a quarter of AnswerTicks does the request go out to everyone (the
// expected member differs between views, or this member stands after the
// textbook ELECTION/OK exchange). That keeps a failover at three messages
// per member (suspicion, COORDINATOR, vote), as without pre-votes.
func (c *core) startPreVote() {
	if c.termExhausted() {
		return
	}
	c.preVoteSq++
	c.preVotes = map[string]bool{c.self.ID: true}
	for id, p := range c.earlyPre {
		if p.m.Term == c.hs.Term+1 && c.now-p.at <= int64(c.cfg.AnswerTicks) {
			c.preVotes[id] = true
		}
	}
	clear(c.earlyPre)
	if c.quorum.Reached(len(c.preVotes)) {
		c.proclaim()
		return
	}
	if ask := c.cfg.AnswerTicks / 4; ask > 0 {
		c.preVoteAsk = c.now + int64(ask)
	} else {
		// An answer timeout under four ticks leaves no time to wait for
		// the unasked pre-votes first: ask at once. (Asked a tick later,
		// with an answer timeout of one tick the window closed before the
		// request went out, and no pre-vote was ever asked for: the
		// checker found a site of seven with quorum 5 leaderless so.)
		c.preVoteAsk = c.now + int64(c.cfg.HeartbeatTicks)
		c.send(Message{Type: MsgPreVote, Term: c.hs.Term + 1, Seq: c.preVoteSq})
	}
	c.preVoteEnd = c.now + int64(c.cfg.AnswerTicks)
}

// suspect tells expected, unasked, that this member no longer hears a
// leader and would vote for it in the next term: its pre-vote. Not sent
// when the bus confirmed the leader gone (the expected member was told too
// and proclaims without pre-votes) or when the leader resigned lately (its
// nominee proclaims at once). A nomination older than the answer timeout
// silences no one: the nominee had its chance, and a drained member kept
// silent by it for good (its announcements are these pre-votes) was skipped
// by every round, so that a site whose quorum needs its vote stayed
// leaderless (the checker: a Ring of three with quorum 3).
func (c *core) suspect(expected string) {
	nominated := c.released && c.nominee != "" && c.now-c.nominated <= int64(c.cfg.AnswerTicks)
	if expected == c.self.ID || c.goneConfirmed() || nominated || c.leaderLive() || c.hs.Term >= MaxTerm {
		return
	}
	c.send(Message{Type: MsgPreVoteReply, To: expected, Term: c.hs.Term + 1, Granted: true})
}

func (c *core) endPreVote() { c.preVotes = nil }

// tellAlive sends a member that never stands (drained, or a witness) and
// hears no leader its unasked pre-vote to every other member, which tells
// them it is alive. Ring members pass over a member unheard for D when they
// wait for a round or route a token (ring.presumedDead), so a member that
// only votes must be heard from within every D of theirs: it tells them
// every H (a period of D by its clock against a window of D by theirs let a
// late announcement cost a round), on its own deadline rather than its
// election's, which a vote and the backoff after it kept from coming for up
// to three D while the others needed its vote (the checker: a Ring of three
// with quorum 3, leaderless with every member up). Every H, not every D/2
// of its own: members' D may differ, and H is below half of any member's D
// (L > H and L + H < D). With D/2 a drained member whose D was 80 ticks
// told one whose D was 30 only every 40; that member stood in step with it,
// each time 33 ticks after the last word, skipped it, and failed for ever
// (the checker: a Ring of two, quorum 2).
func (c *core) tellAlive() {
	c.aliveAt = c.now
	for _, m := range c.members {
		if m.ID != c.self.ID {
			c.suspect(m.ID)
		}
	}
}

// preVoteFailed ends a pre-vote without a quorum. The member asks again
// after D, not after the exponential backoff of failed elections: a
// pre-vote changes no term and disturbs no one, so it needs no damping,
// and a member cut off from the group for seconds then finds a quorum
// within D of the link healing, instead of after a backoff grown to 30 H
// while it was cut off (when every member had drawn one, the group had no
// leader until the first backoff ran out).
func (c *core) preVoteFailed() {
	c.endPreVote()
	c.event(EventElectionFailed, "", ReasonNoPreVotes)
	c.standAfter = c.now + int64(c.cfg.ElectionTicks)
}

// stepPreVote answers a pre-vote request. The answer is yes when this
// member would grant a COORDINATOR of that term now: the term is above its
// own and no live leader is heard, or the requester is that leader. While a
// live leader is heard the request is kept, unanswered, and granted if the
// leader goes silent within AnswerTicks (members notice a silence a tick or
// two apart). The request never changes this member's term or vote.
func (c *core) stepPreVote(m Message) error {
	if m.Term <= c.hs.Term {
		c.send(Message{Type: MsgPreVoteReply, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		return nil
	}
	if !c.mayBack(m.From, m.Term) {
		if c.role == Follower {
			c.pendingPre[m.From] = pendingMsg{m: m, at: c.now}
		}
		return nil
	}
	c.send(Message{Type: MsgPreVoteReply, To: m.From, Term: m.Term, Seq: m.Seq, Granted: true})
	if c.preVotes != nil && m.Term == c.hs.Term+1 && c.outranks(m.From, c.self.ID) {
		// Both ask for the same term (their views left each other out):
		// the lower one gives way, or both would proclaim it and split the
		// votes. It waits for the higher one's COORDINATOR, as any member
		// that expects another to stand.
		c.endPreVote()
		c.alg.startElection(m.From)
	}
	return nil
}

// preVotePending grants the pre-vote requests deferred while a leader was
// heard, now that it is not, if they are still fresh.
func (c *core) preVotePending() {
	for id, p := range c.pendingPre {
		delete(c.pendingPre, id)
		if c.now-p.at <= int64(c.cfg.AnswerTicks) && p.m.Term > c.hs.Term {
			c.send(Message{Type: MsgPreVoteReply, To: id, Term: p.m.Term, Seq: p.m.Seq, Granted: true})
		}
	}
}

func (c *core) stepPreVoteReply(m Message) error {
	if c.role != Follower {
		return nil
	}
	if m.Granted && m.Seq == 0 && c.preVotes == nil {
		// A pre-vote sent unasked (see suspect): kept until this member
		// notices the silence too, or hears a leader.
		if m.Term == c.hs.Term+1 {
			c.earlyPre[m.From] = pendingMsg{m: m, at: c.now}
		}
		return nil
	}
	if c.preVotes == nil || (m.Seq != 0 && m.Seq != c.preVoteSq) {
		return nil // not asking, or an answer to an earlier round
	}
	if m.Granted {
		if m.Term != c.hs.Term+1 {
			return nil
		}
		c.preVotes[m.From] = true
		if c.quorum.Reached(len(c.preVotes)) {
			c.proclaim()
		}
		return nil
	}
	// A refusal carries the member's term, at or above the one asked for:
	// the group has moved on to a term this member missed. Follow it, and
	// stand again (if still leaderless) after a backoff.
	if m.Term > c.hs.Term {
		c.adoptTerm(m.Term)
		c.standAfter = c.now + int64(c.backoffTicks())
	}
	return nil
}
