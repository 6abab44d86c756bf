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
	p := newProtocols("gw1", "test", []string{"gw1", "gw2", "gw3"}, time.Second,
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
	announce3 := func(now time.Time) { p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolMax}, now) }
	announce3(t0)

	p.heard("gw2", 0, true, at(0)) // a build of protocol 1
	check("gw2 of protocol 1", at(0), "gw2", 1)
	check("gw2 of protocol 1, broadcast", at(0), "", 1)
	if r := reports[len(reports)-1]; r.Site != 1 || !slices.Equal(r.Below, []string{"gw2"}) {
		t.Fatalf("report %+v, want site 1 because of gw2", r)
	}

	announce3(at(time.Second))
	if !p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Build: "new"}, at(time.Second)) {
		t.Error("a first announcement is not news")
	}
	check("gw2 upgraded", at(time.Second), "gw2", wire.ProtocolMax)
	check("every member upgraded, broadcast", at(time.Second), "", wire.ProtocolMax)
	if r := reports[len(reports)-1]; r.Site != wire.ProtocolMax || len(r.Below) != 0 {
		t.Fatalf("report %+v, want site %d", r, wire.ProtocolMax)
	}
	p.heard("gw2", 2, false, at(1100*time.Millisecond))
	check("gw2 says 2", at(1100*time.Millisecond), "gw2", wire.ProtocolMax)
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Build: "new"}, at(1500*time.Millisecond)) {
		t.Error("a repeated announcement is news")
	}
	// Within an interval of its announcement, a direct message without pv
	// is a member that started and has not heard this one yet: no
	// flash-back.
	p.heard("gw2", 0, true, at(2500*time.Millisecond))
	check("gw2 just announced, sends at protocol 1", at(2500*time.Millisecond), "gw2", wire.ProtocolMax)

	// A broadcast without pv says nothing: a member that is down holds
	// the site, and so every broadcast, at protocol 1.
	p.heard("gw2", 0, false, at(2550*time.Millisecond))
	check("gw2 broadcast at protocol 1", at(2550*time.Millisecond), "gw2", wire.ProtocolMax)
	p.heard("gw2", 0, true, at(2600*time.Millisecond)) // flashed back to an older build
	check("gw2 downgraded", at(2600*time.Millisecond), "gw2", 1)
	check("gw2 downgraded, broadcast", at(2600*time.Millisecond), "", 1)

	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax}, at(3*time.Second))
	announce3(at(3 * time.Second))
	check("gw2 upgraded again", at(3*time.Second), "", wire.ProtocolMax)
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
	if !slices.Equal(v.Mismatch, []string{"gw2"}) || v.Site != wire.ProtocolMax || v.Members["gw1"].Build != "test" || v.Members["gw3"].Max != wire.ProtocolMax {
		t.Errorf("snapshot %+v", v)
	}
}

