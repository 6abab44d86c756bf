package opsclient

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent"
)

// TestParseFlagsHelp: -h gives a HelpError listing the command's flags,
// its own among them, and wrapping flag.ErrHelp.
func TestParseFlagsHelp(t *testing.T) {
	wait := 0
	_, err := ParseFlags("watch", []string{"-h"}, true, func(fs *flag.FlagSet) { fs.IntVar(&wait, "count", 0, "changes") })
	var h *HelpError
	if !errors.As(err, &h) || !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("ParseFlags -h: %v", err)
	}
	for _, f := range []string{"-count", "-json", "-group", "-nats-url", "-config"} {
		if !strings.Contains(h.Flags, "  "+f+" ") && !strings.Contains(h.Flags, "  "+f+"\t") && !strings.Contains(h.Flags, "  "+f+"\n") {
			t.Errorf("help lacks %s:\n%s", f, h.Flags)
		}
	}
}

// TestAgreedLeader: status --wait stops only when every agent that answers
// names one leader and that leader answers as leader.
func TestAgreedLeader(t *testing.T) {
	r := func(id, role, leader string) agent.StatusReport {
		return agent.StatusReport{ID: id, Role: role, Leader: leader}
	}
	cases := []struct {
		reports []agent.StatusReport
		ok      bool
		why     string
	}{
		{nil, false, "no agent answered"},
		{[]agent.StatusReport{r("a", "candidate", ""), r("b", "follower", "")}, false, "none knows a leader"},
		{[]agent.StatusReport{r("a", "leader", "a"), r("b", "follower", "")}, false, "1 agent(s) name a, 1 know no leader yet"},
		{[]agent.StatusReport{r("a", "leader", "a"), r("b", "follower", "c")}, false, "disagree"},
		{[]agent.StatusReport{r("a", "follower", "c"), r("b", "follower", "c")}, false, "c, which did not answer as leader"},
		{[]agent.StatusReport{r("a", "candidate", "a"), r("b", "follower", "a")}, false, "a, which did not answer as leader"},
		{[]agent.StatusReport{r("a", "leader", "a"), r("b", "follower", "a")}, true, ""},
	}
	for i, c := range cases {
		why, ok := agreedLeader(c.reports)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("case %d: %q %v, want %v %q", i, why, ok, c.ok, c.why)
		}
	}
}

// TestWatchCountsLeaderChanges: the per-agent lines of one change, the
// "no leader" lines in between and stale lines count once or not at all.
func TestWatchCountsLeaderChanges(t *testing.T) {
	w := &eventWatch{o: &Options{}, out: io.Discard, leader: "gw3", term: 2}
	ev := func(id, prev, leader string, term uint64) agent.LeaderChange {
		return agent.LeaderChange{ID: id, Previous: prev, Leader: leader, Term: term}
	}
	for _, c := range []agent.LeaderChange{
		ev("gw3", "gw3", "", 2), ev("gw1", "gw3", "", 3), ev("gw1", "", "gw1", 3), // one change, seen by gw1
		ev("gw2", "gw3", "gw1", 3), ev("gw3", "", "gw1", 3), // the same change, seen by the others
		ev("gw2", "", "gw3", 2), // stale
	} {
		w.print(c)
	}
	if w.changes != 1 || w.leader != "gw1" || w.term != 3 {
		t.Fatalf("changes %d, leader %s term %d; want 1, gw1 in 3", w.changes, w.leader, w.term)
	}
	w.print(ev("gw2", "gw1", "gw2", 4))
	if w.changes != 2 || w.leader != "gw2" {
		t.Fatalf("changes %d, leader %s; want 2, gw2", w.changes, w.leader)
	}
}
