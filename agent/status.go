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
	// ProtocolVersion is the highest protocol version this build speaks;
	// SiteProtocolVersion the highest every member speaks, which the
	// site runs at (lower while a member runs an older build: see
	// members[].protocol_max); ProtocolMismatch lists members refused
	// because their versions do not overlap this build's.
	ProtocolVersion     int      `json:"protocol_version"`
	SiteProtocolVersion int      `json:"site_protocol_version"`
	ProtocolMismatch    []string `json:"protocol_mismatch,omitempty"`
	// VIP lists the virtual IPs of the leader duty (leader.vip) and
	// whether this agent holds them now.
	VIP  []VIPReport `json:"vip,omitempty"`
	Time time.Time   `json:"time"`
	// LeaderChanges are the last leader changes this agent saw (at most
	// LeaderHistorySize), newest first.
	LeaderChanges []LeaderChangeRecord `json:"leader_changes"`
	// Duty is the state of the leader duty, when the agent runs one.
	Duty *DutyReport `json:"duty,omitempty"`
	// Drained is true while this member is drained (edge-agent drain): it
	// never stands for election until undrained.
	Drained bool `json:"drained"`
	// Witness is true when this member is a witness (witnesses): it votes
	// and acknowledges heartbeats but never leads; its role stays follower.
	Witness bool `json:"witness"`
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
	// Build and ProtocolMin..ProtocolMax are what the member announced
	// (omitted when nothing was heard from it; a member of an older build
	// that announces nothing shows protocol_max 1 and no build).
	Build       string `json:"build,omitempty"`
	ProtocolMin int    `json:"protocol_min,omitempty"`
	ProtocolMax int    `json:"protocol_max,omitempty"`
	// Drained: the member is drained, as far as the reporting agent knows
	// (itself, or a leader told by the member's acknowledgements).
	Drained bool `json:"drained,omitempty"`
	// Witness: the member is a witness (the group's witnesses list).
	Witness bool `json:"witness"`
	// PromiseMS is, on a leader, the D this member promised with the
	// acknowledgement the leader counts (protocol 4 and later; absent
	// otherwise). ShortensLease: that D is too short for this leader's
	// lease, which the member's acknowledgements then back for less: the
	// two gateways' heartbeat or heartbeat_misses differ.
	PromiseMS     int64 `json:"promise_ms,omitempty"`
	ShortensLease bool  `json:"shortens_lease,omitempty"`
}
