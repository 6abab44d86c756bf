package agent

import "time"

// bucket is a token bucket on the monotonic clock: it holds up to burst
// tokens and gains rate tokens per second. The zero value is full on first
// use. It is not safe for concurrent use.
type bucket struct {
	tokens float64
	last   time.Duration
	used   bool
}

// take spends one token at now if there is one.
func (b *bucket) take(now time.Duration, rate, burst float64) bool {
	return b.takeN(now, 1, rate, burst)
}

// takeN spends n tokens at now if there are that many.
func (b *bucket) takeN(now time.Duration, n, rate, burst float64) bool {
	if !b.used {
		b.used, b.tokens, b.last = true, burst, now
	}
	if now > b.last {
		b.tokens = min(burst, b.tokens+rate*(now-b.last).Seconds())
		b.last = now
	}
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// limiter keeps one bucket per key, for at most maxKeys keys (beyond them
// every new key shares one bucket, so a stream of made-up keys cannot grow
// it). It is not safe for concurrent use.
type limiter struct {
	rate, burst float64
	maxKeys     int
	buckets     map[string]*bucket
	overflow    bucket
}

func newLimiter(rate, burst float64, maxKeys int) *limiter {
	return &limiter{rate: rate, burst: burst, maxKeys: maxKeys, buckets: map[string]*bucket{}}
}

// allow spends a token of key's bucket at now.
func (l *limiter) allow(key string, now time.Duration) bool {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			return l.overflow.take(now, l.rate, l.burst)
		}
		b = &bucket{}
		l.buckets[key] = b
	}
	return b.take(now, l.rate, l.burst)
}
