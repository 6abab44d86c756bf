// Package dutycheck measures, from a leader duty's own output, whether the
// duty ever ran on two gateways at once. The fault tests' duty appends one
// line per write to a file shared by every gateway of the site:
//
//	ID TERM UNIXNANOS
//
// (the gateway's member id, the term it leads, the wall-clock time of the
// write), every cadence (10 ms). A line at time t says that gateway's duty
// ran during [t, t+cadence): the overlap is the total time covered by two or
// more gateways' lines at once. A duty that stopped writing more than one
// cadence before the next gateway's first line does not overlap it.
package dutycheck

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Line is one write of the duty.
type Line struct {
	ID   string
	Term uint64
	At   int64 // Unix nanoseconds
}

// ReadFile reads the duty's output file.
func ReadFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Read parses lines. A line that is not three fields (one being written
// when a process was killed) is skipped and counted in Report.Torn by Check;
// Read returns those as a Line with an empty ID.
func Read(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			out = append(out, Line{})
			continue
		}
		term, err1 := strconv.ParseUint(fs[1], 10, 64)
		at, err2 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil {
			out = append(out, Line{})
			continue
		}
		out = append(out, Line{ID: fs[0], Term: term, At: at})
	}
	return out, sc.Err()
}

// Report is what Check found.
type Report struct {
	Lines int
	Torn  int // lines that were not ID TERM NANOS
	// Overlap is the total time during which two or more gateways' duties
	// ran, each line counting for one cadence from its time.
	Overlap time.Duration
	// Overlaps describes each stretch of overlap.
	Overlaps []string
	// Changes counts the times the writing gateway changed, in time order.
	Changes int
	// MinGap is the shortest time from a gateway's last line to the next
	// gateway's first line, over all changes (0 if there were none).
	MinGap time.Duration
	// SplitTerms lists terms written by two gateways.
	SplitTerms []string
}

// Check measures lines written at the given cadence.
func Check(lines []Line, cadence time.Duration) Report {
	var r Report
	var ls []Line
	for _, l := range lines {
		if l.ID == "" {
			r.Torn++
			continue
		}
		ls = append(ls, l)
	}
	r.Lines = len(ls)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].At < ls[j].At })

	termOf := map[uint64]string{}
	for _, l := range ls {
		if prev, ok := termOf[l.Term]; ok && prev != l.ID {
			r.SplitTerms = append(r.SplitTerms, fmt.Sprintf("term %d written by %s and %s", l.Term, prev, l.ID))
		}
		termOf[l.Term] = l.ID
	}
	for i := 1; i < len(ls); i++ {
		if ls[i].ID != ls[i-1].ID {
			gap := time.Duration(ls[i].At - ls[i-1].At)
			if r.Changes == 0 || gap < r.MinGap {
				r.MinGap = gap
			}
			r.Changes++
		}
	}

	// Each gateway's coverage: the union of [At, At+cadence), merged.
	type span struct{ start, end int64 }
	cover := map[string][]span{}
	for _, l := range ls {
		s := cover[l.ID]
		if n := len(s); n > 0 && l.At <= s[n-1].end {
			s[n-1].end = max(s[n-1].end, l.At+int64(cadence))
		} else {
			s = append(s, span{l.At, l.At + int64(cadence)})
		}
		cover[l.ID] = s
	}
	// Sweep: time covered by two or more gateways.
	type event struct {
		at    int64
		delta int
		id    string
	}
	var evs []event
	for id, spans := range cover {
		for _, s := range spans {
			evs = append(evs, event{s.start, +1, id}, event{s.end, -1, id})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta // an end before a start at the same instant
	})
	active := map[string]bool{}
	var from int64
	for _, e := range evs {
		if len(active) >= 2 {
			d := time.Duration(e.at - from)
			if d > 0 {
				r.Overlap += d
				ids := make([]string, 0, len(active))
				for id := range active {
					ids = append(ids, id)
				}
				sort.Strings(ids)
				r.Overlaps = append(r.Overlaps, fmt.Sprintf("%s ran together for %s from %s",
					strings.Join(ids, ", "), d, time.Unix(0, from).UTC().Format("15:04:05.000000")))
			}
		}
		if e.delta > 0 {
			active[e.id] = true
		} else {
			delete(active, e.id)
		}
		from = e.at
	}
	return r
}
