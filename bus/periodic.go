package bus

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/internal/dueheap"
)

// periodic runs f after first and then every d. Every periodic task of the
// process runs on one goroutine (timers), which runs while tasks are
// scheduled: a witness process serving a thousand groups would otherwise
// park a goroutine per group for each task, or start one per run (an
// AfterFunc), growing its stack anew each time. f must be short and must not
// block: it delays the others. Runs never overlap; after stop returns none
// is running and none starts.
type periodic struct {
	d atomic.Int64 // the period (setEvery)
	f func()

	mu      sync.Mutex // held while f runs
	stopped bool

	// Guarded by procTimers.mu.
	next  time.Time
	index int // in the heap; -1 when not in it
}

func startPeriodic(first, d time.Duration, f func()) *periodic {
	p := &periodic{f: f, index: -1}
	p.d.Store(int64(d))
	procTimers.add(p, time.Now().Add(first))
	return p
}

// setEvery makes d the period from the next run on (the run scheduled
// already stays; see sooner).
func (p *periodic) setEvery(d time.Duration) { p.d.Store(int64(d)) }

// sooner moves the next run to at if it was scheduled later; it does
// nothing to a task that is running or stopped.
func (p *periodic) sooner(at time.Time) { procTimers.sooner(p, at) }

// run runs f unless stopped; it reports whether to run again.
func (p *periodic) run() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.f()
	return true
}

// also runs g as one of the runs (never beside one), unless stopped; the
// schedule is unchanged.
func (p *periodic) also(g func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		g()
	}
}

func (p *periodic) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	procTimers.remove(p)
}

// procTimers runs the process's periodic tasks.
var procTimers = &timers{wake: make(chan struct{}, 1)}

// timers is a heap of periodic tasks by their next run, and the goroutine
// that runs them when due.
type timers struct {
	mu      sync.Mutex
	h       dueheap.Heap[*periodic]
	running bool
	wake    chan struct{} // a task was added
}

func (ts *timers) add(p *periodic, at time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	p.next = at
	ts.h.Push(p)
	if !ts.running {
		ts.running = true
		go ts.loop()
	}
	select {
	case ts.wake <- struct{}{}:
	default:
	}
}

func (ts *timers) sooner(p *periodic, at time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if p.index < 0 || !p.next.After(at) {
		return
	}
	p.next = at
	ts.h.Fix(p)
	select {
	case ts.wake <- struct{}{}:
	default:
	}
}

func (ts *timers) remove(p *periodic) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.h.Remove(p)
}

func (ts *timers) loop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		ts.mu.Lock()
		p, ok := ts.h.First()
		if !ok {
			ts.running = false
			ts.mu.Unlock()
			return
		}
		if d := time.Until(p.next); d > 0 {
			ts.mu.Unlock()
			t.Reset(d)
			select {
			case <-t.C:
			case <-ts.wake:
			}
			continue
		}
		ts.h.Pop()
		ts.mu.Unlock()
		if p.run() {
			ts.mu.Lock()
			// Not if stopped meanwhile: stop removed it, or will find it
			// gone and, stopped, it would not run anyway.
			if p.index < 0 && !p.isStopped() {
				p.next = time.Now().Add(time.Duration(p.d.Load()))
				ts.h.Push(p)
			}
			ts.mu.Unlock()
		}
	}
}

func (p *periodic) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// DueAt and HeapIndex make a task a dueheap.Item: due at its next run.
func (p *periodic) DueAt() time.Time { return p.next }
func (p *periodic) HeapIndex() *int  { return &p.index }