// On a site whose every member announced protocol 3 (wire.ProtocolQuiet),
// a member announces every QuietAnnouncements intervals, and the others
// remember its announcement for three of its periods; when the site falls
// below it, the member is told to announce every interval again
// (onLouder), once.
func TestProtocolsQuietAnnouncements(t *testing.T) {
	const interval = time.Second
	quiet := wire.QuietAnnouncements * interval
	p := newProtocols("gw1", "test", []string{"gw1", "gw2", "gw3"}, interval, func(agent.ProtocolView) {})
	louder := 0
	p.onLouder = func() { louder++ }
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	period := func(now time.Time) time.Duration {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.period(now)
	}
	if got := period(t0); got != interval {
		t.Fatalf("nothing heard: period %s, want %s", got, interval)
	}
	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolQuiet, Every: quiet}, t0)
	if got := period(t0); got != interval {
		t.Fatalf("gw3 not heard: period %s, want %s", got, interval)
	}
	p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolQuiet, Every: quiet}, t0)
	if got := period(t0); got != quiet {
		t.Fatalf("every member at protocol %d: period %s, want %s", wire.ProtocolQuiet, got, quiet)
	}
	// Remembered for three of their periods, not three intervals.
	if got := p.level("gw2", at(3*quiet)); got != wire.ProtocolQuiet {
		t.Errorf("gw2 after three quiet periods: level %d, want %d", got, wire.ProtocolQuiet)
	}
	if got := p.level("gw2", at(3*quiet+time.Millisecond)); got != 1 {
		t.Errorf("gw2 past three quiet periods: level %d, want 1", got)
	}
	// A period over the quiet one counts as the quiet one; none (a build
	// of protocol 2) as the interval.
	if louder != 0 {
		t.Fatalf("onLouder called %d times while the site ran protocol %d", louder, wire.ProtocolQuiet)
	}
	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolQuiet, Every: time.Hour}, at(time.Minute))
	if p.level("gw2", at(time.Minute+3*quiet+time.Millisecond)) != 1 {
		t.Error("a period of an hour kept gw2's announcement past three quiet periods")
	}
	// gw3 was forgotten meanwhile: the site fell below protocol 3.
	if louder != 1 {
		t.Fatalf("onLouder called %d times, want 1 (gw3 forgotten)", louder)
	}
	p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolQuiet}, at(time.Minute))
	if p.level("gw3", at(time.Minute+3*interval+time.Millisecond)) != 1 {
		t.Error("no period kept gw3's announcement past three intervals")
	}

	// gw3 flashed to a build of protocol 2 and announced at once: news
	// (its range changed), the site falls to 2, gw1 announces every
	// interval again.
	now := at(time.Minute + time.Second)
	p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolQuiet, Every: quiet}, now)
	p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolQuiet, Every: quiet}, now)
	if got := period(now); got != quiet {
		t.Fatalf("period %s, want %s", got, quiet)
	}
	if !p.announced(wire.Announcement{From: "gw3", Min: 1, Max: 2}, now.Add(time.Second)) {
		t.Error("a changed range is not news")
	}
	if got := period(now.Add(time.Second)); got != interval {
		t.Errorf("gw3 of protocol 2: period %s, want %s", got, interval)
	}
	if louder != 2 {
		t.Errorf("onLouder called %d times, want 2", louder)
	}
	// A direct message without pv (gw2 flashed back further) keeps the
	// site below: no further call.
	p.heard("gw2", 0, true, now.Add(2*time.Second))
	if louder != 2 {
		t.Errorf("onLouder called %d times, want 2", louder)
	}
}

// TestProtocolsRestartIsNews: a member that restarts within the three quiet
// periods the others remember it for announces more often than it said it
// would (it sees the site below protocol 3 until it has heard everyone),
// and that is news: the others answer at once, instead of leaving it to
// send its broadcasts at protocol 1 for up to a quiet period.
func TestProtocolsRestartIsNews(t *testing.T) {
	const interval = 100 * time.Millisecond
	quiet := wire.QuietAnnouncements * interval
	p := newProtocols("gw1", "test", []string{"gw1", "gw2", "gw3"}, interval, func(agent.ProtocolView) {})
	t0 := time.Unix(1000, 0)
	if !p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Every: interval}, t0) {
		t.Fatal("a first announcement is not news")
	}
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Every: quiet}, t0.Add(interval)) {
		t.Error("going quiet is news")
	}
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Every: quiet}, t0.Add(quiet)) {
		t.Error("a regular quiet announcement is news")
	}
	// gw2 restarted: its first announcement says the interval.
	if !p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Every: interval}, t0.Add(quiet+interval)) {
		t.Error("a restarted member's announcement is not news")
	}
	if p.announced(wire.Announcement{From: "gw2", Min: 1, Max: wire.ProtocolMax, Every: interval}, t0.Add(quiet+2*interval)) {
		t.Error("a loud member's next announcement is news again")
	}
	// Periods beyond the quiet one count as the quiet one, and none (a
	// build of protocol 2) as the interval: no news from either.
	p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolMax, Every: time.Hour}, t0)
	if p.announced(wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolMax, Every: quiet}, t0.Add(interval)) {
		t.Error("an hour then the quiet period is news")
	}
	p.announced(wire.Announcement{From: "gw3", Min: 1, Max: 2}, t0.Add(2*interval))
	if p.announced(wire.Announcement{From: "gw3", Min: 1, Max: 2}, t0.Add(3*interval)) {
		t.Error("a build of protocol 2 is news at every announcement")
	}
}
