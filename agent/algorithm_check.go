package agent

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-agent/edge-agent/election"
)

// A member configured with another algorithm than the rest of its group
// follows rules the others do not: a Bully member ignores Ring tokens, a
// Ring member ignores ELECTION. Terms and votes are the same in both, so
// such a member could still vote and be voted for, and the group would
// limp along on rules no one chose. The algorithm guard stops that: a member
// seen sending the other algorithm's messages is refused outright, every
// message of it, for AlgorithmRefusal after the last such message. It then
// gets no vote from this agent and gives none that counts, and the refusal
// shows in the log, in /status and in a metric.
//
// Members announce their algorithm in every message they send (the wire's
// "alg"), so a misconfigured member is found with its first heartbeat or
// acknowledgement. Failing that (an older agent), the message types give it
// away: ELECTION and OK are Bully's, RING_TOKEN and RING_ACK are Ring's.

// AlgorithmRefusal is how long a member stays refused after its last message
// of another algorithm: long enough that it cannot drift back in between
// elections, short enough that a member restarted with the right algorithm
// rejoins without anyone else restarting.
const AlgorithmRefusal = 10 * time.Minute

// MessageAlgorithm returns the algorithm whose members send messages of
// type t (AlgorithmBully or AlgorithmRing), or "" for the types both send.
func MessageAlgorithm(t election.MsgType) string {
	switch t {
	case election.MsgElection, election.MsgOK:
		return AlgorithmBully
	case election.MsgRingToken, election.MsgRingAck:
		return AlgorithmRing
	}
	return ""
}

// AlgorithmMismatchError says that a member of the group runs another
// election algorithm than this agent; its messages are refused.
type AlgorithmMismatchError struct {
	Member    string // the refused member
	Algorithm string // what it runs, as its messages show
	Ours      string // what this agent runs
}

// Error implements error.
func (e *AlgorithmMismatchError) Error() string {
	return fmt.Sprintf("agent: member %s runs the %s algorithm but this group runs %s: its messages are refused until it is reconfigured",
		e.Member, e.Algorithm, e.Ours)
}

// AlgorithmMismatch is one refused member, as /status reports it.
type AlgorithmMismatch struct {
	Member    string    `json:"member"`
	Algorithm string    `json:"algorithm"`
	Until     time.Time `json:"until"`
}

// algorithmGuard refuses the members seen running another algorithm. It is
// safe for concurrent use (the loop checks, status reads).
type algorithmGuard struct {
	ours  string
	gauge prometheus.Gauge

	mu      sync.Mutex
	refused map[string]AlgorithmMismatch
}

// newAlgorithmGuard returns the guard of an agent running ours; it registers
// edge_election_algorithm_mismatch_members on reg.
func newAlgorithmGuard(ours string, f groupSeries) *algorithmGuard {
	return &algorithmGuard{
		ours: ours,
		gauge: f.gauge(prometheus.GaugeOpts{
			Name: "edge_election_algorithm_mismatch_members",
			Help: "Members refused because their messages show another election algorithm than this agent's.",
		}),
		refused: map[string]AlgorithmMismatch{},
	}
}

// check decides on m, received at now. err is nil if m may be applied, or
// an *AlgorithmMismatchError if its sender runs another algorithm (shown by
// m itself or by an earlier message). first is true when m is what revealed
// the mismatch (the caller logs it as an error then, and only at debug
// level afterwards).
func (g *algorithmGuard) check(m election.Message, now time.Time) (first bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(now)
	r, known := g.refused[m.From]
	alg := m.Algorithm // announced by the sender
	if alg == "" {
		alg = MessageAlgorithm(m.Type)
	}
	if alg != "" && alg != g.ours {
		r = AlgorithmMismatch{Member: m.From, Algorithm: alg, Until: now.Add(AlgorithmRefusal)}
		g.refused[m.From] = r
		g.gauge.Set(float64(len(g.refused)))
		return !known, &AlgorithmMismatchError{Member: m.From, Algorithm: alg, Ours: g.ours}
	}
	if known {
		return false, &AlgorithmMismatchError{Member: m.From, Algorithm: r.Algorithm, Ours: g.ours}
	}
	return false, nil
}

func (g *algorithmGuard) expire(now time.Time) {
	for id, r := range g.refused {
		if !now.Before(r.Until) {
			delete(g.refused, id)
		}
	}
	g.gauge.Set(float64(len(g.refused)))
}

// mismatches returns the members refused at now, by id.
func (g *algorithmGuard) mismatches(now time.Time) []AlgorithmMismatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(now)
	out := make([]AlgorithmMismatch, 0, len(g.refused))
	for _, r := range g.refused {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	return out
}
