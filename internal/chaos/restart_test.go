package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestChaosServerRestart restarts nats-servers under connected agents,
// CHAOS_RESTARTS times: server A (three agents: the group loses its
// quorum), server B (two agents) or both, down for 100 ms..2 s. The group
// must come back to one leader; no overlap.
//
// Measured: recovery, from the restart until all five agree on one leader.
// It includes the agents' NATS reconnect (250 ms wait plus jitter) and, when
// the route was torn down, nats-server's own route reconnect delay (about
// 1 s).
func TestChaosServerRestart(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	n := harness.EnvCount(t, "CHAOS_RESTARTS", 3)
	w := newWorld(t, defaultTiming(t), worldOpts{})
	var recovery samples
	which := map[string]int{}
	for i := 0; i < n; i++ {
		a, err := w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("restart %d: before: %v", i, err)
		}
		var servers []*Server
		name := []string{"A", "B", "A+B"}[i%3]
		switch name {
		case "A":
			servers = []*Server{w.bus.A}
		case "B":
			servers = []*Server{w.bus.B}
		default:
			servers = []*Server{w.bus.A, w.bus.B}
		}
		which[name]++
		for _, s := range servers {
			s.Stop()
		}
		time.Sleep(between(w.rng, 100*time.Millisecond, 2*time.Second)) // hold the servers down
		for _, s := range servers {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}
		up := time.Now()
		b, err := w.agree(w.ids, "", 0, 60*time.Second)
		if err != nil {
			t.Fatalf("restart %d of %s: %v", i, name, err)
		}
		recovery = append(recovery, b.At.Sub(up))
		t.Logf("restart %2d: server %-3s (leader was %s term %d) -> %s leads term %d, %s after the restart",
			i, name, a.Leader, a.Term, b.Leader, b.Term, ms(b.At.Sub(up)))
		w.alive()
	}
	rep, _ := w.journals()
	requireSafe(t, rep)
	summary(t, "server-restart", w, start,
		fmt.Sprintf("restarts=%d (A:%d B:%d A+B:%d)", n, which["A"], which["B"], which["A+B"]), safety(rep),
		recovery.p50max("recovery"))
}
