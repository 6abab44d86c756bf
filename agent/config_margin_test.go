package agent

import (
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// TestLeaseMarginAgreesWithCore: every lease Validate accepts gives the
// election core a configuration it accepts too (the core enforces
// LeaseTicks + HeartbeatTicks < ElectionTicks), also for leases that are
// not whole ticks.
func TestLeaseMarginAgreesWithCore(t *testing.T) {
	members := []election.Member{{ID: "a", Priority: 1}}
	for _, k := range []int{3, 4, 5} {
		for lease := 101 * time.Millisecond; lease < time.Duration(k)*100*time.Millisecond; lease += 3 * time.Millisecond {
			c := Config{ID: "a", Group: "g", Members: members, Heartbeat: 100 * time.Millisecond, HeartbeatMisses: k, Lease: lease, StateDir: "x"}
			if err := c.Validate(); err != nil {
				continue
			}
			ec := election.Config{ID: "a", Members: members, HeartbeatTicks: TicksPerHeartbeat,
				ElectionTicks: int(c.SuspectAfter() / c.Tick()), LeaseTicks: c.LeaseTicks(), AnswerTicks: 10}
			if _, err := election.NewBully(ec); err != nil {
				t.Errorf("k=%d lease %s: agent accepts, core refuses: %v", k, lease, err)
			}
		}
	}
}
