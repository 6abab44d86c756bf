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
// a member that went quiet, and one whose range does not overlap; and the
// site's version, which every member of the group holds down until it
// announces.
func TestProtocolsLevels(t *testing.T) {
	var reports []agent.ProtocolView
	p := newProtocols("gw1", "test", []string{"gw1", "gw2", "gw3"}, 3*time.Second,
		func(v agent.ProtocolView) { reports = append(reports, v) })
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	check := func(when string, now time.Time, to string, want int) {
		t.Helper()
		if got := p.level(to, now); got != want {
			t.Errorf("%s: level(%q) = %d, want %d", when, to, got, want)
		}
	}
	check("nothing heard", t0, "", 1)
	check("nothing heard of gw2", t0, "gw2", 1)
	// gw3 announces all along: it does not hold the site down.
	announce3 := func(now time.Time) { p.announced(wire.Announcement{From: "gw3", Min: 1, Max: 2}, now) }
	announce3(t0)

	p.heard("gw2", 0, true, at(0)) // a build of protocol 1
	check("gw2 of protocol 1", at(0), "gw2", 1)
	check("gw2 of protocol 1, broadcast", at(0), "", 1)
	if r := reports[len(reports)-1]; r.Site != 1 || !slices.Equal(r.Below, []string{"gw2"}) {
		t.Fatalf("report %+v, want site 1 because of gw2", r)
	}

	announce3(at(time.Second))
	if !p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2, Build: "new"}, at(time.Second)) {
		t.Error("a first announcement is not news")
	}
	check("gw2 upgraded", at(time.Second), "gw2", 2)
	check("every member upgraded, broadcast", at(time.Second), "", 2)
	if r := reports[len(reports)-1]; r.Site != 2 || len(r.Below) != 0 {
		t.Fatalf("report %+v, want site 2", r)
	}
	p.heard("gw2", 2, false, at(1100*time.Millisecond))
	check("gw2 says 2", at(1100*time.Millisecond), "gw2", 2)
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2, Build: "new"}, at(2*time.Second)) {
		t.Error("a repeated announcement is news")
	}

	// A broadcast without pv says nothing: a member that is down holds
	// the site, and so every broadcast, at protocol 1.
	p.heard("gw2", 0, false, at(2050*time.Millisecond))
	check("gw2 broadcast at protocol 1", at(2050*time.Millisecond), "gw2", 2)
	p.heard("gw2", 0, true, at(2100*time.Millisecond)) // flashed back to an older build
	check("gw2 downgraded", at(2100*time.Millisecond), "gw2", 1)
	check("gw2 downgraded, broadcast", at(2100*time.Millisecond), "", 1)

	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2}, at(3*time.Second))
	announce3(at(3 * time.Second))
	check("gw2 upgraded again", at(3*time.Second), "", 2)
	// Quiet past the ttl: down, or flashed back; the site waits for it.
	announce3(at(7 * time.Second))
	check("gw2 quiet past the ttl", at(7*time.Second), "gw2", 1)
	check("gw2 quiet past the ttl, broadcast", at(7*time.Second), "", 1)

	// A member of a later protocol only: refused, and it does not hold the
	// site down.
	p.announced(wire.Announcement{From: "gw2", Min: wire.ProtocolMax + 1, Max: wire.ProtocolMax + 2}, at(8*time.Second))
	if !p.refused("gw2", at(8*time.Second)) || p.refused("gw3", at(8*time.Second)) {
		t.Error("refused: want gw2 only")
	}
	v := p.snapshot(at(8 * time.Second))
	if !slices.Equal(v.Mismatch, []string{"gw2"}) || v.Site != wire.ProtocolMax || v.Members["gw1"].Build != "test" || v.Members["gw3"].Max != 2 {
		t.Errorf("snapshot %+v", v)
	}
}
