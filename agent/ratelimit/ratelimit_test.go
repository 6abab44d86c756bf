package ratelimit

import (
	"testing"
	"time"
)

func TestTokenBuckets(t *testing.T) {
	var b Bucket
	for i := 0; i < 5; i++ {
		if !b.Take(0, 1, 5) {
			t.Fatalf("token %d of a burst of 5 refused", i)
		}
	}
	if b.Take(0, 1, 5) {
		t.Fatal("a sixth token at once")
	}
	if !b.Take(time.Second, 1, 5) || b.Take(time.Second, 1, 5) {
		t.Fatal("one token per second")
	}
	l := NewLimiter(1, 1, 2)
	if !l.Allow("a", 0) || !l.Allow("b", 0) || l.Allow("a", 0) {
		t.Fatal("per-key buckets")
	}
	if !l.Allow("c", 0) || l.Allow("d", 0) {
		t.Fatal("keys beyond maxKeys share one bucket")
	}
}
