package chaos

import (
	"sync"
	"time"
)

// stallWatch notices when the machine stops running this process for a
// while: a goroutine sleeps 5 ms at a time and records every wake-up that
// came much later than asked. The agents run on the same (often shared)
// cores, so a stall seen here means they were likely starved too. The
// scenarios report stalls and use them to tell a slow machine from a slow
// protocol; they never excuse a safety violation with one.
type stallWatch struct {
	mu     sync.Mutex
	stalls []stall
	stop   chan struct{}
	done   chan struct{}
}

type stall struct {
	at   time.Time // when the late wake-up came
	late time.Duration
}

// stallThreshold is how late a wake-up must be to count as a stall.
const stallThreshold = 50 * time.Millisecond

func newStallWatch() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *stallWatch) run() {
	defer close(w.done)
	const period = 5 * time.Millisecond
	t := time.NewTicker(period)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			if late := now.Sub(last) - period; late >= stallThreshold {
				w.mu.Lock()
				w.stalls = append(w.stalls, stall{at: now, late: late})
				w.mu.Unlock()
			}
			last = now
		}
	}
}

func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}

// worst returns the longest stall that overlapped [from, to].
func (w *stallWatch) worst(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m time.Duration
	for _, s := range w.stalls {
		if !s.at.Before(from) && !s.at.Add(-s.late).After(to) {
			m = max(m, s.late)
		}
	}
	return m
}

// summary gives the count and the longest of all stalls.
func (w *stallWatch) summary() (int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m time.Duration
	for _, s := range w.stalls {
		m = max(m, s.late)
	}
	return len(w.stalls), m
}
