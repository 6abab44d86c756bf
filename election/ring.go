package election

import "fmt"

// NewRing returns a Node that elects with the Ring algorithm: a token goes
// round the members, each live member adds itself, and the highest-ranked
// participant is elected if the participants form a quorum. The terms, the
// one vote per term, stickiness, leases and hand-over are the same as
// Bully's: a Ring election ends with the chosen member proclaiming.
//
// # Ring order
//
// The ring is the member list sorted by rank, lowest first: the successor of
// a member is the next higher-ranked member, and the highest wraps round to
// the lowest. Two reasons:
//
//   - Chang-Roberts: a member running its own election swallows the tokens
//     of lower-ranked initiators. When every member initiates at once, each
//     token's first hop is to a higher-ranked initiator, which swallows it;
//     only the highest initiator's token travels on. In the opposite order a
//     token would pass every lower member before meeting a higher initiator,
//     O(n^2) hops in all.
//   - A token climbs the ranks before it wraps. Once it has wrapped, every
//     member above its best participant has been visited or skipped as dead,
//     so that participant is the result; the token then only needs a quorum
//     and can stop there instead of finishing the round.
//
// # One round
//
// The initiator sends MsgRingToken (Initiator, Seq, Participants) to its
// successor. Every receiver acknowledges the hop with MsgRingAck, whatever it
// then does with the token; a successor that does not acknowledge within
// RingHopTicks is skipped, then the next, and so on. Members presumed dead
// (the suspected leader, members the leader's last heartbeat left out of its
// live view, a successor that failed to acknowledge lately) are skipped
// without waiting. A receiver appends itself and passes the token on, except
// that a member running its own election, or already part of a higher
// initiator's round, swallows the tokens of lower-ranked initiators. The
// holder under which the token has wrapped (or come full circle) and holds a
// quorum sends it straight to its best participant (in the common case the
// initiator: its token has come back). That member proclaims: COORDINATOR,
// then votes, exactly as in Bully. A round that comes full circle without a
// quorum is dropped; its initiator retries after a backoff.
//
// The COORDINATOR is broadcast rather than passed round the ring: one hop of
// latency instead of n, and every member must see it anyway, because it is
// the vote request and each member answers it with its vote.
//
// # Cost
//
// With the leader's heartbeat view every member knows, when the leader goes
// silent, which member is the highest alive. Only that member initiates; the
// others wait AnswerTicks for its COORDINATOR, and initiate themselves only
// if it does not come (then Chang-Roberts keeps the concurrent rounds at
// O(n)). The token skips the dead leader, wraps to the lowest member and
// stops at a quorum q, so a failover costs q token hops, q acknowledgements,
// and the COORDINATOR and a vote for each live member: about 3n deliveries.
func NewRing(cfg Config) (Node, error) {
	c, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	r := &ring{c: c, pos: make(map[string]int, len(c.members)), seen: map[ringRound]int64{}, deadAt: map[string]int64{}}
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
	ringAwait               // waiting for the expected member to proclaim
	ringInitiated           // sent our own token, waiting for the round to end
	ringJoined              // passed on another initiator's token, waiting for its COORDINATOR
	ringElected             // won a round, waiting for leave to proclaim
)

// ringRound identifies one round: its initiator and the initiator's counter.
type ringRound struct {
	initiator string
	seq       uint64
}

// ringToken is a token held by this member.
type ringToken struct {
	ringRound
	parts []string
}

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

	phase      ringPhase
	until      int64
	expect     string // ringAwait: the member expected to proclaim
	champ      string // the highest initiator of the rounds this member is part of
	electedEnd int64  // ringElected: give up the win after this tick

	seq    uint64              // the last round this member initiated
	seen   map[ringRound]int64 // rounds this member joined -> tick, to drop duplicates
	deadAt map[string]int64    // member -> tick a hop to it or a wait for it timed out
	hops   []*ringHop
}

func (r *ring) hopTicks() int64 { return int64(r.c.cfg.RingHopTicks) }

// roundTicks bounds a whole round: every member skipped once, then the
// COORDINATOR.
func (r *ring) roundTicks() int64 {
	return int64(r.c.cfg.AnswerTicks) + int64(len(r.order))*r.hopTicks()
}

func (r *ring) busy() bool { return r.phase != ringIdle || len(r.hops) > 0 }

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
	r.phase, r.expect, r.champ, r.hops = ringIdle, "", "", nil
}

func (r *ring) setPhase(p ringPhase, until int64) { r.phase, r.until = p, until }

