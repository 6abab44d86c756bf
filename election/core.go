package election

import (
	"fmt"
	"sort"
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
}

// core holds the state both algorithms share. It is the Node; the algorithm
// is plugged in as alg.
type core struct {
	cfg     Config
	self    Member
	members []Member // by rank, highest first
	rankOf  map[string]int
	quorum  int
	alg     algorithm

	hs        HardState
	hsChanged bool
	role      Role
	leader    string

	now int64 // logical clock, in ticks

	// Follower side.
	lastLeaderContact int64 // tick a leader (or the candidate we voted for) was last heard
	leaderResigned    bool
	view              map[string]bool  // members believed alive, from the leader's heartbeats
	lastSeen          map[string]int64 // member -> tick last heard from, directly or via view
	standAfter        int64            // backoff: do not proclaim before this tick
	pending           *pendingMsg      // a COORDINATOR deferred because a live leader was still heard
	nominee           string           // the member a resigning leader handed over to
	leaderConn        string           // the bus connection the leader announced
	// goneConfirmed: the bus reported the leader's connection closed, so
	// this member is connected and the leader is really gone; its next
	// proclaim needs no pre-vote.
	goneConfirmed bool
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
	votes      map[string]bool
	refusals   map[string]bool
	voteEnd    int64
	proclaimAt int64
	proclaimSq uint64

	// Leader side.
	hbSeq        uint64
	hbElapsed    int
	sentAt       map[uint64]int64 // heartbeat/coordinator seq -> tick sent
	acked        map[string]uint64
	ackedAt      map[string]int64
	healthySince map[string]int64
	leaseSeq     uint64
	leaderSince  int64

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
		quorum:   cfg.Quorum,
		hs:       cfg.HardState,
		view:     make(map[string]bool, len(cfg.Members)),
		lastSeen: make(map[string]int64, len(cfg.Members)),
		sentAt:   make(map[uint64]int64),
	}
	for i, m := range c.members {
		c.rankOf[m.ID] = i
		c.view[m.ID] = true // until a leader says otherwise, everyone may be alive
		c.lastSeen[m.ID] = -1
		if m.ID == cfg.ID {
			c.self = m
		}
	}
	c.lastSeen[c.self.ID] = 0
	c.pendingPre = make(map[string]pendingMsg)
	c.earlyPre = make(map[string]pendingMsg)
	// A member that just started may have acknowledged a leader right
	// before it went down: it grants no vote and does not stand for D ticks,
	// exactly as if it had just heard that leader. This keeps leases safe
	// across restarts.
	c.lastLeaderContact = 0
	return c, nil
}

// outranks reports whether member a ranks above member b.
func (c *core) outranks(a, b string) bool { return c.rankOf[a] < c.rankOf[b] }

func (c *core) isMember(id string) bool { _, ok := c.rankOf[id]; return ok }

func (c *core) send(m Message) {
	m.From = c.self.ID
	c.msgs = append(c.msgs, m)
}

func (c *core) event(k EventKind, peer, reason string) {
	c.events = append(c.events, Event{Kind: k, Term: c.hs.Term, Peer: peer, Reason: reason})
}

func (c *core) setLeader(id string) {
	if c.leader != id {
		c.leader = id
		c.event(EventNewLeader, id, "")
	}
}

// leaderLive reports whether the node still hears a leader (or a candidate
// it voted for) recently enough that it must not vote for anyone else.
func (c *core) leaderLive() bool {
	if c.role == Leader {
		return true
	}
	if c.leaderResigned {
		return false
	}
	return c.now-c.lastLeaderContact < int64(c.cfg.ElectionTicks)
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
		c.stepDown(fmt.Sprintf("saw higher term %d", t))
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
		Events:           c.events,
	}
	c.msgs, c.events, c.hsChanged = nil, nil, false
	return rd
}

