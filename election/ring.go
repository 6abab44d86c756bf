package election

import "fmt"

// NewRing returns a Node that elects with the Ring algorithm: a token goes
// round the members and collects their votes for the highest live member,
// which becomes leader once a quorum has acknowledged its announcement. The
// design (ring order, one round, why it is safe, cost) is in the package
// documentation.
func NewRing(cfg Config) (Node, error) {
	c, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	r := &ring{c: c, pos: make(map[string]int, len(c.members)), seen: map[ringKey]int64{}, deadAt: map[string]int64{}}
	n := len(c.members)
	r.order = make([]string, n)
	for i, m := range c.members { // c.members is by rank, highest first
		r.order[n-1-i] = m.ID
		r.pos[m.ID] = n - 1 - i
	}
	c.alg = r
	return c, nil
}

type ringPhase uint8

const (
	ringIdle      ringPhase = iota
	ringAwait               // waiting for the expected member's round (or its heartbeat)
	ringCandidate           // the candidate of a round, waiting for it to come back decided
	ringVoted               // voted for another member's candidacy, waiting for its heartbeat
	ringWon                 // a decided round came back while a leader was heard or we backed off
)

// ringRound identifies one round: its initiator and the initiator's counter.
type ringRound struct {
	initiator string
	seq       uint64
}

// ringToken is a token held by this member.
type ringToken struct {
	ringRound
	term   uint64
	cand   string
	voters []string // members that voted for cand in term, in order
}

// ringKey is what makes two deliveries of a token the same visit: a member
// meets a round again legitimately only under another candidate (it climbed
// past this member) or in another term (a voter raised it).
type ringKey struct {
	ringRound
	term uint64
	cand string
}

func (t ringToken) key() ringKey { return ringKey{t.ringRound, t.term, t.cand} }

// ringHop is a token sent to a successor and not yet acknowledged.
type ringHop struct {
	to     string
	tok    ringToken
	failed map[string]bool // successors of this holder that did not acknowledge this token
	until  int64
}

type ring struct {
	c     *core
	order []string       // ring order: by rank, lowest first
	pos   map[string]int // member -> index in order

	phase  ringPhase
	until  int64
	expect string    // ringAwait: the member expected to win
	champ  string    // the candidate of the round this member is part of (itself as candidate)
	round  ringRound // ringCandidate: our round
	won    ringToken // ringWon: the decided token
	wonEnd int64     // ringWon: give the win up after this tick

	// pending is a token received while a leader was heard, kept until the
	// leader is no longer heard (leaderReleased) if that comes soon.
	pending   *ringToken
	pendingAt int64

	seq    uint64            // the last round this member initiated
	seen   map[ringKey]int64 // visits this member handled -> tick, to drop duplicates
	deadAt map[string]int64  // member -> tick a hop to it or a wait for it timed out
	hops   []*ringHop
}

func (r *ring) hopTicks() int64 { return int64(r.c.cfg.RingHopTicks) }

// roundTicks bounds a whole round: every member skipped once, then the
// candidate's announcement.
func (r *ring) roundTicks() int64 {
	return int64(r.c.cfg.AnswerTicks) + int64(len(r.order))*r.hopTicks()
}

func (r *ring) busy() bool { return r.phase != ringIdle || len(r.hops) > 0 }

// announcesAlive implements algorithm: see core.tellAlive.
func (r *ring) announcesAlive() bool { return true }

func (r *ring) deadline() int64 {
	d := int64(1<<63 - 1)
	if r.phase != ringIdle {
		d = r.until
	}
	for _, h := range r.hops {
		d = min(d, h.until)
	}
	return d
}

func (r *ring) reset() {
	r.phase, r.expect, r.champ, r.hops, r.pending = ringIdle, "", "", nil, nil
}

func (r *ring) setPhase(p ringPhase, until int64) { r.phase, r.until = p, until }