func (r *ring) startElection(expected string) {
	c := r.c
	if expected == "" {
		expected = r.highestAlive()
	}
	if expected == c.self.ID {
		r.initiate()
		return
	}
	r.champ, r.expect = "", expected
	r.setPhase(ringAwait, c.now+int64(c.cfg.AnswerTicks))
}

// initiate starts a round with this member as initiator.
func (r *ring) initiate() {
	c := r.c
	r.seq++
	id := ringRound{c.self.ID, r.seq}
	r.remember(id)
	r.champ, r.expect = c.self.ID, ""
	r.setPhase(ringInitiated, c.now+r.roundTicks())
	r.route(ringToken{ringRound: id, parts: []string{c.self.ID}}, map[string]bool{})
}

// remember records that this member took part in round id, and forgets
// rounds too old to still be in flight.
func (r *ring) remember(id ringRound) {
	for k, at := range r.seen {
		if r.c.now-at >= r.roundTicks() {
			delete(r.seen, k)
		}
	}
	r.seen[id] = r.c.now
}

// presumedDead reports whether the token may skip id without waiting for
// an acknowledgement, and whether a member waiting for a COORDINATOR may
// pass id over. The evidence is the view (a leader's heartbeats leave out
// the members that stopped answering it; the suspected or reported-gone
// leader and a resigned one are out of it too), or a hop or wait that timed
// out on id lately and since which id has not been heard. Those timeouts
// are kept apart from the view and forgotten after 2*ElectionTicks: after a
// long partition every member is tried again, or members that all believe
// each other dead would never exchange a token.
func (r *ring) presumedDead(id string) bool {
	c := r.c
	if at, ok := r.deadAt[id]; ok && at >= c.lastSeen[id] && c.now-at < 2*int64(c.cfg.ElectionTicks) {
		return true
	}
	return !c.view[id]
}

func (r *ring) markDead(id string) { r.deadAt[id] = r.c.now }

// highestAlive returns the highest-ranked member not presumed dead.
func (r *ring) highestAlive() string {
	c := r.c
	for _, m := range c.members {
		if m.ID == c.self.ID || !r.presumedDead(m.ID) {
			return m.ID
		}
	}
	return c.self.ID
}

// next returns the first successor of this member that should get tok:
// neither failed nor presumed dead. circle is true when the search reaches a
// participant (or this member) first: the token has been all the way round.
func (r *ring) next(tok ringToken, failed map[string]bool) (next string, circle bool) {
	c := r.c
	n := len(r.order)
	for k := 1; k < n; k++ {
		id := r.order[(r.pos[c.self.ID]+k)%n]
		if contains(tok.parts, id) {
			return "", true
		}
		if failed[id] || r.presumedDead(id) {
			continue
		}
		return id, false
	}
	return "", true
}

// wrapped reports whether the token has passed the top of the ring: some
// participant ranks below the one before it. From then on every member above
// the best participant has been visited or skipped, so the result is known.
func (r *ring) wrapped(parts []string) bool {
	for i := 1; i < len(parts); i++ {
		if r.c.outranks(parts[i-1], parts[i]) {
			return true
		}
	}
	return false
}

func (r *ring) best(parts []string) string {
	b := parts[0]
	for _, p := range parts[1:] {
		if r.c.outranks(p, b) {
			b = p
		}
	}
	return b
}

// route decides what this member, holding tok, does with it: hand it to the
// winner once the result is known, pass it to the next successor, or drop it
// when it has come round without a quorum.
func (r *ring) route(tok ringToken, failed map[string]bool) {
	c := r.c
	next, circle := r.next(tok, failed)
	if len(tok.parts) >= c.quorum && (circle || r.wrapped(tok.parts)) {
		w := r.best(tok.parts)
		if w == c.self.ID {
			r.win()
			return
		}
		r.sendHop(w, tok, failed)
		return
	}
	if circle {
		// Round over without a quorum. Its initiator backs off before it
		// tries again; if that is another member, it learns it by timeout.
		if tok.initiator == c.self.ID && r.phase == ringInitiated && r.champ == c.self.ID {
			r.roundFailed()
		}
		return
	}
	r.sendHop(next, tok, failed)
}

func (r *ring) sendHop(to string, tok ringToken, failed map[string]bool) {
	c := r.c
	tok.parts = append([]string(nil), tok.parts...)
	c.send(Message{Type: MsgRingToken, To: to, Term: c.hs.Term, Seq: tok.seq, Initiator: tok.initiator, Participants: tok.parts})
	h := &ringHop{to: to, tok: tok, failed: failed, until: c.now + r.hopTicks()}
	for i, o := range r.hops {
		if o.tok.ringRound == tok.ringRound {
			r.hops[i] = h
			return
		}
	}
	r.hops = append(r.hops, h)
}