func (c *core) Status() Status {
	st := Status{ID: c.self.ID, Role: c.role, Leader: c.leader, Term: c.hs.Term, Quorum: c.quorum}
	for _, m := range c.members {
		ms := MemberStatus{Member: m, Alive: c.alive(m.ID), TicksSinceSeen: -1}
		if c.lastSeen[m.ID] >= 0 {
			ms.TicksSinceSeen = int(c.now - c.lastSeen[m.ID])
		}
		if ms.Alive {
			st.Live++
		}
		st.Members = append(st.Members, ms)
	}
	return st
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

func (c *core) Tick() {
	c.now++
	switch c.role {
	case Leader:
		c.tickLeader()
	case Candidate:
		if c.now >= c.voteEnd {
			c.electionFailed("no quorum of votes in time")
		} else if !c.claimed() && (c.now-c.proclaimAt)%int64(c.cfg.HeartbeatTicks) == 0 {
			c.resendCoordinator()
		}
	default:
		c.tickFollower()
	}
}

// NextTick implements Node. It mirrors Tick: every condition Tick tests
// becomes true no earlier than the tick returned here. The sim checks it
// after every step (sim_test.go: a member asleep until its NextTick must
// not act).
func (c *core) NextTick() int {
	next := int64(1<<62 - 1)
	at := func(t int64) { next = min(next, max(t, c.now+1)) }
	switch c.role {
	case Leader:
		at(c.now + int64(c.cfg.HeartbeatTicks-c.hbElapsed))
		at(c.sentAt[c.leaseSeq] + int64(c.cfg.LeaseTicks))
		if c.cfg.Preemption != PreemptNever {
			hold := int64(c.cfg.HoldDownTicks)
			if c.cfg.Preemption == PreemptImmediate {
				hold = 0
			}
			for _, m := range c.members {
				if m.ID == c.self.ID {
					break
				}
				// A member that is not alive now becomes alive only by
				// acknowledging: a Step, after which the caller asks again.
				if since, ok := c.healthySince[m.ID]; ok && c.alive(m.ID) {
					at(since + hold)
				}
			}
		}
	case Candidate:
		at(c.voteEnd)
		if !c.claimed() {
			at(c.now + int64(c.cfg.HeartbeatTicks) - (c.now-c.proclaimAt)%int64(c.cfg.HeartbeatTicks))
		}
	default:
		if c.leaderLive() {
			at(c.lastLeaderContact + int64(c.cfg.ElectionTicks))
			if c.alg.busy() {
				at(c.alg.deadline())
			}
			break
		}
		switch {
		case c.leader != "" || c.pending != nil || len(c.pendingPre) > 0:
			at(c.now + 1)
		case c.preVotes != nil:
			if c.preVoteAsk > c.now {
				at(c.preVoteAsk)
			} else {
				h := int64(c.cfg.HeartbeatTicks)
				at(c.now + h - (c.now-c.preVoteAsk)%h)
			}
			at(c.preVoteEnd)
		case c.alg.busy():
			at(c.alg.deadline())
		default:
			at(c.standAfter)
		}
	}
	return int(min(next-c.now, 1<<30))
}

func (c *core) tickFollower() {
	if c.leaderLive() {
		if c.alg.busy() && c.now >= c.alg.deadline() {
			c.alg.onDeadline()
		}
		return
	}
	if c.leader != "" {
		c.view[c.leader] = false // the member we now suspect
		c.setLeader("")
	}
	if c.votePending() {
		return
	}
	c.preVotePending()
	if c.preVotes != nil {
		switch {
		case c.now >= c.preVoteEnd:
			c.preVoteFailed("no quorum of pre-votes in time")
		case c.now >= c.preVoteAsk && (c.now-c.preVoteAsk)%int64(c.cfg.HeartbeatTicks) == 0:
			// Asked, and asked again every H while the answer window lasts
			// (only when answer_timeout is longer than H: a lossy link),
			// as a candidate repeats its COORDINATOR.
			c.send(Message{Type: MsgPreVote, Term: c.hs.Term + 1, Seq: c.preVoteSq})
		}
		return
	}
	if c.alg.busy() {
		if c.now >= c.alg.deadline() {
			c.alg.onDeadline()
		}
		return
	}
	if c.now < c.standAfter {
		return
	}
	c.alg.startElection("")
}

// leaderReleaser is implemented by an algorithm that holds election
// messages back while a leader is heard (Ring keeps tokens: see ring.go).
// votePending calls leaderReleased whenever the node stops hearing its
// leader; it reports whether the node joined an election on what it held.
type leaderReleaser interface{ leaderReleased() bool }

// announcer is implemented by an algorithm whose winner announces itself
// with a heartbeat instead of proclaiming with a COORDINATOR (Ring: see
// ring.go, claim). While announced reports true, the candidate becomes leader
// on acknowledgements of that heartbeat; a proclaiming candidate counts only
// votes, never acknowledgements.
type announcer interface{ announced() bool }

// votePending grants a vote deferred while a leader was still heard, now
// that it is not, if the request is still fresh. It reports whether a vote
// was granted.
func (c *core) votePending() bool {
	if rel, ok := c.alg.(leaderReleaser); ok && rel.leaderReleased() {
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

func (c *core) tickLeader() {
	c.hbElapsed++
	if c.hbElapsed >= c.cfg.HeartbeatTicks {
		c.heartbeat()
	}
	if c.now-c.sentAt[c.leaseSeq] >= int64(c.cfg.LeaseTicks) {
		c.stepDown("lease expired: no quorum of acknowledgements")
		c.standAfter = c.now + int64(c.backoffTicks())
		return
	}
	c.maybePreempt()
}

// --- leader ----------------------------------------------------------------

func (c *core) heartbeat() {
	c.hbElapsed = 0
	c.hbSeq++
	c.sentAt[c.hbSeq] = c.now
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
	c.goneConfirmed = false
	clear(c.pendingPre)
	clear(c.earlyPre)
	c.role = Leader
	c.leaderSince = c.now
	c.leaderResigned = false
	c.pending = nil
	c.alg.reset()
	c.acked = make(map[string]uint64, len(c.members))
	c.ackedAt = make(map[string]int64, len(c.members))
	c.healthySince = make(map[string]int64, len(c.members))
	for id := range c.votes {
		if id != c.self.ID {
			c.acked[id] = c.proclaimSq
			c.ackedAt[id] = c.now
			c.healthySince[id] = c.now
		}
	}
	c.leaseSeq = c.proclaimSq
	c.votes, c.refusals = nil, nil
	c.event(EventElectionWon, "", "")
	c.setLeader(c.self.ID)
	if c.cfg.Backoff != nil {
		c.cfg.Backoff.Reset()
	}
	c.heartbeat()
}

// stepDown leaves leadership (or candidacy) and becomes a follower.
func (c *core) stepDown(reason string) {
	if c.role == Leader {
		c.event(EventSteppedDown, "", reason)
	}
	c.role = Follower
	c.leaseSeq = 0
	c.acked, c.ackedAt, c.healthySince = nil, nil, nil
	c.sentAt = make(map[uint64]int64)
	c.setLeader("")
	c.lastLeaderContact = neverTick
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
	c.event(EventElectionFailed, "", "term at MaxTerm: no higher term to stand in")
	c.standAfter = c.now + int64(c.cfg.ElectionTicks)
	return true
}

func (c *core) stepAck(m Message) error {
	if m.Term > c.hs.Term {
		c.adoptTerm(m.Term)
		return nil
	}
	if m.Term < c.hs.Term {
		return fmt.Errorf("%w: ack of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	if a, ok := c.alg.(announcer); ok && a.announced() && c.role == Candidate && m.Seq == c.proclaimSq {
		// A Ring winner holds its votes already and announced itself with
		// a heartbeat: a quorum of acknowledgements starts its lease (see
		// ring.go, claim).
		c.votes[m.From] = true
		if len(c.votes) >= c.quorum {
			c.becomeLeader()
		}
		return nil
	}
	if c.role != Leader {
		return nil
	}
	c.noteAck(m.From, m.Seq)
	return nil
}

func (c *core) noteAck(from string, seq uint64) {
	if _, ok := c.sentAt[seq]; !ok || seq > c.hbSeq {
		return // not a heartbeat of this leadership
	}
	if prev, ok := c.ackedAt[from]; !ok || c.now-prev >= int64(c.cfg.ElectionTicks) {
		c.healthySince[from] = c.now
	}
	c.ackedAt[from] = c.now
	if seq > c.acked[from] {
		c.acked[from] = seq
	}
	// The lease runs from the newest heartbeat that a quorum, the leader
	// included, has acknowledged.
	seqs := []uint64{c.hbSeq}
	for _, s := range c.acked {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] > seqs[j] })
	if len(seqs) >= c.quorum && seqs[c.quorum-1] > c.leaseSeq {
		c.leaseSeq = seqs[c.quorum-1]
		for s := range c.sentAt {
			if s < c.leaseSeq {
				delete(c.sentAt, s)
			}
		}
	}
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
		if ok && c.alive(m.ID) && c.now-since >= hold {
			_ = c.Resign(m.ID)
			return
		}
	}
}

func (c *core) Resign(nominee string) error {
	if c.role != Leader {
		return ErrNotLeader
	}
	if nominee != "" && (!c.isMember(nominee) || nominee == c.self.ID) {
		return fmt.Errorf("election: cannot hand over to %q", nominee)
	}
	if nominee == "" {
		// The highest member that has actually acknowledged us lately: a
		// member only presumed alive may be dead, and the hand-over would
		// then wait for its answer timeout.
		for _, m := range c.members {
			at, ok := c.ackedAt[m.ID]
			if m.ID != c.self.ID && ok && c.now-at < int64(c.cfg.ElectionTicks) {
				nominee = m.ID
				break
			}
		}
	}
	c.stepDown("resigned")
	c.leaderResigned = true
	c.standAfter = c.now + int64(c.backoffTicks())
	c.send(Message{Type: MsgResign, Term: c.hs.Term, Nominee: nominee})
	if nominee != "" {
		c.alg.reset()
		c.alg.startElection(nominee)
	}
	return nil
}

// LeaderGone implements Node. The report must name the connection the leader
// announced: a report about an earlier connection (the leader reconnected
// since) or about a member that does not lead changes nothing.
func (c *core) LeaderGone(id, conn string) bool {
	if c.role == Leader || id == c.self.ID || id != c.leader || conn == "" || conn != c.leaderConn {
		return false
	}
	c.view[id] = false
	c.setLeader("")
	c.leaderConn = ""
	c.lastLeaderContact = neverTick
	c.goneConfirmed = true
	if c.votePending() {
		return true
	}
	c.preVotePending()
	if !c.alg.busy() && c.now >= c.standAfter {
		c.alg.startElection("")
	}
	return true
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
	c.lastSeen[m.From] = c.now
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
	case MsgElection, MsgOK, MsgRingToken, MsgRingAck:
		return c.alg.step(m)
	}
	return fmt.Errorf("%w: type %v", ErrBadMessage, m.Type)
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
		// Tell the stale leader the current term so it steps down now.
		c.send(Message{Type: MsgAck, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventStaleTerm, m.From, "heartbeat")
		return fmt.Errorf("%w: heartbeat of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	if m.Term == c.hs.Term && c.role == Leader {
		// Only possible without a majority quorum (island mode): the lower
		// rank yields.
		if c.outranks(c.self.ID, m.From) {
			return nil
		}
		c.stepDown("another leader of the same term outranks us")
	}
	c.adoptTerm(m.Term)
	if c.role == Candidate {
		c.role = Follower
		c.votes, c.refusals = nil, nil
	}
	c.alg.reset()
	c.pending = nil
	c.endPreVote()
	c.goneConfirmed = false
	clear(c.pendingPre)
	clear(c.earlyPre)
	c.lastLeaderContact = c.now
	c.leaderResigned = false
	c.setLeader(m.From)
	c.leaderConn = m.Conn
	for id := range c.view {
		c.view[id] = false
	}
	for _, id := range m.Alive {
		if c.isMember(id) {
			c.view[id] = true
			c.lastSeen[id] = c.now
		}
	}
	c.view[m.From] = true
	// A leader is heard: the group is healthy again, so the damping of this
	// member's failed elections ends, the backoff it drew included. Kept,
	// it would hold the member back (up to 30 H) when this leader fails,
	// and everyone would wait for it.
	if c.cfg.Backoff != nil {
		c.cfg.Backoff.Reset()
	}
	c.standAfter = 0
	c.send(Message{Type: MsgAck, To: m.From, Term: m.Term, Seq: m.Seq})
	return nil
}

// tryProclaim proclaims unless the node is still backing off. Unless the
// bus confirmed that the leader is gone, it first asks for pre-votes: a
// member cut off from the group (one-way cut, black hole, a partition's
// minority) then never raises its term, and so cannot depose a healthy
// leader with that term when the link heals.
func (c *core) tryProclaim() {
	if c.now < c.standAfter || c.preVotes != nil {
		return
	}
	if c.goneConfirmed || c.quorum <= 1 {
		c.proclaim()
		return
	}
	c.startPreVote()
}

// highestInView returns the highest-ranked member believed alive.
func (c *core) highestInView() string {
	for _, m := range c.members {
		if m.ID == c.self.ID || c.view[m.ID] {
			return m.ID
		}
	}
	return c.self.ID
}

// proclaim makes this node a candidate for a new term: it votes for itself
// (persisted before the request goes out) and asks every member for a vote.
func (c *core) proclaim() {
	c.alg.reset()
	c.pending = nil
	c.endPreVote()
	if c.termExhausted() {
		return
	}
	c.goneConfirmed = false
	c.hs = HardState{Term: c.hs.Term + 1, VotedFor: c.self.ID}
	c.hsChanged = true
	c.role = Candidate
	c.setLeader("")
	c.votes = map[string]bool{c.self.ID: true}
	c.refusals = map[string]bool{}
	c.voteEnd = c.now + int64(c.cfg.AnswerTicks)
	c.proclaimAt = c.now
	c.hbSeq++
	c.proclaimSq = c.hbSeq
	c.sentAt = map[uint64]int64{c.hbSeq: c.now}
	c.event(EventElectionStarted, "", "")
	c.send(Message{Type: MsgCoordinator, Term: c.hs.Term, Seq: c.hbSeq})
	if len(c.votes) >= c.quorum {
		c.becomeLeader()
	}
}

// claimed reports whether this candidate announced itself with a heartbeat
// after a Ring round (it then counts acknowledgements, not votes, and has
// no COORDINATOR to repeat).
func (c *core) claimed() bool {
	a, ok := c.alg.(announcer)
	return ok && a.announced()
}

// resendCoordinator repeats the vote request every H while the votes are
// not in (only when the answer timeout is longer than H: a lossy link). It
// is the same request, same term and seq: a member that granted it grants
// it again, and the lease still runs from the first send (the agent dates a
// seq by its first send only). On a link that loses 30% of the messages each
// way, one request and its vote get through about half the time; eight tries
// in a 4 s answer timeout almost always do.
func (c *core) resendCoordinator() {
	c.send(Message{Type: MsgCoordinator, Term: c.hs.Term, Seq: c.proclaimSq})
}

func (c *core) electionFailed(reason string) {
	c.event(EventElectionFailed, "", reason)
	c.role = Follower
	c.votes, c.refusals = nil, nil
	c.standAfter = c.now + int64(c.backoffTicks())
}

func (c *core) stepCoordinator(m Message) error {
	if m.Term < c.hs.Term {
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventStaleTerm, m.From, "coordinator")
		return fmt.Errorf("%w: coordinator of term %d in term %d", ErrStaleTerm, m.Term, c.hs.Term)
	}
	c.view[m.From] = true
	if m.Term == c.hs.Term && c.hs.VotedFor == m.From && c.role == Follower {
		// A repeated request of the candidate this member voted for: the
		// same vote again (its first answer may have been lost).
		c.lastLeaderContact = c.now
		c.send(Message{Type: MsgVote, To: m.From, Term: m.Term, Seq: m.Seq, Granted: true})
		return nil
	}
	if c.leaderLive() && m.From != c.leader {
		// Stickiness: a live leader is still heard. Keep the request: if the
		// leader goes silent soon, the vote is granted then, without a
		// second round.
		if c.role == Follower && (c.pending == nil || c.outranks(m.From, c.pending.m.From) || m.Term > c.pending.m.Term) {
			c.pending = &pendingMsg{m: m, at: c.now}
		}
		if c.role == Leader {
			c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		}
		c.event(EventVoteRefused, m.From, "live leader")
		return nil
	}
	if c.outranks(c.self.ID, m.From) && c.now >= c.standAfter && !(c.leaderResigned && m.From == c.nominee) {
		// Bully: a lower-ranked member proclaimed while we are alive. Refuse
		// and stand ourselves.
		c.adoptTerm(m.Term)
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventVoteRefused, m.From, "outranked")
		if c.role != Candidate {
			c.alg.startElection("")
		}
		return nil
	}
	c.adoptTerm(m.Term)
	if c.hs.VotedFor != "" && c.hs.VotedFor != m.From {
		c.send(Message{Type: MsgVote, To: m.From, Term: c.hs.Term, Seq: m.Seq})
		c.event(EventVoteRefused, m.From, "already voted in term")
		return nil
	}
	if c.role == Candidate {
		c.role = Follower
		c.votes, c.refusals = nil, nil
	}
	c.alg.reset()
	c.endPreVote()
	c.hs.VotedFor = m.From
	c.hsChanged = true
	c.lastLeaderContact = c.now
	c.leaderResigned = false
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
			c.noteAck(m.From, m.Seq)
		}
	case Candidate:
		if m.Seq != c.proclaimSq {
			return nil
		}
		if !m.Granted {
			c.refusals[m.From] = true
			if c.outranks(m.From, c.self.ID) {
				// A higher-ranked member is alive and standing: wait for it.
				c.role = Follower
				c.votes, c.refusals = nil, nil
				c.alg.startElection(m.From)
				return nil
			}
			if len(c.members)-len(c.refusals) < c.quorum {
				c.electionFailed("votes refused by too many members")
			}
			return nil
		}
		c.votes[m.From] = true
		if len(c.votes) >= c.quorum {
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
	if m.From != c.leader && m.Term == c.hs.Term && c.leader != "" {
		return nil // not our leader: ignore
	}
	c.adoptTerm(m.Term)
	c.leaderResigned = true
	c.nominee = m.Nominee
	c.setLeader("")
	c.view[m.From] = false
	if c.role == Leader {
		return nil
	}
	if m.Nominee == c.self.ID {
		c.proclaim()
		return nil
	}
	// The nominee's COORDINATOR may have overtaken this RESIGN (they come
	// from different members): grant it now.
	if c.votePending() {
		return nil
	}
	c.alg.reset()
	c.alg.startElection(m.Nominee)
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
	if len(c.preVotes) >= c.quorum {
		c.proclaim()
		return
	}
	c.preVoteAsk = c.now + int64(max(1, c.cfg.AnswerTicks/4))
	c.preVoteEnd = c.now + int64(c.cfg.AnswerTicks)
}