func (r *ring) startElection(expected string) {
	c := r.c
	if expected == "" {
		expected = r.highestAlive()
	}
	if expected == c.self.ID {
		if c.goneConfirmed() && c.now >= c.standAfter {
			// The bus reported the leader's connection closed, as it did to
			// every connected member, and this member is the one they all
			// expect: the token would only carry to it the votes a
			// COORDINATOR collects in parallel. It proclaims as a nominee
			// does (one fsync on each side instead of one per voter in
			// turn), asking the members the token would have visited; they
			// vote for it from their wait for its round, and the others
			// learn of it from its first heartbeat, as after a round.
			c.proclaimTo(r.voters())
			return
		}
		r.initiate()
		return
	}
	r.champ, r.expect = "", expected
	if !c.mayStand() {
		// Drained: the others may expect this member to start the round
		// (they do not know it is drained). Tell every member that it is
		// alive (its unasked pre-vote), so that the round one of them
		// starts once its wait for this member ends passes through it for
		// its vote rather than skipping it. It does so now and every H
		// while no leader is heard (core.tellAlive), also when it expects
		// no one: what it knows of
		// the others being drained may be stale (learned as leader, before
		// one of them was undrained), and the only member that may stand
		// would otherwise never hear from it. Every member, not only those
		// in view: the one that may stand sends this member nothing while
		// it skips it, so this member's view of it lapses and returns in
		// turn, and told only every other D, it kept finding this member
		// unheard for longer than its wait allows (the checker: a Ring of
		// four, two members drained, leaderless for 400 ticks).
		c.tellAlive()
	}
	if expected == "" {
		r.phase = ringIdle // drained, and no one else to wait for
		return
	}
	r.setPhase(ringAwait, c.now+int64(c.cfg.AnswerTicks))
}

// initiate starts a round with this member as initiator and candidate.
func (r *ring) initiate() {
	c := r.c
	if !c.mayStand() {
		r.phase, r.champ, r.expect = ringIdle, "", ""
		return
	}
	if c.termExhausted() {
		r.phase, r.champ, r.expect = ringIdle, "", ""
		return
	}
	r.seq++
	tok := ringToken{ringRound: ringRound{c.self.ID, r.seq}, term: c.hs.Term + 1, cand: c.self.ID}
	r.candidate(tok)
	r.route(tok, map[string]bool{})
}

// candidate makes this member the candidate of tok's round.
func (r *ring) candidate(tok ringToken) {
	r.remember(tok.key())
	r.champ, r.expect, r.round = r.c.self.ID, "", tok.ringRound
	r.setPhase(ringCandidate, r.c.now+r.roundTicks())
}

// remember records that this member handled visit k, and forgets visits too
// old to still be in flight.
func (r *ring) remember(k ringKey) {
	for old, at := range r.seen {
		if r.c.now-at >= r.roundTicks() {
			delete(r.seen, old)
		}
	}
	r.seen[k] = r.c.now
}

// presumedDead reports whether the token may skip id without waiting for
// an acknowledgement, and whether a member waiting for a round may pass id
// over. The evidence is the view (a leader's heartbeats leave out the
// members that stopped answering it; the suspected or reported-gone leader
// and a resigned one are out of it too), or a hop or wait that timed out on
// id lately and since which id has not been heard. Those timeouts are kept
// apart from the view and forgotten after 2*ElectionTicks: after a long
// partition every member is tried again, or members that all believe each
// other dead would never exchange a token.
func (r *ring) presumedDead(id string) bool {
	c := r.c
	if at, ok := r.deadAt[id]; ok && at >= c.lastSeen[id] && c.now-at < 2*int64(c.cfg.ElectionTicks) {
		return true
	}
	return !c.inView(id)
}

func (r *ring) markDead(id string) { r.deadAt[id] = r.c.now }

// highestAlive returns the highest-ranked member not presumed dead.
func (r *ring) highestAlive() string {
	c := r.c
	for _, m := range c.members {
		if m.ID == c.self.ID && c.mayStand() || m.ID != c.self.ID && !r.presumedDead(m.ID) && c.mayLead(m.ID) {
			return m.ID
		}
	}
	if !c.mayStand() {
		return ""
	}
	return c.self.ID
}

