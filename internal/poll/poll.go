// Package poll waits for a condition that another goroutine or process makes
// true: it checks the condition again and again, a little longer apart each
// time (from 1 ms to 10 ms), until it holds or a deadline passes. Tests use it
// instead of sleeping for a fixed time; it is the one polling helper of the
// repository's tests and tools. Every checks at a fixed interval instead, for
// a wait whose end is itself a measurement.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// maxInterval bounds the wait between two checks: short enough that a test
// or a tool sees a change within about 10 ms, long enough that polling an
// agent's HTTP endpoint does not load a shared 2-core machine.
const maxInterval = 10 * time.Millisecond

// For calls cond until it returns true and returns nil, or returns an error
// naming what after d has passed with cond still false. The last reason cond
// gave is in the error.
func For(d time.Duration, what string, cond func() (bool, string)) error {
	return wait(d, time.Millisecond, maxInterval, what, cond)
}

// Every is For with a fixed interval between checks, for a wait whose end is
// a measured time (a failover, a recovery): For's steps growing to 10 ms
// would date the change up to 10 ms late, Every dates it within interval.
func Every(interval, d time.Duration, what string, cond func() (bool, string)) error {
	return wait(d, interval, interval, what, cond)
}

// wait checks cond every interval, doubling it up to maxStep, until cond
// holds or d has passed.
func wait(d, interval, maxStep time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		if !time.Now().Before(deadline) {
			if why != "" {
				return fmt.Errorf("timed out after %s waiting for %s: %s", d, what, why)
			}
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(min(interval, time.Until(deadline)))
		interval = min(2*interval, maxStep)
	}
}

// Until calls cond until it returns true, or fails t (from the calling
// goroutine) when d has passed with cond still false.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := For(d, what, func() (bool, string) { return cond(), "" }); err != nil {
		t.Fatal(err)
	}
}

// UntilWhy is Until for a condition that says why it does not hold yet: the
// last reason is in the failure.
func UntilWhy(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := For(d, what, cond); err != nil {
		t.Fatal(err)
	}
}
