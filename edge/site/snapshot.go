package site

import (
	"time"

	"github.com/edge-agent/edge-agent/agent"
)

// Snapshot is what the page shows: the serving agent's view of its group,
// with each member's own report where it answered. GET /site.json returns
// one; GET /events streams them.
type Snapshot struct {
	// ID is the member that serves the page.
	ID        string `json:"id"`
	Group     string `json:"group"`
	Algorithm string `json:"algorithm"`
	// Leader and Term are the serving agent's: "" while it knows no leader.
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// LeaseRemainingMS is the leader's own figure (its last answer, less
	// the time since it was asked), -1 when unknown (no leader, or it did
	// not answer).
	LeaseRemainingMS int64              `json:"lease_remaining_ms"`
	Quorum           agent.QuorumReport `json:"quorum"`
	IslandMode       bool               `json:"island_mode"`
	NATSConnected    bool               `json:"nats_connected"`
	// Duty is the leader's duty as the leader reports it; nil when it runs
	// none or did not answer (DutyKnown tells which).
	Duty      *agent.DutyReport `json:"duty"`
	DutyKnown bool              `json:"duty_known"`
	Members   []Member          `json:"members"`
	// LeaderChanges are the serving agent's last leader changes, newest
	// first.
	LeaderChanges []agent.LeaderChangeRecord `json:"leader_changes"`
	// Time is when the snapshot was made; AskedAt when the other members
	// were last asked (zero: not yet, or nobody to ask).
	Time    time.Time `json:"time"`
	AskedAt time.Time `json:"asked_at"`
}

// Member is one member of the group on the page.
type Member struct {
	ID       string `json:"id"`
	Priority int    `json:"priority"`
	// Self marks the member that serves the page.
	Self bool `json:"self"`
	// Alive and LastSeenMS are the serving agent's view (-1: never seen;
	// 0 for itself).
	Alive      bool  `json:"alive"`
	LastSeenMS int64 `json:"last_seen_ms"`
	// Answered tells whether the fields below are the member's own, from
	// its answer of the last round; otherwise they are empty.
	Answered bool   `json:"answered"`
	Role     string `json:"role"`
	Version  string `json:"version"`
	Term     uint64 `json:"term"`
	// Leader is whom the member names as leader.
	Leader        string            `json:"leader"`
	NATSConnected bool              `json:"nats_connected"`
	Duty          *agent.DutyReport `json:"duty"`
}

// build merges the serving agent's status local with the other members'
// reports (asked at askedAt) into a snapshot made at now.
func build(local agent.StatusReport, reports []agent.StatusReport, askedAt, now time.Time) Snapshot {
	s := Snapshot{
		ID: local.ID, Group: local.Group, Algorithm: local.Algorithm,
		Leader: local.Leader, Term: local.Term, LeaseRemainingMS: -1,
		Quorum: local.Quorum, IslandMode: local.IslandMode, NATSConnected: local.NATSConnected,
		LeaderChanges: local.LeaderChanges, Time: now, AskedAt: askedAt,
		Members: []Member{},
	}
	if s.LeaderChanges == nil {
		s.LeaderChanges = []agent.LeaderChangeRecord{}
	}
	own := map[string]agent.StatusReport{local.ID: local}
	for _, r := range reports {
		if r.ID != local.ID && r.Group == local.Group {
			own[r.ID] = r
		}
	}
	for _, m := range local.Members {
		pm := Member{ID: m.ID, Priority: m.Priority, Alive: m.Alive, LastSeenMS: m.LastSeenMS}
		if m.ID == local.ID {
			pm.Self, pm.Alive, pm.LastSeenMS = true, true, 0
		}
		if r, ok := own[m.ID]; ok {
			pm.Answered, pm.Role, pm.Version, pm.Term = true, r.Role, r.Version, r.Term
			pm.Leader, pm.NATSConnected, pm.Duty = r.Leader, r.NATSConnected, r.Duty
		}
		s.Members = append(s.Members, pm)
	}
	if r, ok := own[s.Leader]; ok && s.Leader != "" && r.Role == "leader" {
		s.DutyKnown, s.Duty = true, r.Duty
		s.LeaseRemainingMS = r.LeaseRemainingMS
		if r.ID != local.ID {
			// Aged on this gateway's clock: the members' wall clocks of an
			// offline site need not agree.
			s.LeaseRemainingMS = max(r.LeaseRemainingMS-now.Sub(askedAt).Milliseconds(), 0)
		}
	}
	return s
}