// win is called on the member a decided round elected.
func (r *ring) win() {
	c := r.c
	if c.role != Follower {
		return
	}
	if !c.leaderLive() && c.now >= c.standAfter {
		c.proclaim()
		return
	}
	// A leader is still heard, or this member is backing off: proclaim as
	// soon as that ends, if it ends soon.
	r.champ, r.expect = c.self.ID, ""
	r.electedEnd = c.now + int64(c.cfg.AnswerTicks)
	r.setPhase(ringElected, c.now+1)
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
			break // this member proclaimed: the other rounds are moot
		}
		// The successor did not acknowledge: skip it.
		r.markDead(h.to)
		h.failed[h.to] = true
		h.tok.parts = remove(h.tok.parts, h.to)
		r.route(h.tok, h.failed)
	}
	if r.phase == ringIdle || c.now < r.until || c.role != Follower {
		return
	}
	if r.phase == ringElected {
		switch {
		case !c.leaderLive() && c.now >= c.standAfter:
			c.proclaim()
		case c.now >= r.electedEnd:
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
		// The expected member stayed silent: it is dead too, or the view was
		// stale. Every member that waited starts its own round now;
		// Chang-Roberts keeps that at O(n).
		r.markDead(r.expect)
		if c.now >= c.standAfter {
			r.initiate()
		} else {
			r.phase, r.expect = ringIdle, ""
		}
	case ringInitiated:
		// Our token was lost, or the round found no quorum: retry later.
		r.roundFailed()
	case ringJoined:
		// The round we joined never produced a COORDINATOR. Back off, then
		// start over (tickFollower calls startElection).
		r.phase, r.champ = ringIdle, ""
		c.standAfter = max(c.standAfter, c.now+int64(c.backoffTicks()))
	}
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
	if len(m.Participants) > 0 {
		return fmt.Errorf("%w: participants on %v", ErrBadMessage, m.Type)
	}
	r.c.view[m.From] = true
	delete(r.deadAt, m.From)
	for i, h := range r.hops {
		if h.to == m.From && h.tok.ringRound == (ringRound{m.Initiator, m.Seq}) {
			r.hops = append(r.hops[:i], r.hops[i+1:]...)
			break
		}
	}
	return nil
}

func (r *ring) stepToken(m Message) error {
	c := r.c
	if err := r.checkRing(m); err != nil {
		return err
	}
	seen := make(map[string]bool, len(m.Participants))
	for _, p := range m.Participants {
		if !c.isMember(p) {
			return fmt.Errorf("%w: participant %q", ErrNotMember, p)
		}
		if seen[p] {
			return fmt.Errorf("%w: participant %q listed twice", ErrBadMessage, p)
		}
		seen[p] = true
	}
	if !seen[m.From] {
		return fmt.Errorf("%w: token from %q, who is not a participant", ErrBadMessage, m.From)
	}
	// Every hop is acknowledged, whatever becomes of the token: the
	// acknowledgement only says that this member is alive and took it.
	c.send(Message{Type: MsgRingAck, To: m.From, Term: c.hs.Term, Seq: m.Seq, Initiator: m.Initiator})
	for _, p := range m.Participants {
		c.view[p] = true
		delete(r.deadAt, p)
	}
	if c.role != Follower {
		return nil // a leader or a candidate: the round is moot
	}
	id := ringRound{m.Initiator, m.Seq}
	if seen[c.self.ID] {
		// The token has come back: it was decided and this member won.
		if len(m.Participants) >= c.quorum && r.best(m.Participants) == c.self.ID {
			r.win()
		}
		return nil
	}
	if at, ok := r.seen[id]; ok && c.now-at < r.roundTicks() {
		return nil // a duplicate of a round this member already passed on
	}
	if r.champ != "" && c.outranks(r.champ, m.Initiator) {
		return nil // Chang-Roberts: a higher initiator's round is under way
	}
	r.remember(id)
	if !c.leaderLive() {
		// Wait for this round's COORDINATOR, and swallow the tokens of
		// lower initiators meanwhile. A member that still hears its leader
		// waits for nothing: it passes the token on (the initiator may only
		// have noticed the leader's death first) and its vote stays with
		// the core's stickiness rule.
		r.champ, r.expect = m.Initiator, ""
		r.setPhase(ringJoined, c.now+r.roundTicks())
	}
	parts := append(append(make([]string, 0, len(m.Participants)+1), m.Participants...), c.self.ID)
	r.route(ringToken{ringRound: id, parts: parts}, map[string]bool{})
	return nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func remove(ids []string, id string) []string {
	out := make([]string, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
