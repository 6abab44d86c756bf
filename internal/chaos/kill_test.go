package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// persistedTerm reads the term an agent stored in its state directory (0 if
// it has none yet).
func (w *world) persistedTerm(id string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(w.dir, id, "state.json"))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var hs struct{ Term uint64 }
	if err := json.Unmarshal(b, &hs); err != nil {
		return 0, fmt.Errorf("%s: state.json: %w", id, err)
	}
	return hs.Term, nil
}

// TestChaosKillRestart SIGKILLs random agents (one, the leader half of the
// time, or two at once) CHAOS_KILLS times, keeps them down for 0..2D and
// restarts them. The term an agent persisted must never decrease across the
// crash (state.json before the kill, /status and state.json after the
// restart, and every "state" line of its journal); no agent may vote twice
// in a term; no overlap.
//
// Measured: recovery, from the restart until all five agree on one leader
// (a restarted member first waits D before it votes or stands, since it may
// have acknowledged a leader just before it died).
func TestChaosKillRestart(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	n := harness.EnvCount(t, "CHAOS_KILLS", 15)
	w := newWorld(t, defaultTiming(t), worldOpts{})
	tm := w.tm
	var (
		recovery             samples
		decreases            []string
		killed, leaderKilled int
	)
	for i := 0; i < n; i++ {
		a, err := w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("kill %d: before: %v", i, err)
		}
		var victims []string
		switch x := w.rng.IntN(10); {
		case x < 4:
			victims = []string{a.Leader}
		case x < 7:
			victims = []string{pick(w.rng, w.ids)}
		default:
			v1 := pick(w.rng, w.ids)
			v2 := v1
			for v2 == v1 {
				v2 = pick(w.rng, w.ids)
			}
			victims = []string{v1, v2}
		}
		before := map[string]uint64{}
		for _, v := range victims {
			if before[v], err = w.persistedTerm(v); err != nil {
				t.Fatal(err)
			}
			if err := w.site.Kill(v); err != nil {
				t.Fatal(err)
			}
			killed++
			if v == a.Leader {
				leaderKilled++
			}
		}
		time.Sleep(between(w.rng, 0, 2*tm.D())) // hold them down
		var restarted time.Time
		for _, v := range victims {
			if _, err := w.site.Start(v); err != nil {
				t.Fatal(err)
			}
			restarted = time.Now()
			st, err := w.status(v)
			if err != nil {
				t.Fatal(err)
			}
			pt, err := w.persistedTerm(v)
			if err != nil {
				t.Fatal(err)
			}
			if st.Term < before[v] || pt < before[v] {
				decreases = append(decreases, fmt.Sprintf("kill %d: %s persisted term %d before the kill, reports %d and stores %d after",
					i, v, before[v], st.Term, pt))
			}
		}
		b, err := w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("kill %d (%v): after the restart: %v", i, victims, err)
		}
		recovery = append(recovery, b.At.Sub(restarted))
		t.Logf("kill %3d: %-10s (leader was %s term %d) -> %s leads term %d, %s after the restart",
			i, strings.Join(victims, ","), a.Leader, a.Term, b.Leader, b.Term, ms(b.At.Sub(restarted)))
		w.alive()
	}
	rep, _ := w.journals()
	requireSafe(t, rep)
	summary(t, "kill-restart", w, start,
		fmt.Sprintf("cycles=%d agents_killed=%d leaders_killed=%d", n, killed, leaderKilled), safety(rep),
		fmt.Sprintf("persisted_term_decreases=%d", len(decreases)), recovery.p50max("recovery"))
	if len(decreases) > 0 {
		t.Errorf("SAFETY VIOLATION: persisted terms went back:\n%s", strings.Join(decreases, "\n"))
	}
}
