package bus

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// Periodic tasks run at their first time and then every period, one run of
// a task never beside another, on one goroutine for all of them; a stopped
// task never runs again, and the goroutine ends with the last task.
func TestPeriodicTasksShareOneGoroutine(t *testing.T) {
	const n = 50
	var (
		runs    [n]atomic.Int64
		running atomic.Int32 // tasks running at once, over all tasks
		overlap atomic.Bool
	)
	tasks := make([]*periodic, n)
	for i := range tasks {
		tasks[i] = startPeriodic(time.Duration(i)*time.Millisecond, 2*time.Millisecond, func() {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			runs[i].Add(1)
			running.Add(-1)
		})
	}
	poll.Until(t, 10*time.Second, "every task ran 5 times", func() bool {
		for i := range runs {
			if runs[i].Load() < 5 {
				return false
			}
		}
		return true
	})
	if overlap.Load() {
		t.Error("two tasks ran at once: they do not share one goroutine")
	}

	// A stopped task does not run again while the others run on.
	tasks[0].stop()
	stoppedAt := runs[0].Load()
	base := runs[1].Load()
	poll.Until(t, 10*time.Second, "task 1 ran 10 more times", func() bool { return runs[1].Load() >= base+10 })
	if got := runs[0].Load(); got != stoppedAt {
		t.Errorf("stopped task ran %d times after stop", got-stoppedAt)
	}
	var alsoRan bool
	tasks[0].also(func() { alsoRan = true })
	if alsoRan {
		t.Error("also ran on a stopped task")
	}
	tasks[1].also(func() { alsoRan = true })
	if !alsoRan {
		t.Error("also did not run on a running task")
	}

	for _, p := range tasks {
		p.stop()
	}
	poll.Until(t, 10*time.Second, "the timers' goroutine to end", func() bool {
		procTimers.mu.Lock()
		defer procTimers.mu.Unlock()
		return !procTimers.running && procTimers.h.Len() == 0
	})
}

// stop waits for a run in progress: once it returns, the task's function
// is not running and never runs again.
func TestPeriodicStopWaitsForTheRun(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var inRun, stopped, ranAfter atomic.Bool
	p := startPeriodic(0, time.Millisecond, func() {
		inRun.Store(true)
		if stopped.Load() {
			ranAfter.Store(true)
		}
		once.Do(func() {
			close(entered)
			<-release
		})
		inRun.Store(false)
	})
	<-entered
	var calling atomic.Bool
	busyAtReturn := make(chan bool)
	go func() {
		calling.Store(true)
		p.stop()
		stopped.Store(true)
		busyAtReturn <- inRun.Load()
	}()
	poll.Until(t, 10*time.Second, "stop to be called", calling.Load)
	close(release)
	if <-busyAtReturn {
		t.Fatal("stop returned while the task was running")
	}
	// Another task's runs show the timers went on; the stopped one stays.
	var n atomic.Int64
	r := startPeriodic(0, time.Millisecond, func() { n.Add(1) })
	defer r.stop()
	poll.Until(t, 10*time.Second, "another task to run 10 times", func() bool { return n.Load() >= 10 })
	if ranAfter.Load() {
		t.Error("the task ran after stop returned")
	}
}

// At most one announcement an interval answers news, however many
// announcements turn out to be news: a member whose handling lags past the
// ttl finds news in every one.
func TestNewsAnswersOneAnInterval(t *testing.T) {
	n := newsAnswers{interval: time.Second}
	t0 := time.Unix(1000, 0)
	answered := 0
	// A starved member handles 40 announcements, each news, over 2 s.
	for i := range 40 {
		if n.allow(t0.Add(time.Duration(i) * 50 * time.Millisecond)) {
			answered++
		}
	}
	if answered != 2 {
		t.Errorf("answered %d of 40 news in 2 s, want 2 (one a second)", answered)
	}
	if !n.allow(t0.Add(3 * time.Second)) {
		t.Error("news after a quiet interval not answered at once")
	}
}

// sooner brings a task's next run forward, never back, and setEvery sets
// the period of the runs after it.
func TestPeriodicSoonerAndSetEvery(t *testing.T) {
	var runs atomic.Int64
	p := startPeriodic(time.Hour, time.Hour, func() { runs.Add(1) })
	defer p.stop()
	next := func() time.Time {
		procTimers.mu.Lock()
		defer procTimers.mu.Unlock()
		return p.next
	}
	scheduled := next()
	p.sooner(scheduled.Add(time.Minute))
	if got := next(); !got.Equal(scheduled) {
		t.Fatalf("sooner to a later time moved the run from %v to %v", scheduled, got)
	}
	p.setEvery(time.Millisecond)
	if got := next(); !got.Equal(scheduled) {
		t.Fatalf("setEvery moved the scheduled run from %v to %v", scheduled, got)
	}
	p.sooner(time.Now())
	// Brought forward, it runs; then every millisecond.
	poll.Until(t, 10*time.Second, "the task ran 3 times", func() bool { return runs.Load() >= 3 })
}