// next returns where this member, holding tok, sends it: the first
// successor that is neither failed nor presumed dead, or the candidate if
// the search reaches it first (it does for every holder but the candidate).
// circle is true when the search reaches a voter, or this member, first:
// the token has been all the way round.
//
// Where the quorum is the whole group, a member presumed dead is not
// skipped: a round cannot win without its vote, so the token tries it for
// a hop (failed then skips it for the rest of the round). Presumed dead is
// a guess from silence (a wait for its round that ended, a view that
// lapsed), and the checker found sites of five and seven members with
// quorums of all of them where a member's own rounds died at a higher
// candidate's voters, the members below marked it dead each time their
// wait for it ended, and every round passed it over while it was up: no
// leader for ever. Trying it can raise the terms of the members that vote
// in a round that fails, which elsewhere lets a cut-off minority depose a
// healthy leader when the cut heals; with a quorum of every member there
// is no leader while any member goes unheard (its lease needs every
// member's acknowledgements), so there is none to depose. Where the
// quorum is smaller, skipping stays: a round among members cut off from a
// leading majority must fail without raising their terms
// (TestHealWithHeldMessagesGivesOneLeaderSoon).
func (r *ring) next(tok ringToken, failed map[string]bool) (next string, circle bool) {
	c := r.c
	n := len(r.order)
	everyVote := !c.quorum.Reached(n - 1)
	for k := 1; k < n; k++ {
		id := r.order[(r.pos[c.self.ID]+k)%n]
		if id == tok.cand {
			return id, false
		}
		if contains(tok.voters, id) {
			return "", true
		}
		if failed[id] || !everyVote && r.presumedDead(id) {
			continue
		}
		return id, false
	}
	return "", true
}

// voters returns the members a round this member starts now would ask
// for their votes, in ring order: the first successors not presumed dead
// (every one where the quorum is the whole group), as many as a quorum
// needs beside this member's own vote. nil if there are not that many: the
// request then goes to every member.
func (r *ring) voters() []string {
	c := r.c
	n := len(r.order)
	everyVote := !c.quorum.Reached(n - 1)
	var out []string
	for k := 1; k < n && !c.quorum.Reached(len(out)+1); k++ {
		id := r.order[(r.pos[c.self.ID]+k)%n]
		if everyVote || !r.presumedDead(id) {
			out = append(out, id)
		}
	}
	if !c.quorum.Reached(len(out) + 1) {
		return nil
	}
	return out
}

// route decides what this member, holding tok, does with it.
func (r *ring) route(tok ringToken, failed map[string]bool) {
	c := r.c
	quorate := c.quorum.Reached(len(tok.voters) + 1)
	if tok.cand != c.self.ID {
		// A voter holds it: the token climbs from here to the candidate,
		// collecting votes, and goes to the candidate once they suffice.
		if quorate {
			r.sendHop(tok.cand, tok, failed)
			return
		}
		if next, circle := r.next(tok, failed); !circle {
			r.sendHop(next, tok, failed)
		}
		return
	}
	// The candidate holds it: it has just started or taken the round over,
	// or the token came back without a quorum and goes round once more. The
	// result is known once the token has wrapped: it carries votes (cast
	// below the candidate), or every successor above the candidate is
	// presumed dead.
	next, circle := r.next(tok, failed)
	wrapped := len(tok.voters) > 0 || circle || c.outranks(c.self.ID, next)
	if quorate && wrapped {
		r.win(tok)
		return
	}
	if circle {
		// Everyone reachable was asked: no quorum. Back off, then retry.
		if r.phase == ringCandidate && r.round == tok.ringRound {
			r.roundFailed()
		}
		return
	}
	r.sendHop(next, tok, failed)
}

