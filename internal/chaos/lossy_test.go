package chaos

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// lossyTiming is what an operator would configure for a site whose links
// lose 30% of messages and delay them by 500 ms each way: every election
// message crosses two links (sender to server, server to receiver), so one
// way between two agents loses 1-0.7^2 = 51% and takes about 1 s, and a
// heartbeat's acknowledgement comes back with probability 0.7^4 = 24% after
// about 2 s.
//
//   - H = 500 ms, k = 20: D = 10 s. A follower suspects a live leader only
//     if 20 heartbeats in a row are lost to it (0.51^20, about 1 in a
//     million per heartbeat).
//   - L = D - H - 2 ticks = 9.4 s: the heartbeats sent in the last L - 2 s,
//     about 15, give each follower a 98% chance that one of its
//     acknowledgements is back; two of four are needed.
//   - answer timeout 4 s: a vote takes about 2 s to come back; this leaves
//     room for the jitter.
//
// The default H = 100 ms cannot work here: the lease (180 ms) is shorter
// than one round trip (2 s). CHAOS_LOSSY_HEARTBEAT, CHAOS_LOSSY_MISSES and
// CHAOS_LOSSY_ANSWER override the timing.
func lossyTiming(t *testing.T) timing {
	return timing{
		H:      envDuration(t, "CHAOS_LOSSY_HEARTBEAT", 500*time.Millisecond),
		K:      harness.EnvCount(t, "CHAOS_LOSSY_MISSES", 20),
		Answer: envDuration(t, "CHAOS_LOSSY_ANSWER", 4*time.Second),
	}
}

