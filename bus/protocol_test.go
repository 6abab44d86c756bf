package bus

import (
	"slices"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
)

// TestProtocolsLevels walks a member through what the others can see of it:
// a build of protocol 1 (no announcement), an upgrade (it announces 2 and
// says so in its messages), a downgrade (its first message without "pv"),
// a member that went quiet, and one whose range does not overlap.
func TestProtocolsLevels(t *testing.T) {
	var reports []agent.ProtocolView
	alive := []string{"gw1"}
	p := newProtocols("gw1", "test", []string{"gw1", "gw2", "gw3", "gw4"}, 3*time.Second,
		func(v agent.ProtocolView) { reports = append(reports, v) }, func() []string { return alive })
	t0 := time.Unix(1000, 0)
	if got := p.level("", t0); got != 1 {
		t.Errorf("just opened, nothing heard: broadcast level %d, want 1 (every member may be a build of protocol 1)", got)
	}
	p.opened = t0.Add(-time.Hour) // the rest of the test: long open
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	check := func(when string, now time.Time, to string, want int) {
		t.Helper()
		if got := p.level(to, now); got != want {
			t.Errorf("%s: level(%q) = %d, want %d", when, to, got, want)
		}
	}
	check("alone", t0, "", wire.ProtocolMax)
	check("nothing heard of gw2", t0, "gw2", 1)

	p.heard("gw2", 0, at(0)) // a build of protocol 1
	check("gw2 of protocol 1", at(0), "gw2", 1)
	check("gw2 of protocol 1, broadcast", at(0), "", 1)
	if r := reports[len(reports)-1]; r.Site != 1 || !slices.Equal(r.Below, []string{"gw2"}) {
		t.Fatalf("report %+v, want site 1 because of gw2", r)
	}

	if !p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2, Build: "new"}, at(time.Second)) {
		t.Error("a first announcement is not news")
	}
	check("gw2 upgraded", at(time.Second), "gw2", 2)
	check("gw2 upgraded, broadcast", at(time.Second), "", 2)
	p.heard("gw2", 2, at(1100*time.Millisecond))
	check("gw2 says 2", at(1100*time.Millisecond), "gw2", 2)
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2, Build: "new"}, at(2*time.Second)) {
		t.Error("a repeated announcement is news")
	}

	p.heard("gw2", 0, at(2100*time.Millisecond)) // flashed back to an older build
	check("gw2 downgraded", at(2100*time.Millisecond), "gw2", 1)
	check("gw2 downgraded, broadcast", at(2100*time.Millisecond), "", 1)

	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2}, at(3*time.Second))
	check("gw2 upgraded again", at(3*time.Second), "gw2", 2)
	check("gw2 quiet past the ttl", at(7*time.Second), "gw2", 1)
	check("gw2 quiet: not live, the site does not wait for it", at(7*time.Second), "", 2)

	// A member of a later protocol only: refused, and it does not hold the
	// site back.
	p.announced(wire.Announcement{From: "gw3", Min: wire.ProtocolMax + 1, Max: wire.ProtocolMax + 2}, at(8*time.Second))
	if !p.refused("gw3", at(8*time.Second)) || p.refused("gw2", at(8*time.Second)) {
		t.Error("refused: want gw3 only")
	}
	v := p.snapshot(at(8 * time.Second))
	if !slices.Equal(v.Mismatch, []string{"gw3"}) || v.Site != wire.ProtocolMax || v.Members["gw1"].Build != "test" {
		t.Errorf("snapshot %+v", v)
	}

	// A member this one has never heard, but which the agent believes
	// alive (a follower hears the other followers only through the
	// leader's heartbeats), is of protocol 1 until it announces.
	alive = []string{"gw1", "gw4"}
	check("gw4 alive, never heard", at(8*time.Second), "", 1)
	if v := p.snapshot(at(8 * time.Second)); !slices.Equal(v.Below, []string{"gw4"}) || v.Members["gw4"].Max != 1 {
		t.Errorf("snapshot with gw4 alive: %+v", v)
	}
}
