package agent

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// tickBackoff adapts an exponential, jittered backoff to the election core,
// which counts in ticks.
type tickBackoff struct {
	b    *backoff.ExponentialBackOff
	tick time.Duration
}

// newTickBackoff starts at one heartbeat period and doubles, with ±50%
// jitter, up to a wait of suspect (D) at most: a member that keeps failing
// to win, or that just lost leadership, stands again at most every D or so.
// The wait is bounded by D, not by many heartbeats, because whatever made
// the elections fail may stop at any moment, a member that sent forged or
// hostile messages included: once it has, every member stands again within
// D, so the group elects within D and an election (docs/SECURITY.md).
func newTickBackoff(heartbeat, tick, suspect time.Duration) *tickBackoff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(min(heartbeat, suspect*2/3)),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		// With the ±50% jitter, a wait never exceeds 1.5 * suspect*2/3 = D.
		backoff.WithMaxInterval(suspect*2/3),
		backoff.WithMaxElapsedTime(0),
	)
	return &tickBackoff{b: b, tick: tick}
}

// Next returns the next wait in ticks (at least 1).
func (t *tickBackoff) Next() int {
	d := t.b.NextBackOff()
	n := int(d / t.tick)
	if n < 1 {
		n = 1
	}
	return n
}

// Reset starts the sequence over.
func (t *tickBackoff) Reset() { t.b.Reset() }