// TestChaosLossyLink runs the site for CHAOS_LOSSY (10m in make chaos-lossy)
// with every agent's link losing CHAOS_LOSS (0.3) of the PUB and MSG frames
// and delaying every frame by CHAOS_DELAY (500ms) ± CHAOS_JITTER (100ms), in
// the directions CHAOS_LOSSY_DIRS (both: each way, as on a lossy radio link;
// up: only what agents send, as netem on each gateway's egress would do).
// With the leader alive there must be at most one leader change per minute
// (a change: a "lead" line in any journal, that is a new leadership, even by
// the same agent); then the leader is killed, still on the lossy links, and
// a new one must be elected. No overlap, no double votes, as everywhere.
func TestChaosLossyLink(t *testing.T) {
	requireChaos(t)
	dur := envDuration(t, "CHAOS_LOSSY", 0)
	if dur == 0 {
		t.Skip("lossy-link scenario: set CHAOS_LOSSY=10m to run it (make chaos-lossy)")
	}
	start := time.Now()
	loss := 0.3
	if v := os.Getenv("CHAOS_LOSS"); v != "" {
		var err error
		if loss, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("CHAOS_LOSS=%q: %v", v, err)
		}
	}
	delay := envDuration(t, "CHAOS_DELAY", 500*time.Millisecond)
	jitter := envDuration(t, "CHAOS_JITTER", 100*time.Millisecond)
	dirs := Both
	switch v := os.Getenv("CHAOS_LOSSY_DIRS"); v {
	case "", "both":
	case "up":
		dirs = Up
	default:
		t.Fatalf("CHAOS_LOSSY_DIRS=%q: want both or up", v)
	}
	w := newWorld(t, lossyTiming(t), worldOpts{})
	first, err := w.agree(w.ids, "", 0, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]Stats{}
	for id, p := range w.proxies {
		base[id] = p.Stats()
		if err := p.Drop(dirs, loss); err != nil {
			t.Fatal(err)
		}
		p.Delay(dirs, delay, jitter)
	}
	from := time.Now()
	t.Logf("%s leads term %d; links now lose %.0f%% and delay %s±%s (%s) for %s",
		first.Leader, first.Term, loss*100, delay, jitter, dirs, dur)
	// Watch the leader every few seconds, for the log only: the figures
	// come from the journals.
	for end := from.Add(dur); time.Now().Before(end); {
		time.Sleep(min(10*time.Second, time.Until(end))) // let the lossy site run
		var seen []string
		for _, id := range w.ids {
			if st, err := w.status(id); err == nil {
				seen = append(seen, fmt.Sprintf("%s:%s/%d", id, st.Leader, st.Term))
			}
		}
		t.Logf("%4.0fs: %s", time.Since(from).Seconds(), strings.Join(seen, " "))
		w.alive()
	}
	until := time.Now()
	rep, es := w.journals()

	// Leader changes while the leader was alive.
	var leads []int64
	reasons := map[string]int{}
	for _, e := range es {
		if e.T < from.UnixNano() || e.T > until.UnixNano() {
			continue
		}
		switch e.Event {
		case "lead":
			leads = append(leads, e.T)
		case "stop":
			reasons[e.Reason]++
		}
	}
	sort.Slice(leads, func(i, j int) bool { return leads[i] < leads[j] })
	minutes := max(1, int(math.Round(until.Sub(from).Minutes())))
	perMinute := make([]int, minutes)
	for _, l := range leads {
		perMinute[min(int(time.Duration(l-from.UnixNano())/time.Minute), minutes-1)]++
	}
	worst := 0
	for _, n := range perMinute {
		worst = max(worst, n)
	}
	// Time with no valid lease anywhere.
	var led time.Duration
	for _, iv := range rep.Intervals {
		s, e := max(iv.Start, from.UnixNano()), min(iv.End, until.UnixNano())
		if e > s {
			led += time.Duration(e - s)
		}
	}
	leaderless := until.Sub(from) - led // intervals never overlap (checked below)

	// Then kill the leader, links still lossy.
	var victim string
	for _, id := range w.ids {
		if st, err := w.status(id); err == nil && st.Role == "leader" {
			victim = id
		}
	}
	failover := "no leader to kill"
	if victim != "" {
		st, _ := w.status(victim)
		if err := w.site.Kill(victim); err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		var rest []string
		for _, id := range w.ids {
			if id != victim {
				rest = append(rest, id)
			}
		}
		b, err := w.agree(rest, victim, st.Term, 5*time.Minute)
		if err != nil {
			t.Errorf("after killing leader %s on lossy links: %v", victim, err)
			failover = "none within 5m"
		} else {
			failover = fmt.Sprintf("%s->%s in %s", victim, b.Leader, ms(b.At.Sub(killedAt)))
			t.Logf("killed leader %s (term %d): %s leads term %d after %s", victim, st.Term, b.Leader, b.Term, ms(b.At.Sub(killedAt)))
		}
	}
	w.healAll()
	rep, _ = w.journals()
	requireSafe(t, rep)

	var up, down DirStats // while the links were lossy
	for id, p := range w.proxies {
		s, b := p.Stats(), base[id]
		up.Messages += s.Up.Messages - b.Up.Messages
		up.Dropped += s.Up.Dropped - b.Up.Dropped
		down.Messages += s.Down.Messages - b.Down.Messages
		down.Dropped += s.Down.Dropped - b.Down.Dropped
	}
	rate := func(d DirStats) float64 {
		if d.Messages+d.Dropped == 0 {
			return 0
		}
		return float64(d.Dropped) / float64(d.Messages+d.Dropped) * 100
	}
	var rs []string
	for r, n := range reasons {
		rs = append(rs, fmt.Sprintf("%q:%d", r, n))
	}
	sort.Strings(rs)
	summary(t, "lossy", w, start,
		fmt.Sprintf("link=loss %.0f%% delay %s±%s dirs=%s duration=%s", loss*100, delay, jitter, dirs, until.Sub(from).Round(time.Second)),
		fmt.Sprintf("leader_changes=%d max_per_minute=%d per_minute=%v leaderless=%s", len(leads), worst, perMinute, ms(leaderless)),
		"stops={"+strings.Join(rs, ",")+"}",
		fmt.Sprintf("failover_after_kill=%q", failover), safety(rep),
		fmt.Sprintf("messages_dropped_up=%.1f%% messages_dropped_down=%.1f%%", rate(up), rate(down)))
	if worst > 1 {
		t.Errorf("%d leader changes in one minute on a lossy link with the leader alive (at most 1 wanted): per minute %v", worst, perMinute)
	}
}
