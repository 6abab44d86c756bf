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
// jitter, up to 30 periods: a member that keeps failing to win, or that just
// lost leadership, stands again at most every ~30 heartbeats.
func newTickBackoff(heartbeat, tick time.Duration) *tickBackoff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(heartbeat),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxInterval(30*heartbeat),
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
