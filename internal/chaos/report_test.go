package chaos

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/journalcheck"
)

// samples is a set of measured durations.
type samples []time.Duration

// percentile returns the nearest-rank percentile p (0..100), or 0 if empty.
func (s samples) percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	rank := int(p/100*float64(len(c))+0.999999) - 1
	return c[max(0, min(rank, len(c)-1))]
}

func (s samples) max() time.Duration { return s.percentile(100) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// p50max formats "name_p50=.. name_max=.. name_n=..".
func (s samples) p50max(name string) string {
	return fmt.Sprintf("%s_p50=%s %s_max=%s %s_n=%d", name, ms(s.percentile(50)), name, ms(s.max()), name, len(s))
}

// safety formats the journal checker's figures.
func safety(rep *journalcheck.Report) string {
	return fmt.Sprintf("overlap=%s double_votes=%d split_terms=%d term_regressions=%d lease_intervals=%d journal_entries=%d",
		ms(rep.Overlap), len(rep.DoubleVotes), len(rep.SplitTerms), len(rep.TermRegressions), len(rep.Intervals), rep.Entries)
}

// summary logs one line of figures for a scenario and, if CHAOS_REPORT names
// a file, appends the line to it, so that the figures of a whole run can be
// pasted into a closing note.
func summary(t *testing.T, scenario string, w *world, start time.Time, fields ...string) {
	t.Helper()
	n, worst := w.stalls.summary()
	line := fmt.Sprintf("chaos %s: %s | %s | machine_stalls=%d (>=%s, worst %s) seed=%d wall=%s",
		scenario, strings.Join(fields, " "), w.tm, n, stallThreshold, ms(worst), w.seed, time.Since(start).Round(time.Second))
	t.Log(line)
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("CHAOS_REPORT: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line); err != nil {
		t.Errorf("CHAOS_REPORT: %v", err)
	}
}
