package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// LeaderHistorySize is how many leader changes an agent keeps for its
// status (StatusReport.LeaderChanges): enough for an operator to see the
// last flaps, small enough for every status answer.
const LeaderHistorySize = 20

// LeaderChangeRecord is one leader change in an agent's status, as this
// agent saw it. Its JSON form is part of the operating contract: fields are
// only ever added.
type LeaderChangeRecord struct {
	// Time is when the agent saw the change.
	Time time.Time `json:"time"`
	// Term is the agent's term at the change; with a leader, its term.
	Term uint64 `json:"term"`
	// Leader is the new leader, "" while none is known.
	Leader string `json:"leader"`
	// Previous is the leader before the change ("" for none).
	Previous string `json:"previous"`
	// Reason says in words why, as far as this agent knows: its own
	// election or step-down, or what a follower can tell (see changeReason).
	Reason string `json:"reason"`
}

// DutyReport is the state of the leader duty (the run command) of an agent
// that has one.
type DutyReport struct {
	// Running tells whether the duty's command runs now.
	Running bool `json:"running"`
	// Restarts counts the restarts of the command since the agent started
	// (edge_election_duty_restarts_total).
	Restarts uint64 `json:"restarts"`
}

// leaderHistory keeps the last LeaderHistorySize changes, oldest first.
// Its zero value is ready to use.
type leaderHistory struct {
	mu      sync.Mutex
	records []LeaderChangeRecord
}

func (h *leaderHistory) add(r LeaderChangeRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == LeaderHistorySize {
		copy(h.records, h.records[1:])
		h.records = h.records[:LeaderHistorySize-1]
	}
	h.records = append(h.records, r)
}

// list returns a copy of the records, newest first (never nil).
func (h *leaderHistory) list() []LeaderChangeRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]LeaderChangeRecord, 0, len(h.records))
	for i := len(h.records) - 1; i >= 0; i-- {
		out = append(out, h.records[i])
	}
	return out
}

// changeReason says why the leader changed from previous to leader, from
// what self knows: the events of the Ready that made the change. This
// agent's own election or step-down says exactly why; a follower only sees
// that a leader appeared or went away.
func changeReason(self, previous, leader string, events []election.Event) string {
	for _, ev := range events {
		switch {
		case ev.Kind == election.EventElectionWon && leader == self:
			return "this gateway won the election"
		case ev.Kind == election.EventSteppedDown && previous == self:
			return "this gateway stepped down: " + ev.Reason.String()
		}
	}
	switch {
	case leader == "" && previous == "":
		return ""
	case leader == "":
		return fmt.Sprintf("%s is no longer leader: it handed over, missed heartbeats or its connection closed", previous)
	case previous == "":
		return fmt.Sprintf("%s was elected", leader)
	default:
		return fmt.Sprintf("%s took over from %s", leader, previous)
	}
}
