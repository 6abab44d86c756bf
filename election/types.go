package election

import (
	"errors"
	"fmt"
	"sort"
)

// Member is one gateway of a group: a stable id and a priority. Members are
// compared by Rank: higher priority wins, ties are broken by the higher id.
type Member struct {
	ID       string `json:"id"`
	Priority int    `json:"priority"`
}

// Higher reports whether a outranks b: priority first, then id.
func Higher(a, b Member) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.ID > b.ID
}

// ValidID reports whether id can name a member. Ids become NATS subject
// tokens, so they are limited to letters, digits, '-' and '_' (1..64 bytes).
// It runs for every id of every message received, so it is a plain loop.
func ValidID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

// SortByRank returns a copy of ms ordered from the highest rank to the lowest.
func SortByRank(ms []Member) []Member {
	out := append([]Member(nil), ms...)
	sort.Slice(out, func(i, j int) bool { return Higher(out[i], out[j]) })
	return out
}

// MsgType names an election message.
type MsgType uint8

// The message types. Heartbeat, Ack and Resign are shared by both algorithms;
// Election, OK, Coordinator and Vote are the Bully exchange (Coordinator is
// also the vote request); RingToken and RingAck carry the Ring election.
// PreVote and PreVoteReply ask "would you vote for me in the next term?"
// without raising anyone's term (see core.tryProclaim). Withdraw says a
// candidacy ended without leading: its voters are free again (see
// core.settleCandidacy).
const (
	MsgInvalid MsgType = iota
	MsgHeartbeat
	MsgAck
	MsgElection
	MsgOK
	MsgCoordinator
	MsgVote
	MsgResign
	MsgRingToken
	MsgRingAck
	MsgPreVote
	MsgPreVoteReply
	MsgWithdraw
	msgTypeEnd
)

var msgTypeNames = [...]string{
	MsgInvalid:      "invalid",
	MsgHeartbeat:    "heartbeat",
	MsgAck:          "ack",
	MsgElection:     "election",
	MsgOK:           "ok",
	MsgCoordinator:  "coordinator",
	MsgVote:         "vote",
	MsgResign:       "resign",
	MsgRingToken:    "ring_token",
	MsgRingAck:      "ring_ack",
	MsgPreVote:      "pre_vote",
	MsgPreVoteReply: "pre_vote_reply",
	MsgWithdraw:     "withdraw",
}

