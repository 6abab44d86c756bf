// Package journalcheck merges the leadership journals of the agents of a
// group (agent.WithJournal, `run --journal`) and checks the safety claims:
// no two agents hold a valid lease at the same time, no agent votes twice in
// a term, no term has two leaders, and no agent's persisted term goes back.
package journalcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/edge-agent/edge-agent/agent"
)

// Interval is one span during which an agent held a valid lease.
type Interval struct {
	ID         string
	Term       uint64
	Start, End int64 // Unix nanoseconds
}

// Report is what Check found.
type Report struct {
	Intervals []Interval
	// Overlap is the total time during which two or more agents held a
	// valid lease at once.
	Overlap time.Duration
	// Overlaps describes each overlapping pair.
	Overlaps []string
	// DoubleVotes lists agents that voted for two members in one term.
	DoubleVotes []string
	// SplitTerms lists terms led by two different agents.
	SplitTerms []string
	// TermRegressions lists agents whose persisted term went back.
	TermRegressions []string
	// Entries is the number of journal lines read.
	Entries int
}

// OK reports whether every safety check passed.
func (r *Report) OK() bool {
	return r.Overlap == 0 && len(r.DoubleVotes) == 0 && len(r.SplitTerms) == 0 && len(r.TermRegressions) == 0
}

func (r *Report) String() string {
	return fmt.Sprintf("%d entries, %d lease intervals, overlap %s, double votes %d, split terms %d, term regressions %d",
		r.Entries, len(r.Intervals), r.Overlap, len(r.DoubleVotes), len(r.SplitTerms), len(r.TermRegressions))
}

// ReadFiles reads journal files (one per agent, appended across restarts).
func ReadFiles(paths ...string) ([]agent.JournalEntry, error) {
	var all []agent.JournalEntry
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		es, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, es...)
	}
	return all, nil
}

// Read parses JSON lines. A torn last line (a process killed mid-write) is
// ignored; any other bad line is an error.
func Read(r io.Reader) ([]agent.JournalEntry, error) {
	var out []agent.JournalEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pendingErr error
	for n := 1; sc.Scan(); n++ {
		if pendingErr != nil {
			return nil, pendingErr
		}
		var e agent.JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			pendingErr = fmt.Errorf("line %d: %w", n, err)
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Check computes the report over the merged entries of all agents. now
// closes intervals of agents still leading when the journals were read.
func Check(entries []agent.JournalEntry, now time.Time) *Report {
	r := &Report{Entries: len(entries)}
	byAgent := map[string][]agent.JournalEntry{}
	for _, e := range entries {
		byAgent[e.ID] = append(byAgent[e.ID], e)
	}
	leaders := map[uint64]string{}
	ids := make([]string, 0, len(byAgent))
	for id := range byAgent {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		es := byAgent[id]
		sort.SliceStable(es, func(i, j int) bool { return es[i].T < es[j].T })
		votes := map[uint64]string{}
		var lastTerm uint64
		var cur *Interval
		var until int64
		closeAt := func(t int64) {
			if cur == nil {
				return
			}
			cur.End = min(t, until)
			if cur.End > cur.Start {
				r.Intervals = append(r.Intervals, *cur)
			}
			cur = nil
		}
		for _, e := range es {
			switch e.Event {
			case "state":
				if e.Term < lastTerm {
					r.TermRegressions = append(r.TermRegressions, fmt.Sprintf("%s: term %d after %d", id, e.Term, lastTerm))
				}
				lastTerm = max(lastTerm, e.Term)
				if e.VotedFor != "" {
					if v, ok := votes[e.Term]; ok && v != e.VotedFor {
						r.DoubleVotes = append(r.DoubleVotes, fmt.Sprintf("%s: term %d voted %s and %s", id, e.Term, v, e.VotedFor))
					}
					votes[e.Term] = e.VotedFor
				}
			case "lead":
				closeAt(e.T)
				if l, ok := leaders[e.Term]; ok && l != id {
					r.SplitTerms = append(r.SplitTerms, fmt.Sprintf("term %d led by %s and %s", e.Term, l, id))
				}
				leaders[e.Term] = id
				cur = &Interval{ID: id, Term: e.Term, Start: e.T}
				until = e.Until
			case "renew":
				if cur != nil && e.Term == cur.Term && e.Until > until {
					until = e.Until
				}
			case "stop":
				closeAt(e.T)
			}
		}
		closeAt(now.UnixNano()) // still leading, or killed: the lease ran to its end
	}
	r.Overlap, r.Overlaps = overlap(r.Intervals)
	return r
}

// overlap sweeps the intervals and sums the time covered by two or more.
func overlap(iv []Interval) (time.Duration, []string) {
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	for _, i := range iv {
		edges = append(edges, edge{i.Start, +1}, edge{i.End, -1})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].t != edges[b].t {
			return edges[a].t < edges[b].t
		}
		return edges[a].delta < edges[b].delta // an end at t closes before a start at t
	})
	var total int64
	active := 0
	var prev int64
	for _, e := range edges {
		if active >= 2 {
			total += e.t - prev
		}
		active += e.delta
		prev = e.t
	}
	var pairs []string
	for a := 0; a < len(iv); a++ {
		for b := a + 1; b < len(iv); b++ {
			if iv[a].ID != iv[b].ID && iv[a].Start < iv[b].End && iv[b].Start < iv[a].End {
				o := min(iv[a].End, iv[b].End) - max(iv[a].Start, iv[b].Start)
				pairs = append(pairs, fmt.Sprintf("%s(term %d) and %s(term %d) for %s", iv[a].ID, iv[a].Term, iv[b].ID, iv[b].Term, time.Duration(o)))
			}
		}
	}
	return time.Duration(total), pairs
}

// Gaps returns the spans within [from, to] (Unix nanoseconds) during which
// no agent held a valid lease: the site had no leader. Each is an Interval
// without ID or Term.
func Gaps(iv []Interval, from, to int64) []Interval {
	s := make([]Interval, len(iv))
	copy(s, iv)
	sort.Slice(s, func(a, b int) bool { return s[a].Start < s[b].Start })
	var out []Interval
	at := from // covered up to here
	for _, i := range s {
		if i.End <= at {
			continue
		}
		if i.Start > at {
			if i.Start >= to {
				break
			}
			out = append(out, Interval{Start: at, End: i.Start})
		}
		at = i.End
		if at >= to {
			return out
		}
	}
	if at < to {
		out = append(out, Interval{Start: at, End: to})
	}
	return out
}
