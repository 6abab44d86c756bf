package agent

import "time"

// StatusReport is the /status document and the reply to a NATS status
// request. It is part of the operating contract: fields are only ever added.
type StatusReport struct {
	ID        string         `json:"id"`
	Group     string         `json:"group"`
	Algorithm string         `json:"algorithm"`
	Role      string         `json:"role"`
	Leader    string         `json:"leader"`
	Term      uint64         `json:"term"`
	Quorum    QuorumReport   `json:"quorum"`
	Members   []MemberReport `json:"members"`
	// IslandMode is true when the group runs without a quorum (quorum: none):
	// a partition can then elect two leaders.
	IslandMode bool `json:"island_mode"`
	// LeaseRemainingMS is, on a leader, how long its lease still runs.
	LeaseRemainingMS int64 `json:"lease_remaining_ms"`
	// NATSConnected tells whether the agent's NATS connection is up.
	NATSConnected bool `json:"nats_connected"`
	// AlgorithmMismatch lists members refused because they run another
	// election algorithm than this agent.
	AlgorithmMismatch []AlgorithmMismatch `json:"algorithm_mismatch,omitempty"`
	Version           string              `json:"version"`
	Time              time.Time           `json:"time"`
	// Drained is true while this member is drained (edge-agent drain): it
	// never stands for election until undrained.
	Drained bool `json:"drained"`
	// DuplicateInstance names another process heard speaking with this
	// member's id, while this one stands aside because of it.
	DuplicateInstance string `json:"duplicate_instance,omitempty"`
	// NoLeaderReason says, when this member knows no leader, what it can
	// tell of why (drained, standing aside).
	NoLeaderReason string `json:"no_leader_reason,omitempty"`
	// Preemption and HoldDownMS are the group's preemption policy
	// (hold-down, never, immediate) and hold-down, as this member runs
	// them: whether a transfer or resign will be undone.
	Preemption string `json:"preemption"`
	HoldDownMS int64  `json:"hold_down_ms"`
}

// QuorumReport gives the quorum size, the members believed alive and
// whether they are enough.
type QuorumReport struct {
	Size int  `json:"size"`
	Live int  `json:"live"`
	OK   bool `json:"ok"`
}

// MemberReport is one member as seen by the reporting agent.
type MemberReport struct {
	ID         string `json:"id"`
	Priority   int    `json:"priority"`
	Alive      bool   `json:"alive"`
	LastSeenMS int64  `json:"last_seen_ms"` // -1 when never seen
	// Drained: the member is drained, as far as the reporting agent knows
	// (itself, or a leader told by the member's acknowledgements).
	Drained bool `json:"drained,omitempty"`
}