// String returns the wire name of t.
func (t MsgType) String() string {
	if t < msgTypeEnd {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// ParseMsgType maps a wire name back to its type; ok is false for unknown names.
func ParseMsgType(s string) (MsgType, bool) {
	for i := MsgHeartbeat; i < msgTypeEnd; i++ {
		if msgTypeNames[i] == s {
			return i, true
		}
	}
	return MsgInvalid, false
}

// IsElectionTraffic reports whether t counts as an election message (as
// opposed to the steady-state heartbeat/ack exchange) in delivery counts.
func (t MsgType) IsElectionTraffic() bool { return t != MsgHeartbeat && t != MsgAck }

// Message is one election message. To is empty for a message to every member
// of the group. Fields that a type does not use are zero.
type Message struct {
	Type MsgType
	From string
	To   string
	Term uint64
	// Seq is the sender's heartbeat sequence: set on Heartbeat and Coordinator,
	// echoed by Ack and Vote so the leader can date its lease. On RingToken
	// it numbers the initiator's round (with Initiator, it names the round),
	// echoed by RingAck.
	Seq uint64
	// Granted is the answer of a Vote.
	Granted bool
	// Alive is the leader's view of live members, carried by Heartbeat.
	Alive []string
	// Nominee is the member a Resign hands leadership to ("" = next in rank).
	Nominee string
	// Initiator, Candidate and Participants carry a Ring token: the round's
	// initiator, the member the round elects, and the members that voted for
	// that candidate in Term, in order (Term is then the round's term).
	Initiator    string
	Candidate    string
	Participants []string
	// Algorithm is the sender's election algorithm ("bully", "ring"),
	// stamped by the agent so that a member configured differently from its
	// group is found and refused; the cores ignore it.
	Algorithm string
	// Conn identifies the leader's current connection to the bus, carried
	// by Heartbeat, so that a report that this connection closed can be
	// told apart from a stale report about an earlier one.
	Conn string
	// Drained, on an Ack, says that the sender never stands (it was
	// drained): the leader then never hands leadership to it, by
	// preemption or by a hand-over that names no nominee. A receiver that
	// ignores it may still nominate the sender, which then declines.
	Drained bool
	// Promise, on an Ack that answers a heartbeat and on a granted Vote, is
	// the sender's D in ticks of the node that reads it: for that long
	// after the request it answers arrived, the sender grants no vote to
	// another member. A leader counts an acknowledgement or vote for at
	// most Promise - HeartbeatTicks - 1 ticks of its lease, so that a
	// member whose D is shorter than the leader's lease allows (a timing
	// changed on some gateways only) shortens that lease rather than
	// voting while it runs. 0: not said (an older member, or a test); the
	// reader takes its own D. The core sets it on what it sends in its own
	// ticks; a transport between members of other tick lengths converts.
	Promise int
	// Fence, on an Ack or a granted Vote, is how much was left, when the
	// sender sent it, of the sender's fast-path fence: the sender was
	// released from its leader by a report that the leader's connection (or
	// the route to its server) closed, and that leader may still act for a
	// moment. A member that leads on such an answer waits it out before it
	// acts, as if it had acted on the report itself. In nanoseconds of the
	// agent's clock; stamped and read by the agent, the cores ignore it.
	Fence int64
	// FenceConn, with Fence, names the closed connection whose report began
	// the sender's fence ("" for a closed route): a member that acted on
	// the report of that very connection itself has a fence of its own for
	// the same close and need not wait the sender's.
	FenceConn string
	// NoFence, on a Heartbeat that names Conn, says that nothing of the
	// leader acts once the server saw that connection closed: it runs no
	// leader work outside the agent's own process and its IsLeader, so a
	// member that acts on the server's report of that close needs no
	// fast-path fence. Stamped and read by the agent; the cores ignore it.
	NoFence bool
}

// Role is a node's part in its group.
type Role uint8

// Roles.
const (
	Follower Role = iota
	Candidate
	Leader
)

func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// HardState is what a node must persist, durably, before the messages of the
// same Ready are sent: the current term and the vote granted in it.
type HardState struct {
	Term     uint64 `json:"term"`
	VotedFor string `json:"voted_for"`
}

// Ready is what a node asks its caller to do after Step or Tick: persist
// HardState if it changed, then send Messages. Role, Leader and Term describe
// the node now. LeaseSeq is, for a leader, the heartbeat sequence its lease
// rests on, the newest that a quorum (the leader included) has acknowledged
// when every member promised a D long enough: the caller dates the lease from
// the moment it sent that heartbeat, and it runs for LeaseTicks.
type Ready struct {
	HardState        HardState
	HardStateChanged bool
	Messages         []Message
	Role             Role
	Leader           string
	Term             uint64
	LeaseSeq         uint64
	// LeaseTicks is, for a leader, how long its lease runs from the send of
	// heartbeat LeaseSeq: Config.LeaseTicks, or less when a member whose
	// acknowledgement the lease rests on promised a shorter D than the
	// lease allows (see Message.Promise). 0 for a non-leader.
	LeaseTicks int
	// Events describes what happened since the previous Ready, in order.
	Events []Event
	// SendFirst says that Messages may leave before HardState is on disk,
	// provided the caller persists it before it gives the node anything
	// else (a Step, a Tick): the node stands, HardState holds its vote for
	// itself, and Messages are nothing but its request for votes in that
	// term (COORDINATOR). Only this node counts its own vote, and only on an
	// input after the persist, so a crash before the persist loses a vote
	// that nobody counted; what else the lost HardState held since the
	// last Ready (a term adopted, a vote granted) no message of this Ready
	// carries, and the messages of earlier Readies left after their own
	// persist. After the restart the node may vote in that term again, for
	// itself or another: no quorum ever held the lost vote. The persist
	// then runs while the request travels and the voters persist their own
	// votes. Never set when the node led at the previous Ready (leadership
	// ends before anything leaves) or leads now.
	SendFirst bool
}

// EventKind classifies an Event.
type EventKind uint8

// Event kinds reported in Ready.
const (
	EventElectionStarted EventKind = iota + 1 // this node started an election
	EventElectionWon                          // this node became leader
	EventElectionFailed                       // this node's election timed out
	EventSteppedDown                          // this node lost leadership (Reason says why)
	EventNewLeader                            // the known leader changed
	EventStaleTerm                            // a heartbeat or COORDINATOR of a lower term was answered with the current term
	EventVoteRefused                          // a vote was refused (Reason says why)
)

// Event is one notable transition, for logs and metrics. Peer is the member
// it concerns, if any (the member a vote was refused to, the member whose
// route closed, the sender of a stale message).
type Event struct {
	Kind   EventKind
	Term   uint64
	Peer   string
	Reason Reason
}

// Reason says why an event happened: why a leader stepped down, why an
// election failed, why a vote was refused, what was stale.
type Reason uint8

// Reasons.
const (
	ReasonNone Reason = iota
	// Step-downs (EventSteppedDown).
	ReasonResigned       // a planned hand-over asked for (resign, transfer)
	ReasonPreempted      // a hand-over to a higher-ranked member that was healthy for the hold-down
	ReasonLeaseExpired   // no quorum acknowledged a heartbeat within the lease
	ReasonHigherTerm     // a message of a higher term
	ReasonOutranked      // another leader of the same term outranks this one (island mode)
	ReasonRouteLost      // the route to a member the lease needed closed, or routes to a quorum did
	ReasonConnectionLost // this member's own connection to the bus dropped
	// Failed elections (EventElectionFailed).
	ReasonNoVotes       // no quorum of votes in time
	ReasonVotesRefused  // too many members refused
	ReasonNoPreVotes    // no quorum of pre-votes in time
	ReasonTermExhausted // the term is at MaxTerm: no higher term to stand in
	// Refused votes (EventVoteRefused).
	ReasonLiveLeader   // this member backs a live leader (stickiness)
	ReasonOutrankedBy  // this member outranks the candidate and stands itself
	ReasonAlreadyVoted // this member voted for another in that term
	// Stale messages answered (EventStaleTerm).
	ReasonStaleHeartbeat
	ReasonStaleCoordinator
	// ReasonDrained: a step-down (EventSteppedDown) of a leader that was
	// drained; it hands over as on a resign.
	ReasonDrained
)

var reasonText = [...]string{
	ReasonNone:             "",
	ReasonResigned:         "handing over: resign or transfer",
	ReasonPreempted:        "handing over: hold-down preemption",
	ReasonLeaseExpired:     "lease expired: no quorum of acknowledgements",
	ReasonHigherTerm:       "saw a higher term",
	ReasonOutranked:        "another leader of the same term outranks this one",
	ReasonRouteLost:        "lost the route to a member whose acknowledgement the lease needed",
	ReasonConnectionLost:   "lost its own connection to the bus",
	ReasonNoVotes:          "no quorum of votes in time",
	ReasonVotesRefused:     "votes refused by too many members",
	ReasonNoPreVotes:       "pre-vote: no quorum of pre-votes in time",
	ReasonTermExhausted:    "term at MaxTerm: no higher term to stand in",
	ReasonLiveLeader:       "live leader",
	ReasonOutrankedBy:      "outranked: standing instead",
	ReasonAlreadyVoted:     "already voted in term",
	ReasonStaleHeartbeat:   "heartbeat of an older term",
	ReasonStaleCoordinator: "coordinator of an older term",
	ReasonDrained:          "handing over: drained",
}

var reasonLabel = [...]string{
	ReasonResigned:       "resigned",
	ReasonPreempted:      "resigned",
	ReasonLeaseExpired:   "lease_expired",
	ReasonHigherTerm:     "higher_term",
	ReasonRouteLost:      "route_lost",
	ReasonConnectionLost: "connection_lost",
	ReasonDrained:        "resigned",
}

// String says the reason in words.
func (r Reason) String() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Label names a step-down reason for metrics: resigned (planned hand-overs),
// lease_expired, higher_term, route_lost, connection_lost, or other.
func (r Reason) Label() string {
	if int(r) < len(reasonLabel) && reasonLabel[r] != "" {
		return reasonLabel[r]
	}
	return "other"
}

// Node is one member's election state machine. Implementations are
// deterministic and not safe for concurrent use: one goroutine owns a Node.
type Node interface {
	// Step applies one message received from the network. It returns an
	// error (wrapping ErrStaleTerm, ErrNotMember, ...) when the message was
	// rejected: a rejected message changes nothing and is answered with
	// nothing. A heartbeat or COORDINATOR of a lower term is not rejected
	// but answered with the current term (and reported as EventStaleTerm),
	// so that its stale sender steps down or catches up.
	Step(m Message) error
	// Tick advances the node's logical clock by one tick.
	Tick()
	// NextTick tells a caller that wants to sleep between events how many
	// Tick calls from now it may skip: the n-th call (n >= 1) is the first
	// that may act (send, persist, change role, leader or term, or change
	// state that a later action depends on). The calls before it only
	// advance the clock, so a caller may make them all at once, late, as
	// long as it makes them before the next Step. Steps and Resign change
	// the answer: ask again after each.
	NextTick() int
	// Resign makes a leader step down and hand over to nominee ("" = the
	// next member in rank). It is an error for a node that does not lead.
	Resign(nominee string) error
	// LeaderGone tells the node that the bus saw member id's connection conn
	// close because id's own host closed it (its process exited, or its
	// client gave up on the connection, in which case its agent stopped
	// leading at that moment). If id is the leader the node backs and conn
	// is the connection id announced in its heartbeats of the term backed,
	// the node stops waiting for missed heartbeats and elects at once, with
	// no pre-vote; otherwise nothing changes. It reports whether the node
	// acted on it.
	LeaderGone(id, conn string) bool
	// RouteLost tells the node that the route between its bus server and
	// member id's closed (an offline site, where each member's agent
	// embeds a server clustered with the others'). Both ends see a route
	// close at the same moment, and stop counting on each other: a leader
	// stops counting id's acknowledgements (and steps down at once if its
	// lease needed them), a candidate id's vote, and a follower that backs
	// id is released from it and elects at once (after a pre-vote: the
	// route may have closed on its own side). It reports whether the node
	// acted on it.
	RouteLost(id string) bool
	// Drain sets whether this member is drained: a drained member never
	// stands (no COORDINATOR, no Ring round of its own, no OK to an
	// ELECTION, no refusal of a lower member's COORDINATOR to stand
	// itself, no candidacy when nominated) but still pre-votes, votes and
	// acknowledges heartbeats, telling the leader with Message.Drained. A
	// leader that is drained hands over at once (a planned hand-over, as
	// Resign with no nominee), a candidate gives its candidacy up.
	// Draining changes who may lead, never what a vote or a lease means.
	Drain(drained bool)
	// StepDown makes a leader (or candidate) stop at once, without a
	// hand-over: its agent lost its own connection, or its wall-clock
	// lease ran out. Nothing is sent; the members elect once they miss its
	// heartbeats or the bus reports it gone. No-op for a follower.
	StepDown(reason Reason)
	// Ready drains the work accumulated since the last call.
	Ready() Ready
	// Status is a snapshot of the node's view, for status reports.
	Status() Status
	// StatusInto is Status written over *st, reusing its Members' array:
	// a loop that takes a snapshot after every step allocates none.
	StatusInto(st *Status)
}

// Status is a point-in-time view of a node.
type Status struct {
	ID      string
	Role    Role
	Leader  string
	Term    uint64
	Quorum  int
	Live    int // members this node currently believes alive (itself included)
	Members []MemberStatus
}

// MemberStatus is what a node knows of one member.
type MemberStatus struct {
	Member
	Alive bool
	// TicksSinceSeen is how long ago (in ticks) the member was last heard
	// from, directly or through the leader's view; -1 if never.
	TicksSinceSeen int
	// Drained: the member said so in its last acknowledgement (known to a
	// leader), or it is this node and it is drained. A witness's own
	// acknowledgements always say so; only Witness reports that.
	Drained bool
	// Witness: the member is a witness (Config.Witnesses): it votes but
	// never leads.
	Witness bool
	// Promise is, on a leader, the D (in ticks) the member promised with
	// the acknowledgement or vote the leader counts; 0 when none is
	// counted. ShortensLease: that promise is too short for the leader's
	// LeaseTicks, which its acknowledgements back for less (see
	// Message.Promise): the timings of the two members differ.
	Promise       int
	ShortensLease bool
}

// Errors returned by Step. Callers match them with errors.Is.
var (
	ErrStaleTerm   = errors.New("election: stale term")
	ErrNotMember   = errors.New("election: sender is not a member")
	ErrBadMessage  = errors.New("election: malformed message")
	ErrNotLeader   = errors.New("election: not leader")
	ErrWrongTarget = errors.New("election: message addressed to another member")
	// ErrDrained is the error of Resign naming a member known to be drained.
	ErrDrained = errors.New("election: cannot hand over to a drained member")
	// ErrWitness is the error of Resign naming a witness.
	ErrWitness = errors.New("election: cannot hand over to a witness: it votes but never leads")
)