func (r *ring) sendHop(to string, tok ringToken, failed map[string]bool) {
	c := r.c
	tok.voters = append([]string(nil), tok.voters...)
	c.send(Message{Type: MsgRingToken, To: to, Term: tok.term, Seq: tok.seq, Initiator: tok.initiator,
		Candidate: tok.cand, Participants: tok.voters})
	h := &ringHop{to: to, tok: tok, failed: failed, until: c.now + r.hopTicks()}
	for i, o := range r.hops {
		if o.tok.ringRound == tok.ringRound {
			r.hops[i] = h
			return
		}
	}
	r.hops = append(r.hops, h)
}

// win is called on the candidate of a decided round.
func (r *ring) win(tok ringToken) {
	c := r.c
	if c.role != Follower {
		return
	}
	if !c.leaderLive() && c.now >= c.standAfter {
		r.claim(tok)
		return
	}
	// A leader is still heard, or this member is backing off: win as soon
	// as that ends, if it ends soon.
	r.champ, r.expect, r.won = c.self.ID, "", tok
	r.wonEnd = c.now + int64(c.cfg.AnswerTicks)
	r.setPhase(ringWon, c.now+1)
}

// claim makes this member, holding the votes of a quorum for it in
// tok.term, vote for itself (persisted with the term before anything is
// sent) and announce itself with a heartbeat. It becomes leader when a
// quorum has acknowledged that heartbeat (core.stepAck, announced): the lease
// is dated from it, never from the votes.
func (r *ring) claim(tok ringToken) {
	c := r.c
	if c.hs.Term > tok.term || (c.hs.Term == tok.term && c.hs.VotedFor != "") {
		// Voted in that term already (for another round, or claimed it
		// before a restart): that term is spent for this member.
		r.reset()
		c.event(EventVoteRefused, c.self.ID, ReasonAlreadyVoted)
		return
	}
	c.stand(tok.term, true, nil)
}

func (r *ring) roundFailed() {
	c := r.c
	r.phase, r.champ = ringIdle, ""
	c.standAfter = max(c.standAfter, c.now+int64(c.backoffTicks()))
}

func (r *ring) onDeadline() {
	c := r.c
	var due []*ringHop
	keep := r.hops[:0]
	for _, h := range r.hops {
		if h.until <= c.now {
			due = append(due, h)
		} else {
			keep = append(keep, h)
		}
	}
	r.hops = keep
	for _, h := range due {
		if c.role != Follower {
			break // this member is standing or leads: the other rounds are moot
		}
		r.markDead(h.to)
		if h.to == h.tok.cand {
			continue // the votes are for a member that is gone: the round is over
		}
		// The successor did not acknowledge: skip it.
		h.failed[h.to] = true
		r.route(h.tok, h.failed)
	}
	if r.phase == ringIdle || c.now < r.until || c.role != Follower {
		return
	}
	if r.phase == ringWon {
		switch {
		case !c.leaderLive() && c.now >= c.standAfter:
			r.claim(r.won)
		case c.now >= r.wonEnd:
			r.phase, r.champ = ringIdle, ""
		default:
			r.until = c.now + 1
		}
		return
	}
	if c.leaderLive() {
		r.phase, r.champ, r.expect = ringIdle, "", ""
		return
	}
	switch r.phase {
	case ringAwait:
		// Neither the expected member's round nor its heartbeat came: it is
		// dead too, or the view was stale. Every member that waited starts
		// its own round now; Chang-Roberts keeps that at O(n). A member
		// heard from directly within D is alive but does not stand
		// (drained): the round asks it for its vote. (The leader's view
		// is older than that by the time the wait ends.)
		if c.now-c.lastSeen[r.expect] > int64(c.cfg.ElectionTicks) {
			r.markDead(r.expect)
		}
		if c.now >= c.standAfter {
			r.initiate()
		} else {
			r.phase, r.expect = ringIdle, ""
		}
	case ringCandidate:
		// Our token was lost, or the round found no quorum: retry later.
		r.roundFailed()
	case ringVoted:
		// The candidate we voted for never announced itself. Back off, then
		// start over (tickFollower calls startElection).
		r.phase, r.champ = ringIdle, ""
		c.standAfter = max(c.standAfter, c.now+int64(c.backoffTicks()))
	}
}

