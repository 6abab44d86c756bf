package agent

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// JournalEntry is one line of the leadership journal: a JSON object per
// line, with wall-clock times in Unix nanoseconds so that journals of agents
// on one machine can be merged. Events:
//
//   - "lead": this agent became leader of Term; Until is when its lease ends.
//   - "renew": the lease was extended to Until.
//   - "stop": this agent stopped leading (Reason says why). A lease is valid
//     from "lead" until the earlier of "stop" and the last Until.
//   - "state": Term and VotedFor were persisted (one line per change).
type JournalEntry struct {
	T        int64  `json:"t"`
	ID       string `json:"id"`
	Event    string `json:"ev"`
	Term     uint64 `json:"term"`
	Until    int64  `json:"until,omitempty"`
	VotedFor string `json:"voted_for,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// journal writes JournalEntry lines to w, one write per line, so that a
// process killed at any moment leaves only whole lines behind.
type journal struct {
	mu sync.Mutex
	w  io.Writer
	id string
}

func (j *journal) write(e JournalEntry) {
	if j == nil {
		return
	}
	e.ID = j.id
	if e.T == 0 {
		e.T = time.Now().UnixNano()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	j.mu.Lock()
	_, _ = j.w.Write(b)
	j.mu.Unlock()
}

// WithJournal makes the agent append its leadership intervals, lease
// renewals and persisted votes to w as JSON lines (see JournalEntry). Fault
// tests merge the journals of all agents to measure lease overlap and double
// votes; operators can use it as an audit log.
func WithJournal(w io.Writer) Option {
	return func(a *Agent) error {
		if w != nil {
			a.out.journal = &journal{w: w, id: a.cfg.ID}
		}
		return nil
	}
}

// wallUntil converts a lease end on the agent's monotonic clock to wall time.
func (a *Agent) wallUntil(leaseEnd time.Duration) int64 {
	return time.Now().Add(leaseEnd - a.mono()).UnixNano()
}
