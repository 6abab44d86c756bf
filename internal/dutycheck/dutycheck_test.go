package dutycheck

import (
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func lines(spec ...any) []Line {
	var out []Line
	for i := 0; i < len(spec); i += 3 {
		out = append(out, Line{ID: spec[i].(string), Term: uint64(spec[i+1].(int)), At: int64(spec[i+2].(int)) * ms})
	}
	return out
}

func TestCheckCleanHandover(t *testing.T) {
	// gw1 writes at 0, 10, 20; gw2 starts 150 ms after gw1's last line.
	r := Check(lines("gw1", 1, 0, "gw1", 1, 10, "gw1", 1, 20, "gw2", 2, 170, "gw2", 2, 180), 10*time.Millisecond)
	if r.Overlap != 0 || r.Changes != 1 || r.MinGap != 150*time.Millisecond || len(r.SplitTerms) != 0 || r.Lines != 5 {
		t.Fatalf("%+v", r)
	}
}

func TestCheckOverlap(t *testing.T) {
	// gw1 covers [0, 30); gw2 covers [25, 45): 5 ms together. gw3's line
	// at 40 adds [40, 45) with gw2: 10 ms in all.
	r := Check(lines("gw1", 1, 0, "gw1", 1, 10, "gw1", 1, 20, "gw2", 2, 25, "gw2", 2, 35, "gw3", 3, 40), 10*time.Millisecond)
	if r.Overlap != 10*time.Millisecond || len(r.Overlaps) != 2 {
		t.Fatalf("overlap %s %q", r.Overlap, r.Overlaps)
	}
	// Lines one cadence apart exactly do not overlap.
	r = Check(lines("gw1", 1, 0, "gw2", 2, 10), 10*time.Millisecond)
	if r.Overlap != 0 {
		t.Fatalf("adjacent: %s", r.Overlap)
	}
	// A gap in one gateway's writes is not covered.
	r = Check(lines("gw1", 1, 0, "gw1", 1, 100, "gw2", 2, 50), 10*time.Millisecond)
	if r.Overlap != 0 || r.Changes != 2 {
		t.Fatalf("gap: %+v", r)
	}
}

func TestCheckSplitTermAndTornLines(t *testing.T) {
	ls, err := Read(strings.NewReader("gw1 4 1000\ngw2 4 90000000\ngw1 4 12"))
	if err != nil {
		t.Fatal(err)
	}
	ls = append(ls, Line{})
	r := Check(ls, 10*time.Millisecond)
	if len(r.SplitTerms) != 1 || r.Torn != 1 || r.Lines != 3 {
		t.Fatalf("%+v", r)
	}
}