// leaderReleased handles the token kept while a leader was heard, now that
// it is not, if the token is still fresh. It reports whether this member
// joined that round. The core calls it whenever it stops hearing its leader
// (see core.votePending).
func (r *ring) leaderReleased() bool {
	c := r.c
	p := r.pending
	r.pending = nil
	if p == nil || c.role != Follower || c.now-r.pendingAt > int64(c.cfg.AnswerTicks) {
		return false
	}
	return r.handle(*p)
}

func (r *ring) step(m Message) error {
	switch m.Type {
	case MsgRingToken:
		return r.stepToken(m)
	case MsgRingAck:
		return r.stepAck(m)
	}
	return nil // Bully traffic in a Ring group: ignored
}

// checkRing checks the fields every Ring message needs.
func (r *ring) checkRing(m Message) error {
	if m.To == "" {
		return fmt.Errorf("%w: %v broadcast", ErrBadMessage, m.Type)
	}
	if m.Seq == 0 {
		return fmt.Errorf("%w: %v without seq", ErrBadMessage, m.Type)
	}
	if !r.c.isMember(m.Initiator) {
		return fmt.Errorf("%w: initiator %q", ErrNotMember, m.Initiator)
	}
	return nil
}

func (r *ring) stepAck(m Message) error {
	if err := r.checkRing(m); err != nil {
		return err
	}
	if len(m.Participants) > 0 || m.Candidate != "" {
		return fmt.Errorf("%w: participants or candidate on %v", ErrBadMessage, m.Type)
	}
	r.c.markUp(m.From)
	delete(r.deadAt, m.From)
	for i, h := range r.hops {
		if h.to == m.From && h.tok.ringRound == (ringRound{m.Initiator, m.Seq}) {
			r.hops = append(r.hops[:i], r.hops[i+1:]...)
			break
		}
	}
	return nil
}

// checkToken checks a token's own fields: a candidate, a term, voters that
// are distinct members other than the candidate, and a sender that is the
// candidate or one of its voters (the holder is always one of them).
func (r *ring) checkToken(m Message) error {
	c := r.c
	if err := r.checkRing(m); err != nil {
		return err
	}
	if m.Candidate == "" {
		return fmt.Errorf("%w: token without a candidate (an older Ring protocol)", ErrBadMessage)
	}
	if !c.isMember(m.Candidate) {
		return fmt.Errorf("%w: candidate %q", ErrNotMember, m.Candidate)
	}
	if c.witness[m.Candidate] {
		return fmt.Errorf("%w: token for %q, a witness (do all members list the same witnesses?)", ErrBadMessage, m.Candidate)
	}
	if m.Term == 0 {
		return fmt.Errorf("%w: token of term 0", ErrBadMessage)
	}
	seen := make(map[string]bool, len(m.Participants))
	for _, p := range m.Participants {
		if !c.isMember(p) {
			return fmt.Errorf("%w: participant %q", ErrNotMember, p)
		}
		if seen[p] || p == m.Candidate {
			return fmt.Errorf("%w: participant %q listed twice", ErrBadMessage, p)
		}
		seen[p] = true
	}
	if m.From != m.Candidate && !seen[m.From] && len(m.Participants) > 0 {
		// A token that carries no votes yet may also come from a drained
		// member that passed it on while it climbed (see handle).
		return fmt.Errorf("%w: token from %q, who is neither its candidate nor a voter", ErrBadMessage, m.From)
	}
	return nil
}

func (r *ring) stepToken(m Message) error {
	c := r.c
	if err := r.checkToken(m); err != nil {
		return err
	}
	// Every hop is acknowledged, whatever becomes of the token: the
	// acknowledgement only says that this member is alive and took it.
	c.send(Message{Type: MsgRingAck, To: m.From, Term: c.hs.Term, Seq: m.Seq, Initiator: m.Initiator})
	c.markUp(m.From)
	delete(r.deadAt, m.From)
	// A token's candidate initiated its round or took it over, which a
	// drained member never does (see showsMayStand).
	delete(c.peerDrained, m.Candidate)
	for _, p := range m.Participants {
		c.markUp(p)
	}
	if c.role != Follower {
		return nil // a leader or a candidate: the round is moot
	}
	tok := ringToken{ringRound: ringRound{m.Initiator, m.Seq}, term: m.Term, cand: m.Candidate,
		voters: append([]string(nil), m.Participants...)}
	if tok.cand != c.self.ID && c.leaderLive() {
		// A member that hears a leader joins no round; it keeps the token
		// and joins when it stops hearing the leader, if that is soon.
		r.pending, r.pendingAt = &tok, c.now
		c.event(EventVoteRefused, tok.cand, ReasonLiveLeader)
		return nil
	}
	r.handle(tok)
	return nil
}

