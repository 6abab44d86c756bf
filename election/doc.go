// Package election holds the protocol cores of edge-agent: Bully and Ring
// leader election among the members of a group, as pure state machines. A Node
// has no goroutines, reads no clock and does no I/O. Its caller (the agent)
// feeds it inputs and carries out its outputs:
//
//   - inputs: Step (a message from another member), Tick (one tick of the
//     caller's clock), and typed local inputs: Resign (a planned hand-over),
//     StepDown (stop leading without one), LeaderGone (the bus saw the leader's
//     connection close), RouteLost (the route to a member's server closed);
//   - outputs: Ready, drained after every input: the HardState to persist (term
//     and vote) if it changed, then the messages to send, the role, leader,
//     term and lease sequence, and the events that happened, in order;
//   - NextTick: how many ticks the caller may sleep through before the node
//     may act again.
//
// The caller persists HardState before it sends the Ready's messages, dates the
// lease from the send time of the heartbeat whose sequence Ready.LeaseSeq
// names, and never calls a Node from two goroutines. The same inputs give the
// same outputs: the tests drive whole groups in one goroutine (sim_test.go, and
// internal/safety's adversarial checker), checking the invariants after every
// step.
//
// # Terms, votes and leases
//
// A term only grows and is persisted before it is used; a member votes at most
// once per term, persisted before the vote leaves. A leader needs the votes of
// a quorum for its term, and acts only while a quorum (itself included) has
// acknowledged a heartbeat sent less than LeaseTicks ago: its lease. A member
// that acknowledged a leader, or voted for a candidate, backs it and grants no
// vote to anyone else for ElectionTicks (D), unless that member releases it (a
// RESIGN, the bus reporting its connection closed, the route to it closing; a
// candidate that gave up frees its voters with a WITHDRAW).
// LeaseTicks + HeartbeatTicks < ElectionTicks keeps every lease over before a
// backer may vote again. The invariants and the argument are in
// docs/DESIGN-NOTES.md ("Safety invariants").
//
// Before it raises its term, a member that stopped hearing its leader asks for
// pre-votes: "would you vote for me in the next term?". A member cut off from
// the group then never raises its term, and cannot depose a healthy leader with
// it when the link heals. Members that notice the silence send their pre-vote
// unasked to the member they expect to stand, so a failover costs no extra
// round.
//
// # Witnesses
//
// Config.Witnesses names members that vote but never lead: a two-gateway
// site's third vote. A witness pre-votes, votes (COORDINATORs and Ring
// tokens) and acknowledges heartbeats, so quorum and leases count it like any
// member; it never stands, through the drained member's path (mayStand),
// which Drain(false) does not undo. Unlike a drained member it is known to
// every member from the start (mayLead): no member waits for a witness to
// proclaim or to start a Ring round, sends it an ELECTION or waits on its
// refusal, and no leader nominates one (Resign returns ErrWitness) or hands
// it leadership by preemption. A climbing Ring token passes through a
// witness at once, and the witness votes in it once it has been round.
// What only a member that stands sends (heartbeat, COORDINATOR, pre-vote
// request, RESIGN, WITHDRAW, OK, a token for it) is dropped when it comes
// from a witness, and a RESIGN naming a witness is taken as naming no one:
// members whose lists differ cannot elect one, nor wait for one.
//
// # Bully
//
// The highest-ranked live member leads (rank: priority, then id). The textbook
// exchange costs O(n^2) messages. Here the leader's heartbeat carries its view
// of the live members, so when it fails every member knows which member should
// take over: that member proclaims at once (COORDINATOR, which is also the vote
// request) and the others only vote, O(n) messages in all. The ELECTION/OK
// exchange is the fallback when the expected member does not proclaim within
// AnswerTicks (it died too, or the view was stale). A live higher-ranked member
// refuses a lower one's COORDINATOR and stands itself.
//
// # Ring: the ring order
//
// The ring is the member list sorted by rank, lowest first: the successor of
// a member is the next higher-ranked member, and the highest wraps round to
// the lowest. Two reasons:
//
//   - Chang-Roberts: a member running its own round swallows the tokens of
//     lower-ranked candidates. When every member initiates at once, each
//     token's first hop is to a higher-ranked initiator, which swallows it;
//     only the highest initiator's token travels on. In the opposite order a
//     token would pass every lower member before meeting a higher initiator,
//     O(n^2) hops in all.
//   - A token climbs the ranks before it wraps. Once it has wrapped, every
//     member above its candidate has been visited or skipped as dead, so the
//     candidate is the result and the token only needs a quorum of votes.
//
// # Ring: one round
//
// A token (MsgRingToken) names its round (Initiator and Seq, the initiator's
// round counter), the round's term (Term), its Candidate and, in
// Participants, the members that voted for the candidate in that term, in
// the order they did. Every receiver acknowledges the hop with MsgRingAck,
// whatever it then does with the token; a successor that does not
// acknowledge within RingHopTicks is skipped, then the next, and so on.
// Members presumed dead (the suspected leader, members the leader's last
// heartbeat left out of its live view, a successor that failed to
// acknowledge lately) are skipped without waiting, unless the quorum is
// the whole group: then the round cannot win without them, and tries each
// for a hop (see ring.next).
//
//   - The initiator is the round's first candidate; the round's term is one
//     above the initiator's. It sends the token to its successor.
//   - Climbing: a receiver that outranks the candidate (the token has not
//     wrapped, so it carries no votes yet) takes the candidacy over, raises
//     the term above its own if needed, and passes the token on, unless it is
//     part of a round whose candidate outranks the token's (Chang-Roberts:
//     it swallows the token).
//   - Wrapped: a receiver ranked below the candidate votes for it in the
//     round's term, persisting the vote before the token leaves (it goes out
//     through Ready after HardState), appends itself and passes the token on.
//     If it cannot vote in that term (it voted for someone else in it, or its
//     own term is higher), it raises the token's term to the lowest one in
//     which it can, drops the votes cast in the older term, and votes; the
//     token then goes round once more through the candidate to ask the
//     earlier voters again. A member that voted for an outranking candidate
//     lately swallows the token instead.
//   - Once the candidate and its voters make a quorum, the holder sends the
//     token to the candidate. The candidate votes for itself in the round's
//     term and announces itself with a heartbeat (heartbeats and their
//     acknowledgements are the steady-state exchange, not election traffic);
//     it becomes leader when a quorum has acknowledged that heartbeat.
//   - A token that reaches its candidate without a quorum goes round once
//     more from the candidate; a round that comes full circle without a
//     quorum is dropped and its candidate retries after a backoff. A token
//     whose candidate does not acknowledge is dropped: its votes are for that
//     member only.
//
// A member that still hears a live leader (or a leader's lease could still
// be running) joins no round: it acknowledges the token and keeps it, and
// handles it when it stops hearing the leader (missed heartbeats, the bus
// reporting the leader gone, a resignation), if that happens within
// AnswerTicks. So a round that gathers a quorum means that a quorum does not
// hear a leader: the round is its own pre-vote. A minority never stands, and
// its retries do not inflate terms: a retry reuses its round's term, in
// which its voters already voted for the same candidate.
//
// # Ring: why it is safe
//
//   - One leader per term: a member votes at most once per term, and only
//     for a named candidate, so in a term at most one member can hold a
//     quorum of votes; a candidate votes for itself only when it wins, and
//     only in a term in which it has not voted. Forked tokens (a successor
//     took the token but its acknowledgement was lost, and the holder skipped
//     it) carry votes for the same candidate, or for candidates in different
//     terms.
//   - Leases: the voters of a round did not hear the old leader for D (or
//     heard the bus report it gone), so the old leader's lease has run out
//     before the candidate can win, as with Bully's votes. The new leader's
//     own lease runs from its announcing heartbeat, which a quorum
//     acknowledged: the votes themselves were cast at times the candidate
//     does not know, and are never used to date a lease.
//   - Terms never decrease: a term is adopted (persisted) by a voter when it
//     votes and by the candidate when it wins; a token never asks a member
//     to vote in a term below its own.
//
// Hand-over (Resign with a nominee) and preemption are Bully's: the nominee
// proclaims at once with a COORDINATOR and collects votes. So is the fast
// path: when the bus reports the leader's connection closed (LeaderGone),
// it reports it to every connected member, and the member that all of them
// then expect (the highest alive) proclaims with a COORDINATOR rather than
// sending a round. It sends it to the members the round would have asked
// (its successors not presumed dead, as many as a quorum needs beside its
// own vote), which, waiting for its round, vote for it in parallel; the
// others follow its first heartbeat, as after a round. If those votes do not
// make a quorum within RingHopTicks (a member asked died with the leader,
// unreported), the request goes to every member, as a round would skip a
// successor that does not acknowledge. The votes are the same persisted
// votes, one per term, so the safety argument above holds unchanged; what
// the token would add (finding the highest live member) the report and the
// heartbeat view already did, and its sequential persists (one per voter)
// cost a disk write each. A member told alone that is not the expected one
// still waits for that member's round and starts its own only when it does
// not come, so one stray report raises no term.
//
// # Ring: cost
//
// With the leader's heartbeat view every member knows, when the leader goes
// silent, which member is the highest alive. Only that member initiates; the
// others wait AnswerTicks for the round to reach them or for the new leader's
// heartbeat, and initiate themselves only if neither comes (then
// Chang-Roberts keeps the concurrent rounds at O(n)). The token skips the
// dead leader, wraps to the lowest member and collects q-1 votes (q =
// quorum), then goes to the candidate: q hops and q acknowledgements, 2q
// deliveries in all, about n. When every survivor initiates at once, each
// lower initiator's token costs one hop and one acknowledgement before it is
// swallowed, and the winning round 2q more: about 3n-4. Each voter persists
// its vote before passing the token on, so a round takes q sequential disk
// writes: cheap at a site of a few gateways, noticeable at n = 100 on slow
// flash. The fast path's COORDINATOR takes two (the candidate's, then its
// voters' in parallel) and 2(q-1) deliveries, about n.
package election
