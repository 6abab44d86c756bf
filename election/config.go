package election

import (
	"errors"
	"fmt"

	"github.com/edge-agent/edge-agent/election/quorum"
)

// Preemption is how a higher-ranked member that returns while another leads
// takes over.
type Preemption uint8

// Preemption policies.
const (
	// PreemptHoldDown: the leader hands over to a higher-ranked member once
	// that member has acknowledged heartbeats continuously for HoldDownTicks.
	PreemptHoldDown Preemption = iota
	// PreemptNever: a leader keeps leading until it fails or resigns.
	PreemptNever
	// PreemptImmediate: the leader hands over as soon as it hears a
	// higher-ranked member.
	PreemptImmediate
)

// Backoff spaces out a member's attempts to stand for election. Next returns
// the number of ticks to wait before the next attempt; Reset is called when
// the group is healthy again. Implementations may be random (jitter); tests
// pass deterministic ones.
type Backoff interface {
	Next() int
	Reset()
}

// Config describes one node. All durations are in ticks.
type Config struct {
	// ID is this member; it must be in Members.
	ID      string
	Members []Member
	// Quorum is the number of votes (and acknowledgements) a leader needs,
	// itself included. 0 means a majority of Members.
	Quorum int
	// HeartbeatTicks is H: a leader sends a heartbeat every H ticks.
	HeartbeatTicks int
	// ElectionTicks is D: a member suspects its leader after D ticks of
	// silence, and grants no vote to another member before that.
	ElectionTicks int
	// LeaseTicks: a leader steps down when no quorum has acknowledged a
	// heartbeat sent within the last LeaseTicks ticks. LeaseTicks +
	// HeartbeatTicks must stay below ElectionTicks: a leader's lease ends
	// before any member that acknowledged it may vote again (that needs
	// LeaseTicks < ElectionTicks - 1, a member's D counting from the tick
	// before it heard the heartbeat), and a heartbeat period more is left
	// for the leader's work to be gone and for clocks that run at slightly
	// different rates. An agent whose wall-clock lease is one tick shorter
	// than LeaseTicks gets L + H < D - 1 tick.
	LeaseTicks int
	// AnswerTicks bounds each wait of an election: for an OK, for a
	// COORDINATOR, for votes.
	AnswerTicks int
	// RingHopTicks bounds how long a Ring member waits for its successor to
	// acknowledge the token before it skips that successor for the next one.
	// 0 means AnswerTicks/3 (at least 1): a hop is one message and one
	// answer, and several dead successors in a row must fit in the time the
	// other members wait for the round to be decided (AnswerTicks). It must
	// not exceed AnswerTicks. Bully ignores it.
	RingHopTicks int
	// Preemption and HoldDownTicks set how a returning higher-ranked member
	// takes over.
	Preemption    Preemption
	HoldDownTicks int
	// Backoff spaces failed elections and the re-standing of a member that
	// lost leadership; nil means a fixed wait of ElectionTicks.
	Backoff Backoff
	// HardState is the persisted term and vote to start from.
	HardState HardState
	// Drained starts the node drained (see Node.Drain): a member whose
	// drained flag was persisted does not stand even once after a restart.
	Drained bool
	// Witnesses names the members that vote, pre-vote and acknowledge
	// heartbeats but never lead (a two-gateway site's third vote). Every
	// member is given the same list. A witness never stands, whatever
	// Drain says; every member knows the witnesses from the start, so none
	// waits for a witness to stand and no leader hands leadership to one.
	// Quorum counts witnesses like any member. At least one member must
	// not be a witness.
	Witnesses []string
	// StartWaitTicks is how long after it starts the node grants no vote
	// and does not stand, as if it had just heard a leader: what it
	// acknowledged before it went down binds it for the D it said then
	// (Message.Promise). 0 means ElectionTicks; a value below it counts as
	// ElectionTicks. A member whose D is shorter than in its last run
	// passes the old one.
	StartWaitTicks int
}

// validate checks c and fills defaults; it returns one precise error per rule.
func (c *Config) validate() error {
	if !ValidID(c.ID) {
		return fmt.Errorf("election: invalid id %q", c.ID)
	}
	if c.StartWaitTicks < 0 {
		return fmt.Errorf("election: StartWaitTicks (%d) is negative", c.StartWaitTicks)
	}
	if len(c.Members) == 0 {
		return errors.New("election: no members")
	}
	seen := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		if !ValidID(m.ID) {
			return fmt.Errorf("election: invalid member id %q", m.ID)
		}
		if seen[m.ID] {
			return fmt.Errorf("election: member %q listed twice", m.ID)
		}
		seen[m.ID] = true
	}
	if !seen[c.ID] {
		return fmt.Errorf("election: id %q is not a member", c.ID)
	}
	witness := make(map[string]bool, len(c.Witnesses))
	for _, w := range c.Witnesses {
		if !seen[w] {
			return fmt.Errorf("election: witness %q is not a member", w)
		}
		if witness[w] {
			return fmt.Errorf("election: witness %q listed twice", w)
		}
		witness[w] = true
	}
	if len(witness) == len(c.Members) {
		return errors.New("election: every member is a witness: no member may lead")
	}
	if c.Quorum == 0 {
		c.Quorum = Majority(len(c.Members))
	}
	if c.Quorum < 1 || c.Quorum > len(c.Members) {
		return fmt.Errorf("election: quorum %d outside 1..%d", c.Quorum, len(c.Members))
	}
	if c.HeartbeatTicks < 1 {
		return errors.New("election: HeartbeatTicks must be at least 1")
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return errors.New("election: ElectionTicks must exceed HeartbeatTicks")
	}
	if c.LeaseTicks <= c.HeartbeatTicks || c.LeaseTicks+c.HeartbeatTicks >= c.ElectionTicks {
		return fmt.Errorf("election: LeaseTicks (%d) must exceed HeartbeatTicks (%d) and LeaseTicks + HeartbeatTicks must stay below ElectionTicks (%d)",
			c.LeaseTicks, c.HeartbeatTicks, c.ElectionTicks)
	}
	if c.AnswerTicks < 1 {
		return errors.New("election: AnswerTicks must be at least 1")
	}
	if c.RingHopTicks == 0 {
		c.RingHopTicks = max(1, c.AnswerTicks/3)
	}
	if c.RingHopTicks < 1 || c.RingHopTicks > c.AnswerTicks {
		return fmt.Errorf("election: RingHopTicks %d outside 1..AnswerTicks (%d)", c.RingHopTicks, c.AnswerTicks)
	}
	if c.HoldDownTicks < 0 {
		return errors.New("election: HoldDownTicks must not be negative")
	}
	if c.HardState.Term > MaxTerm {
		return fmt.Errorf("election: persisted term %d is above MaxTerm %d", c.HardState.Term, MaxTerm)
	}
	if c.HardState.VotedFor != "" && !seen[c.HardState.VotedFor] {
		return fmt.Errorf("election: persisted vote for %q, who is not a member", c.HardState.VotedFor)
	}
	return nil
}

// Majority returns floor(n/2)+1.
func Majority(n int) int { return int(quorum.Majority(n)) }
