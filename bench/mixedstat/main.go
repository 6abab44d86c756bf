// Command mixedstat pools the runs of bench/mixed.sh for one algorithm and
// fault: each configuration (0, 1, 2, 3 or 4 members on the previous
// release) was measured in several short runs of bench/failover, interleaved
// with the other configurations' runs so that a change of machine load falls
// on all of them alike. It reads each run's -json file (benchresult), pools
// the samples per configuration, and prints one line per configuration: p50
// and p99 over all its trials (nearest-rank), the change from the uniform
// site (configuration 0), and the leadership journals' safety counts summed
// over its runs.
//
//	mixedstat -label "ring kill" 0=a.json,b.json 1=c.json,d.json ...
//
// With -details FILE it also appends each run's own figures and where each
// configuration's slowest trial is (its run and trial number: the run's
// agent debug log, kept beside the JSON by bench/mixed.sh, has its trace).
// It exits non-zero when a run is missing or its safety counts are not
// clean.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
)

func main() {
	label := flag.String("label", "", "prefix of each line (e.g. \"ring kill\")")
	p50Bound := flag.Float64("p50-bound", 10, "mark a configuration whose p50 exceeds the uniform one's by more than this many percent")
	p99Bound := flag.Float64("p99-bound", 25, "the same for p99")
	details := flag.String("details", "", "append each run's figures and the slowest trials to this file")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: mixedstat [flags] OLD=RUN.json[,RUN.json...] ... (OLD 0 is the uniform site)")
		flag.PrintDefaults()
	}
	flag.Parse()
	var det io.Writer = io.Discard
	if *details != "" {
		f, err := os.OpenFile(*details, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mixedstat:", err)
			os.Exit(2)
		}
		defer f.Close()
		det = f
	}
	ok, err := run(os.Stdout, det, *label, *p50Bound, *p99Bound, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixedstat:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// safety is what the leadership journals of a run showed.
type safety struct {
	Entries, Intervals                       int
	Overlap                                  time.Duration
	DoubleVotes, SplitTerms, TermRegressions int
}

func (s *safety) add(o safety) {
	s.Entries += o.Entries
	s.Intervals += o.Intervals
	s.Overlap += o.Overlap
	s.DoubleVotes += o.DoubleVotes
	s.SplitTerms += o.SplitTerms
	s.TermRegressions += o.TermRegressions
}

func (s safety) clean() bool {
	return s.Overlap == 0 && s.DoubleVotes == 0 && s.SplitTerms == 0 && s.TermRegressions == 0
}

// journalNote matches the journal check that bench/failover writes at the
// start of its series note (journalcheck.Report.String).
var journalNote = regexp.MustCompile(`leadership journals: (\d+) entries, (\d+) lease intervals, overlap (\S+), double votes (\d+), split terms (\d+), term regressions (\d+)`)

func parseSafety(note string) (safety, error) {
	m := journalNote.FindStringSubmatch(note)
	if m == nil {
		return safety{}, errors.New("no leadership journal check in the series note")
	}
	var s safety
	var err error
	ints := []*int{&s.Entries, &s.Intervals, nil, &s.DoubleVotes, &s.SplitTerms, &s.TermRegressions}
	for i, p := range ints {
		if p == nil {
			if s.Overlap, err = time.ParseDuration(m[i+1]); err != nil {
				return safety{}, fmt.Errorf("overlap %q: %w", m[i+1], err)
			}
			continue
		}
		if *p, err = strconv.Atoi(m[i+1]); err != nil {
			return safety{}, err
		}
	}
	return s, nil
}

// runResult is one run of bench/failover.
type runResult struct {
	path    string
	samples []float64
	safety  safety
	load1   float64
	cpu, io float64 // pressure: share of the run some task waited
}

func readRun(path string) (runResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return runResult{}, err
	}
	var f benchresult.File
	if err := json.Unmarshal(b, &f); err != nil {
		return runResult{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Series) != 1 {
		return runResult{}, fmt.Errorf("%s: %d series, want 1", path, len(f.Series))
	}
	s := f.Series[0]
	if s.Pending != "" {
		return runResult{}, fmt.Errorf("%s: nothing measured: %s", path, s.Pending)
	}
	if len(s.Samples) == 0 {
		return runResult{}, fmt.Errorf("%s: no samples", path)
	}
	sf, err := parseSafety(s.Note)
	if err != nil {
		return runResult{}, fmt.Errorf("%s: %w", path, err)
	}
	return runResult{path: path, samples: s.Samples, safety: sf, load1: f.Load1, cpu: f.CPUPressure, io: f.IOPressure}, nil
}

// config is one configuration pooled over its runs.
type config struct {
	old      int
	runs     []runResult
	samples  []float64
	safety   safety
	p50, p99 float64
}

func parseArgs(args []string) ([]*config, error) {
	var cs []*config
	for _, a := range args {
		name, files, ok := strings.Cut(a, "=")
		if !ok || files == "" {
			return nil, fmt.Errorf("argument %q: want OLD=RUN.json[,RUN.json...]", a)
		}
		old, err := strconv.Atoi(name)
		if err != nil || old < 0 {
			return nil, fmt.Errorf("argument %q: OLD must be a count of members (0 for the uniform site)", a)
		}
		if slices.ContainsFunc(cs, func(c *config) bool { return c.old == old }) {
			return nil, fmt.Errorf("configuration %d given twice", old)
		}
		c := &config{old: old}
		for _, p := range strings.Split(files, ",") {
			r, err := readRun(p)
			if err != nil {
				return nil, err
			}
			c.runs = append(c.runs, r)
			c.samples = append(c.samples, r.samples...)
			c.safety.add(r.safety)
		}
		c.p50 = benchresult.Percentile(c.samples, 50)
		c.p99 = benchresult.Percentile(c.samples, 99)
		cs = append(cs, c)
	}
	if !slices.ContainsFunc(cs, func(c *config) bool { return c.old == 0 }) {
		return nil, errors.New("no uniform configuration (0=...) to compare with")
	}
	slices.SortFunc(cs, func(a, b *config) int { return a.old - b.old })
	return cs, nil
}

// run prints the summary to w and the details to det; ok is false when a
// configuration's journals were not clean.
func run(w, det io.Writer, label string, p50Bound, p99Bound float64, args []string) (ok bool, err error) {
	cs, err := parseArgs(args)
	if err != nil {
		return false, err
	}
	base := cs[0]
	ok = true
	for _, c := range cs {
		sf := c.safety
		safetyText := fmt.Sprintf("%d trials in %d runs; overlap %s, double votes %d, split terms %d, term regressions %d",
			len(c.samples), len(c.runs), sf.Overlap, sf.DoubleVotes, sf.SplitTerms, sf.TermRegressions)
		if !sf.clean() {
			ok = false
			safetyText += "; UNSAFE"
		}
		line := fmt.Sprintf("%-5s old=%d  p50 %7.1f ms  p99 %7.1f ms", label, c.old, c.p50, c.p99)
		if c == base {
			line += "  (uniform)"
		} else {
			d50, d99 := change(c.p50, base.p50), change(c.p99, base.p99)
			line += fmt.Sprintf("  p50 %+.1f%%  p99 %+.1f%%", d50, d99)
			var missed []string
			if over(c.p50, base.p50, p50Bound) {
				missed = append(missed, "p50")
			}
			if over(c.p99, base.p99, p99Bound) {
				missed = append(missed, "p99")
			}
			if len(missed) > 0 {
				line += "  MISSED " + strings.Join(missed, ",")
			}
		}
		fmt.Fprintf(w, "%s  [%s]\n", line, safetyText)

		fmt.Fprintf(det, "%s old=%d:\n", label, c.old)
		for _, r := range c.runs {
			fmt.Fprintf(det, "  %-28s trials %2d  p50 %7.1f ms  max %7.1f ms  load1 %.2f  cpu pressure %s  io pressure %s\n",
				filepath.Base(r.path), len(r.samples), benchresult.Percentile(r.samples, 50), slices.Max(r.samples),
				r.load1, pct(r.cpu), pct(r.io))
		}
		slow, trial := slowest(c.runs)
		fmt.Fprintf(det, "  slowest trial %.1f ms: trial %d of %s\n", slow.samples[trial], trial+1, filepath.Base(slow.path))
	}
	return ok, nil
}

// change is how much x is over base, in percent.
func change(x, base float64) float64 { return (x/base - 1) * 100 }

// over reports whether x is more than bound percent over base (compared
// without a division, so that a change of exactly the bound is within it).
func over(x, base, bound float64) bool { return x*100 > base*(100+bound) }

func pct(p float64) string {
	if p < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", p*100)
}

// slowest returns the run with the slowest trial and that trial's index.
func slowest(runs []runResult) (runResult, int) {
	best, bi := runs[0], 0
	for _, r := range runs {
		for i, s := range r.samples {
			if s > best.samples[bi] {
				best, bi = r, i
			}
		}
	}
	return best, bi
}
