package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/internal/benchresult"
)

// writeRun writes a benchresult file as bench/failover does, with the
// journal check at the start of the note.
func writeRun(t *testing.T, dir, name string, samples []float64, journal string) string {
	t.Helper()
	p := filepath.Join(dir, name+".json")
	err := benchresult.Write(p, benchresult.File{Program: "failoverbench", Series: []benchresult.Series{{
		Figure: "failover", Algorithm: "ring", Unit: "ms", Samples: samples,
		Note: "leadership journals: " + journal + "; by the agents' own clocks p50 1.0 ms",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const clean = "40 entries, 12 lease intervals, overlap 0s, double votes 0, split terms 0, term regressions 0"

func TestPoolsRunsPerConfiguration(t *testing.T) {
	dir := t.TempDir()
	// Uniform: 1..10 over two runs; p50 5, p99 10 (nearest rank).
	u1 := writeRun(t, dir, "u1", []float64{1, 2, 3, 4, 5}, clean)
	u2 := writeRun(t, dir, "u2", []float64{10, 9, 8, 7, 6}, clean)
	// Two old: 2..20 in steps of 2 over two runs; p50 10 (+100%), p99 20.
	o1 := writeRun(t, dir, "o1", []float64{2, 4, 20, 6, 8}, clean)
	o2 := writeRun(t, dir, "o2", []float64{18, 16, 14, 12, 10}, clean)
	// One old: within the bounds (p50 5.5 = +10% is not over 10%).
	w1 := writeRun(t, dir, "w1", []float64{1, 2, 3, 4, 5.5, 6, 7, 8, 9, 12.5}, clean)
	var out, det bytes.Buffer
	ok, err := run(&out, &det, "ring  kill  ", 10, 25, []string{
		"2=" + o1 + "," + o2, "0=" + u1 + "," + u2, "1=" + w1,
	})
	if err != nil || !ok {
		t.Fatalf("run: ok %v, err %v", ok, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines in configuration order, got:\n%s", out.String())
	}
	for i, want := range []string{
		"old=0  p50     5.0 ms  p99    10.0 ms  (uniform)  [10 trials in 2 runs; overlap 0s",
		"old=1  p50     5.5 ms  p99    12.5 ms  p50 +10.0%  p99 +25.0%  [10 trials in 1 runs",
		"old=2  p50    10.0 ms  p99    20.0 ms  p50 +100.0%  p99 +100.0%  MISSED p50,p99  [10 trials in 2 runs",
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
	if strings.Contains(lines[1], "MISSED") {
		t.Errorf("a change equal to the bound is within it: %q", lines[1])
	}
	if !strings.Contains(det.String(), "slowest trial 20.0 ms: trial 3 of o1.json") {
		t.Errorf("details do not name the slowest trial:\n%s", det.String())
	}
}

func TestUnsafeRunIsReported(t *testing.T) {
	dir := t.TempDir()
	u := writeRun(t, dir, "u", []float64{1, 2, 3}, clean)
	bad := writeRun(t, dir, "bad", []float64{1, 2, 3}, "40 entries, 12 lease intervals, overlap 1.5ms, double votes 0, split terms 1, term regressions 0")
	var out bytes.Buffer
	ok, err := run(&out, &bytes.Buffer{}, "bully kill", 10, 25, []string{"0=" + u, "3=" + u + "," + bad})
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatalf("an overlap and a split term in one run passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "overlap 1.5ms, double votes 0, split terms 1, term regressions 0; UNSAFE") {
		t.Errorf("the summed safety counts are not shown:\n%s", out.String())
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	u := writeRun(t, dir, "u", []float64{1, 2, 3}, clean)
	noJournal := filepath.Join(dir, "nojournal.json")
	if err := benchresult.Write(noJournal, benchresult.File{Series: []benchresult.Series{{Samples: []float64{1}}}}); err != nil {
		t.Fatal(err)
	}
	pending := filepath.Join(dir, "pending.json")
	if err := benchresult.Write(pending, benchresult.File{Series: []benchresult.Series{{Pending: "no ring"}}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"1=" + u},                          // no uniform configuration
		{"0=" + u, "0=" + u},                // twice
		{"0=" + u, "x=" + u},                // not a count
		{"0="},                              // no files
		{"0=" + filepath.Join(dir, "none")}, // missing file
		{"0=" + noJournal},
		{"0=" + pending},
	} {
		if _, err := run(&bytes.Buffer{}, &bytes.Buffer{}, "", 10, 25, args); err == nil {
			t.Errorf("run(%q) gave no error", args)
		} else {
			t.Log(err) // the message an operator sees
		}
	}
}
