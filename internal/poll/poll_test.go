package poll

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	err := For(time.Minute, "three calls", func() (bool, string) {
		return calls.Add(1) == 3, "not yet"
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestForTimesOutWithTheLastReason(t *testing.T) {
	var calls atomic.Int32
	err := For(5*time.Millisecond, "the impossible", func() (bool, string) {
		n := calls.Add(1)
		return false, "call " + string(rune('0'+n%10))
	})
	if err == nil {
		t.Fatal("For returned nil for a condition that never holds")
	}
	last := "call " + string(rune('0'+calls.Load()%10))
	if !strings.Contains(err.Error(), "the impossible") || !strings.HasSuffix(err.Error(), last) {
		t.Fatalf("error %q does not name what was awaited and the last reason %q", err, last)
	}
}

// A condition that holds at once is never waited for.
func TestForChecksBeforeWaiting(t *testing.T) {
	if err := For(0, "a true condition", func() (bool, string) { return true, "" }); err != nil {
		t.Fatal(err)
	}
}

// Every keeps its interval: a wait of 60 ms at 20 ms checks the condition
// about four times (at 0, 20, 40 and 60 ms), where For would check it about
// ten times; and it times out like For.
func TestEveryKeepsItsInterval(t *testing.T) {
	var calls atomic.Int32
	err := Every(20*time.Millisecond, 60*time.Millisecond, "the impossible", func() (bool, string) {
		calls.Add(1)
		return false, "never"
	})
	if err == nil || !strings.HasSuffix(err.Error(), "never") {
		t.Fatalf("Every returned %v, want a timeout with the last reason", err)
	}
	// Sleeps may run long on a loaded machine, never short: at most 4 calls.
	if n := calls.Load(); n < 2 || n > 4 {
		t.Fatalf("cond called %d times in 60 ms at a 20 ms interval, want 2 to 4", n)
	}
}