// handle applies a token to this member, a follower that hears no leader
// (or the token's candidate); it reports whether the member joined the round.
func (r *ring) handle(tok ringToken) bool {
	c := r.c
	self := c.self.ID
	if tok.cand == self {
		// Our own token, back: decided, or without a quorum yet (a voter
		// raised the term) to go round once more.
		switch {
		case c.quorum.Reached(len(tok.voters) + 1):
			r.win(tok)
		case r.phase == ringCandidate && r.round == tok.ringRound:
			r.route(tok, map[string]bool{})
		default:
			return false
		}
		return true
	}
	at, seen := r.seen[tok.key()]
	seen = seen && c.now-at < r.roundTicks()
	// A drained member never takes a round over. The first time a round
	// climbs past it without votes, it passes the token on as it is, to
	// the members above or round to the candidate; when the token comes
	// again, or carries votes, it has been round (every member above was
	// asked), and the drained member votes for the candidate as a member
	// below it would: its vote may be needed.
	drainedAbove := !c.mayStand() && c.outranks(self, tok.cand)
	relay := drainedAbove && len(tok.voters) == 0 && !seen
	if drainedAbove && contains(tok.voters, self) {
		return false // voted in this round already
	}
	if seen && !drainedAbove {
		return false // a duplicate of a visit already handled
	}
	if r.champ != "" && r.champ != tok.cand && c.outranks(r.champ, tok.cand) {
		return false // Chang-Roberts: a round for a higher candidate is under way
	}
	if relay {
		r.remember(tok.key())
		r.route(tok, map[string]bool{})
		return false
	}
	if c.outranks(self, tok.cand) && !drainedAbove {
		if len(tok.voters) > 0 {
			return false // votes are cast below the candidate only: not a token of ours to climb
		}
		// Climbing: take the candidacy over, in a term this member has not
		// used yet (it votes for itself only when it wins).
		if c.hs.Term >= MaxTerm {
			return false // no higher term to stand in
		}
		tok.term = max(tok.term, c.hs.Term+1)
		tok.cand = self
		r.candidate(tok)
		r.route(tok, map[string]bool{})
		return true
	}
	// Wrapped: vote for the candidate in the round's term, or in the lowest
	// term in which this member still can; the votes cast in an older term
	// are then dropped (their voters are asked again on the next pass).
	r.remember(tok.key())
	if !(c.hs.Term < tok.term || (c.hs.Term == tok.term && (c.hs.VotedFor == "" || c.hs.VotedFor == tok.cand))) {
		tok.term = c.hs.Term
		if c.hs.VotedFor != "" && c.hs.VotedFor != tok.cand {
			if tok.term >= MaxTerm {
				return false // no term left to vote in
			}
			tok.term++
		}
		tok.voters = nil
	}
	c.adoptTerm(tok.term)
	if c.hs.VotedFor != tok.cand {
		c.hs.VotedFor = tok.cand
		c.hsChanged = true
	}
	// Our own round, if any, is abandoned for this one.
	keep := r.hops[:0]
	for _, h := range r.hops {
		if h.tok.cand != self {
			keep = append(keep, h)
		}
	}
	r.hops = keep
	r.champ, r.expect = tok.cand, ""
	r.setPhase(ringVoted, c.now+r.roundTicks())
	tok.voters = append(tok.voters, self)
	r.route(tok, map[string]bool{})
	return true
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
