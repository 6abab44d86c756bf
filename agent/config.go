package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// Algorithm names accepted in Config.Algorithm.
const (
	AlgorithmBully = "bully"
	AlgorithmRing  = "ring"
)

// Preemption policies accepted in Config.Preemption.
const (
	PreemptHoldDown  = "hold-down"
	PreemptNever     = "never"
	PreemptImmediate = "immediate"
)

// DefaultSubjectPrefix is the NATS subject prefix used when none is set.
const DefaultSubjectPrefix = "edge.election"

// Config is the validated description of one agent. Durations are wall-clock;
// the agent turns them into ticks of Heartbeat/TicksPerHeartbeat.
type Config struct {
	// ID is this gateway's member id; it must appear in Members.
	ID string
	// Group names the election; it becomes a NATS subject token.
	Group string
	// Members is the static membership of the group.
	Members []election.Member
	// Witnesses names the members that vote and acknowledge heartbeats
	// but never lead (election.Config.Witnesses), the same on every
	// member. At least one member is not a witness.
	Witnesses []string
	// Algorithm is "bully" (default) or "ring".
	Algorithm string
	// Quorum is the number of members whose votes (and acknowledgements) a
	// leader needs. 0 means a majority of Members. IslandMode instead sets
	// it to 1, which lets a partition elect two leaders.
	Quorum     int
	IslandMode bool
	// Heartbeat is H, the leader's heartbeat period.
	Heartbeat time.Duration
	// HeartbeatMisses is k: a member suspects the leader after k*H of silence.
	HeartbeatMisses int
	// Lease is L, how long a leader may act on acknowledgements from a
	// quorum. 0 picks k*H - H - 2 ticks, which keeps L + H < D.
	Lease time.Duration
	// AnswerTimeout bounds the wait for an OK, a COORDINATOR or votes.
	// 0 picks H.
	AnswerTimeout time.Duration
	// Preemption is how a returning higher-ranked member takes over:
	// "hold-down" (default), "never" or "immediate".
	Preemption string
	// HoldDown is how long a higher-ranked member must stay healthy before a
	// hold-down handover. 0 picks 10*H.
	HoldDown time.Duration
	// StateDir holds the persisted term and vote.
	StateDir string
	// SubjectPrefix prefixes every NATS subject (default "edge.election").
	SubjectPrefix string
	// DisableFastFailover ignores the server's disconnect reports: failures
	// are then detected by missed heartbeats alone.
	DisableFastFailover bool
	// Fence is how long a leader elected because the server reported its
	// predecessor's connection closed waits before it acts. 0 picks one tick.
	Fence time.Duration
	// SigningSeedFile, when set, is this member's nkey seed file: every
	// election message is then signed, and only messages signed by their
	// sender's key in MemberKeys (and never replayed) are accepted.
	SigningSeedFile string
	// MemberKeys pins each member's nkey public key (id -> key).
	MemberKeys map[string]string
	// OperatorKeys names the operators' tools allowed on the control
	// subjects besides the members (name -> nkey public key). With
	// signing on, a control request must be signed by a member's or an
	// operator's key; it needs SigningSeedFile.
	OperatorKeys map[string]string
}

// TicksPerHeartbeat is how many logical ticks the agent runs per heartbeat
// period; it sets the resolution of every timeout.
const TicksPerHeartbeat = 10

// Tick returns the duration of one logical tick.
func (c *Config) Tick() time.Duration { return c.Heartbeat / TicksPerHeartbeat }

// LeaseTicks is the lease the election core counts, in ticks: one tick
// longer than the wall-clock lease (rounded up), so that the core never leads
// past what IsLeader reports.
func (c *Config) LeaseTicks() int { return int((c.Lease+c.Tick()-1)/c.Tick()) + 1 }

// SuspectAfter returns D = k*H.
func (c *Config) SuspectAfter() time.Duration {
	return time.Duration(c.HeartbeatMisses) * c.Heartbeat
}

var groupPattern = election.ValidID

// Validate fills defaults and checks every field and cross-field rule. The
// error names the offending key, as the config file spells it.
func (c *Config) Validate() error {
	if c.Algorithm == "" {
		c.Algorithm = AlgorithmBully
	}
	if c.Preemption == "" {
		c.Preemption = PreemptHoldDown
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = time.Second
	}
	if c.HeartbeatMisses == 0 {
		c.HeartbeatMisses = 3
	}
	for _, check := range []func() error{c.validateMembers, c.validateChoices, c.validateQuorum, c.validateTiming} {
		if err := check(); err != nil {
			return err
		}
	}
	if c.StateDir == "" {
		return errors.New("state_dir: a state directory is required (the term and vote are persisted there)")
	}
	return nil
}

