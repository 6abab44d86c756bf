package journalcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
)

func TestCheckFindsOverlapAndDoubleVotes(t *testing.T) {
	ms := int64(time.Millisecond)
	es := []agent.JournalEntry{
		{T: 0, ID: "a", Event: "state", Term: 1, VotedFor: "a"},
		{T: 1 * ms, ID: "a", Event: "lead", Term: 1, Until: 100 * ms},
		{T: 50 * ms, ID: "a", Event: "renew", Term: 1, Until: 150 * ms},
		// a is killed: its lease runs to 150ms.
		{T: 0, ID: "b", Event: "state", Term: 1, VotedFor: "a"},
		{T: 120 * ms, ID: "b", Event: "state", Term: 2, VotedFor: "b"},
		{T: 130 * ms, ID: "b", Event: "lead", Term: 2, Until: 300 * ms},
		{T: 200 * ms, ID: "b", Event: "stop", Term: 2},
		{T: 210 * ms, ID: "b", Event: "state", Term: 2, VotedFor: "c"}, // double vote
		{T: 220 * ms, ID: "b", Event: "state", Term: 1},                // regression
	}
	r := Check(es, time.Unix(0, 400*ms))
	if r.Overlap != 20*time.Millisecond {
		t.Fatalf("overlap = %s, want 20ms (130..150); %v", r.Overlap, r.Overlaps)
	}
	if len(r.DoubleVotes) != 1 || len(r.TermRegressions) != 1 || r.OK() {
		t.Fatalf("report: %+v", r)
	}
	if len(r.Intervals) != 2 || r.Intervals[0].End != 150*ms || r.Intervals[1].End != 200*ms {
		t.Fatalf("intervals: %+v", r.Intervals)
	}
}

func TestCheckCleanHandover(t *testing.T) {
	ms := int64(time.Millisecond)
	es := []agent.JournalEntry{
		{T: 1 * ms, ID: "a", Event: "lead", Term: 1, Until: 100 * ms},
		{T: 60 * ms, ID: "a", Event: "stop", Term: 1},
		{T: 60 * ms, ID: "b", Event: "lead", Term: 2, Until: 200 * ms},
		{T: 60 * ms, ID: "b", Event: "lead", Term: 2, Until: 200 * ms},
	}
	r := Check(es, time.Unix(0, 150*ms))
	if !r.OK() || r.Overlap != 0 {
		t.Fatalf("report: %s %v %v", r, r.Overlaps, r.SplitTerms)
	}
}

func TestReadIgnoresTornLastLine(t *testing.T) {
	in := `{"t":1,"id":"a","ev":"lead","term":1,"until":5}` + "\n" + `{"t":2,"id":"a","ev":"re`
	es, err := Read(strings.NewReader(in))
	if err != nil || len(es) != 1 {
		t.Fatalf("%v %v", es, err)
	}
	if _, err := Read(strings.NewReader("garbage\n" + in)); err == nil {
		t.Fatal("a bad line in the middle must be an error")
	}
}

func TestGaps(t *testing.T) {
	iv := []Interval{
		{ID: "b", Start: 50, End: 80},
		{ID: "a", Start: 10, End: 40},
		{ID: "c", Start: 60, End: 70}, // inside b's
		{ID: "d", Start: 90, End: 200},
	}
	got := Gaps(iv, 0, 150)
	want := []Interval{{Start: 0, End: 10}, {Start: 40, End: 50}, {Start: 80, End: 90}}
	if len(got) != len(want) {
		t.Fatalf("gaps %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gaps %+v, want %+v", got, want)
		}
	}
	if g := Gaps(iv, 20, 35); len(g) != 0 {
		t.Errorf("inside one lease: %+v", g)
	}
	if g := Gaps(iv, 210, 300); len(g) != 1 || g[0] != (Interval{Start: 210, End: 300}) {
		t.Errorf("after every lease: %+v", g)
	}
	if g := Gaps(nil, 5, 7); len(g) != 1 || g[0] != (Interval{Start: 5, End: 7}) {
		t.Errorf("no lease at all: %+v", g)
	}
}