// suspect tells expected, unasked, that this member no longer hears a
// leader and would vote for it in the next term: its pre-vote. Not sent
// when the bus confirmed the leader gone (the expected member was told too
// and proclaims without pre-votes) or when the leader resigned (its nominee
// proclaims at once).
func (c *core) suspect(expected string) {
	if expected == c.self.ID || c.goneConfirmed || c.leaderResigned || c.leaderLive() || c.hs.Term >= MaxTerm {
		return
	}
	c.send(Message{Type: MsgPreVoteReply, To: expected, Term: c.hs.Term + 1, Granted: true})
}

func (c *core) endPreVote() { c.preVotes = nil }

// preVoteFailed ends a pre-vote without a quorum. The member asks again
// after D, not after the exponential backoff of failed elections: a
// pre-vote changes no term and disturbs no one, so it needs no damping,
// and a member cut off from the group for seconds then finds a quorum
// within D of the link healing, instead of after a backoff grown to 30 H
// while it was cut off (when every member had drawn one, the group had no
// leader until the first backoff ran out).
func (c *core) preVoteFailed(reason string) {
	c.endPreVote()
	c.event(EventElectionFailed, "", "pre-vote: "+reason)
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
	if c.leaderLive() && m.From != c.leader {
		if c.role == Follower {
			c.pendingPre[m.From] = pendingMsg{m: m, at: c.now}
		}
		return nil
	}
	c.send(Message{Type: MsgPreVoteReply, To: m.From, Term: m.Term, Seq: m.Seq, Granted: true})
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
		if len(c.preVotes) >= c.quorum {
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