// validateMembers checks the member's id, the group and the member list.
func (c *Config) validateMembers() error {
	if !election.ValidID(c.ID) {
		return fmt.Errorf("id: %q is not a valid member id (1-64 of A-Z a-z 0-9 _ -)", c.ID)
	}
	if !groupPattern(c.Group) {
		return fmt.Errorf("group: %q is not a valid group name (1-64 of A-Z a-z 0-9 _ -)", c.Group)
	}
	if len(c.Members) == 0 {
		return errors.New("members: at least one member is required")
	}
	if len(c.Members) > wire.WireMaxMembers {
		return fmt.Errorf("members: %d members exceed the limit of %d", len(c.Members), wire.WireMaxMembers)
	}
	seen := map[string]bool{}
	self := false
	for _, m := range c.Members {
		if !election.ValidID(m.ID) {
			return fmt.Errorf("members: %q is not a valid member id", m.ID)
		}
		if seen[m.ID] {
			return fmt.Errorf("members: %q is listed twice", m.ID)
		}
		seen[m.ID] = true
		self = self || m.ID == c.ID
	}
	if !self {
		return fmt.Errorf("id: %q is not in members", c.ID)
	}
	return c.validateWitnesses(seen)
}

// validateWitnesses checks that every witness is a member, listed once, and
// that some member may lead.
func (c *Config) validateWitnesses(member map[string]bool) error {
	witness := map[string]bool{}
	for _, w := range c.Witnesses {
		if !member[w] {
			return fmt.Errorf("witnesses: %q is not in members", w)
		}
		if witness[w] {
			return fmt.Errorf("witnesses: %q is listed twice", w)
		}
		witness[w] = true
	}
	switch {
	case len(witness) > 0 && len(c.Members) == 1:
		return fmt.Errorf("witnesses: %q is the only member: a witness never leads, so the group would have no leader", c.Witnesses[0])
	case len(witness) == len(c.Members) && len(witness) > 0:
		return errors.New("witnesses: every member is a witness: a witness never leads, so the group would have no leader; at least one member must not be a witness")
	}
	return nil
}

// IsWitness reports whether member id is a witness.
func (c *Config) IsWitness(id string) bool { return slices.Contains(c.Witnesses, id) }

// validateChoices checks the algorithm, the preemption and the subject
// prefix.
func (c *Config) validateChoices() error {
	switch c.Algorithm {
	case AlgorithmBully, AlgorithmRing:
	default:
		return fmt.Errorf("algorithm: %q is not one of bully, ring", c.Algorithm)
	}
	switch c.Preemption {
	case PreemptHoldDown, PreemptNever, PreemptImmediate:
	default:
		return fmt.Errorf("preemption: %q is not one of hold-down, never, immediate", c.Preemption)
	}
	for _, tok := range strings.Split(c.SubjectPrefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("subject_prefix: %q is not a valid NATS subject prefix", c.SubjectPrefix)
		}
	}
	return nil
}

// validateQuorum fills and checks the quorum.
func (c *Config) validateQuorum() error {
	n := len(c.Members)
	if c.IslandMode {
		if c.Quorum != 0 && c.Quorum != 1 {
			return errors.New("quorum: island mode (none) cannot be combined with a quorum size")
		}
		c.Quorum = 1
	} else if c.Quorum == 0 {
		c.Quorum = n/2 + 1
	}
	if c.Quorum < 1 || c.Quorum > n {
		return fmt.Errorf("quorum: %d is outside 1..%d", c.Quorum, n)
	}
	if !c.IslandMode && c.Quorum <= n/2 {
		return fmt.Errorf("quorum: %d of %d members is not a majority; two leaders could be elected (use quorum: none to accept that)", c.Quorum, n)
	}
	return nil
}

// validateTiming fills and checks the heartbeat, the lease and the other
// durations.
func (c *Config) validateTiming() error {
	if c.Heartbeat < 10*time.Millisecond || c.Heartbeat > time.Minute {
		return fmt.Errorf("heartbeat: %s is outside 10ms..1m", c.Heartbeat)
	}
	if c.HeartbeatMisses < 2 || c.HeartbeatMisses > 100 {
		return fmt.Errorf("heartbeat_misses: %d is outside 2..100", c.HeartbeatMisses)
	}
	tick := c.Tick()
	d := c.SuspectAfter()
	if c.Lease == 0 {
		c.Lease = d - c.Heartbeat - 2*tick
	}
	if c.Lease <= c.Heartbeat {
		return fmt.Errorf("lease: %s must exceed heartbeat %s (raise heartbeat_misses to 3 or more)", c.Lease, c.Heartbeat)
	}
	if c.Lease+c.Heartbeat >= d-tick || c.LeaseTicks()+TicksPerHeartbeat >= c.HeartbeatMisses*TicksPerHeartbeat {
		return fmt.Errorf("lease: %s plus heartbeat %s must stay below heartbeat_misses*heartbeat %s minus one tick", c.Lease, c.Heartbeat, d)
	}
	if c.AnswerTimeout == 0 {
		c.AnswerTimeout = c.Heartbeat
	}
	if c.AnswerTimeout < tick || c.AnswerTimeout > d {
		return fmt.Errorf("answer_timeout: %s is outside %s..%s", c.AnswerTimeout, tick, d)
	}
	if c.Fence == 0 {
		c.Fence = tick
	}
	if c.Fence < 0 || c.Fence >= c.Lease {
		return fmt.Errorf("fast_failover_fence: %s is outside 0..lease %s", c.Fence, c.Lease)
	}
	if c.HoldDown == 0 {
		c.HoldDown = 10 * c.Heartbeat
	}
	if c.HoldDown < 0 {
		return fmt.Errorf("hold_down: %s is negative", c.HoldDown)
	}
	return nil
}
