// Package ratelimit has the token buckets the agent and its bus limit
// rates with: one bucket, or one per key with a bounded number of keys.
package ratelimit

import "time"

// Bucket is a token bucket on the monotonic clock: it holds up to burst
// tokens and gains rate tokens per second. The zero value is full on first
// use. It is not safe for concurrent use.
type Bucket struct {
	tokens float64
	last   time.Duration
	used   bool
}

// Take spends one token at now if there is one.
func (b *Bucket) Take(now time.Duration, rate, burst float64) bool {
	return b.TakeN(now, 1, rate, burst)
}

// TakeN spends n tokens at now if there are that many.
func (b *Bucket) TakeN(now time.Duration, n, rate, burst float64) bool {
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

// Limiter keeps one bucket per key, for at most maxKeys keys (beyond them
// every new key shares one bucket, so a stream of made-up keys cannot grow
// it). It is not safe for concurrent use.
type Limiter struct {
	rate, burst float64
	maxKeys     int
	buckets     map[string]*Bucket
	overflow    Bucket
}

// NewLimiter returns a limiter of rate tokens per second and burst per key,
// for at most maxKeys keys.
func NewLimiter(rate, burst float64, maxKeys int) *Limiter {
	return &Limiter{rate: rate, burst: burst, maxKeys: maxKeys, buckets: map[string]*Bucket{}}
}

// Allow spends a token of key's bucket at now.
func (l *Limiter) Allow(key string, now time.Duration) bool {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			return l.overflow.Take(now, l.rate, l.burst)
		}
		b = &Bucket{}
		l.buckets[key] = b
	}
	return b.Take(now, l.rate, l.burst)
}
