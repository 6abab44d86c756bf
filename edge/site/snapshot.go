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
	// the time since it came), -1 when unknown (no leader, or it did not
	// answer).
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
	// Time is when the snapshot was made.
	Time time.Time `json:"time"`
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
	// Witness: the member votes but never leads (the group's witnesses).
	Witness bool `json:"witness"`
	// Drained: the member is drained (edge-agent drain), from its own
	// answer, or as far as the serving agent knows.
	Drained bool `json:"drained"`
	// Answered tells whether the fields below are the member's own, from
	// its answer of the last round; otherwise they are empty. AnswerAgeMS
	// is how old that answer is (on the serving gateway's clock).
	Answered    bool   `json:"answered"`
	AnswerAgeMS int64  `json:"answer_age_ms"`
	Role        string `json:"role"`
	Version     string `json:"version"`
	Term        uint64 `json:"term"`
	// Leader is whom the member names as leader.
	Leader        string            `json:"leader"`
	NATSConnected bool              `json:"nats_connected"`
	Duty          *agent.DutyReport `json:"duty"`
}

// build merges the serving agent's status local with the other members'
// answers into a snapshot made at now.
func build(local agent.StatusReport, answers []Answer, now time.Time) Snapshot {
	s := Snapshot{
		ID: local.ID, Group: local.Group, Algorithm: local.Algorithm,
		Leader: local.Leader, Term: local.Term, LeaseRemainingMS: -1,
		Quorum: local.Quorum, IslandMode: local.IslandMode, NATSConnected: local.NATSConnected,
		LeaderChanges: local.LeaderChanges, Time: now,
		Members: []Member{},
	}
	if s.LeaderChanges == nil {
		s.LeaderChanges = []agent.LeaderChangeRecord{}
	}
	own := map[string]Answer{local.ID: {Report: local, At: now}}
	for _, a := range answers {
		if a.Report.ID != local.ID && a.Report.Group == local.Group {
			own[a.Report.ID] = a
		}
	}
	for _, m := range local.Members {
		pm := Member{ID: m.ID, Priority: m.Priority, Alive: m.Alive, LastSeenMS: m.LastSeenMS, Witness: m.Witness, Drained: m.Drained}
		if m.ID == local.ID {
			pm.Self, pm.Alive, pm.LastSeenMS = true, true, 0
		}
		if a, ok := own[m.ID]; ok {
			r := a.Report
			pm.Answered, pm.AnswerAgeMS = true, max(now.Sub(a.At).Milliseconds(), 0)
			pm.Role, pm.Version, pm.Term = r.Role, r.Version, r.Term
			pm.Leader, pm.NATSConnected, pm.Duty = r.Leader, r.NATSConnected, r.Duty
			pm.Drained = pm.Drained || r.Drained
		}
		s.Members = append(s.Members, pm)
	}
	if a, ok := own[s.Leader]; ok && s.Leader != "" && a.Report.Role == "leader" {
		s.DutyKnown, s.Duty = true, a.Report.Duty
		// Aged on this gateway's clock: the members' wall clocks of an
		// offline site need not agree.
		s.LeaseRemainingMS = max(a.Report.LeaseRemainingMS-now.Sub(a.At).Milliseconds(), 0)
	}
	return s
}
