package agent

import (
	"sync"
	"time"
)

// LeaderChange is one change of the leader known to an agent. It is also
// the body of the events the agent publishes on its group's events subject
// (see EventsSubject), so its JSON form is part of the operating contract:
// fields are only ever added.
type LeaderChange struct {
	// ID and Group name the agent that saw the change.
	ID    string `json:"id"`
	Group string `json:"group"`
	// Seq numbers the changes this agent saw since it started: 1, 2, 3...
	// A gap means a change was missed.
	Seq uint64 `json:"seq"`
	// Leader is the new leader, "" while none is known (the old one was
	// suspected, stepped down or resigned, and no successor is known yet).
	Leader string `json:"leader"`
	// Previous is the leader before the change ("" for none).
	Previous string `json:"previous"`
	// Term is the agent's term at the change; with a leader, its term.
	Term uint64 `json:"term"`
	// Time is when the agent saw the change.
	Time time.Time `json:"time"`
}

// Watch returns a channel that receives every leader change this agent sees
// from now on, in order, none dropped: each watcher has a queue of its own
// with no bound, so a slow reader delays only itself, never the election.
// The channel is closed after the last change once Run has returned, or at
// once when Watch is called after Run returned. cancel stops the watch and
// closes the channel; queued changes are then dropped. Call Watch before Run
// to see the first election.
func (a *Agent) Watch() (<-chan LeaderChange, func()) {
	ch := make(chan LeaderChange)
	w := a.out.watchers.add(&watcher{ch: ch})
	return ch, w.cancel
}

// WatchFunc calls f with every leader change this agent sees from now on, in
// order, none dropped, as Watch delivers them, but on a goroutine that runs
// only while changes wait (a bus serving one of many groups parks none). f
// must not call the agent's Run. wait returns once Run returned and f
// returned for the last change.
func (a *Agent) WatchFunc(f func(LeaderChange)) (wait func()) {
	w := a.out.watchers.add(&watcher{f: f})
	return func() { <-w.ended }
}

func (a *Agent) leaderChange(previous, leader string, term uint64) LeaderChange {
	a.out.watchers.seq++
	return LeaderChange{ID: a.cfg.ID, Group: a.cfg.Group, Seq: a.out.watchers.seq, Leader: leader,
		Previous: previous, Term: term, Time: time.Now().UTC()}
}

// watchers is the set of an agent's watchers. Its zero value is ready to use.
type watchers struct {
	seq uint64 // the last LeaderChange.Seq; only the agent's loop uses it

	mu     sync.Mutex
	set    map[*watcher]struct{}
	closed bool
}

// watcher moves the changes of its queue to its channel (Watch) or its
// function (WatchFunc), on a goroutine that runs while changes wait.
type watcher struct {
	ch chan LeaderChange  // Watch's, or nil
	f  func(LeaderChange) // WatchFunc's, or nil

	mu        sync.Mutex
	queue     []LeaderChange
	running   bool          // a goroutine delivers, or the watch is over
	ending    bool          // no more changes will come: deliver, then end
	stop      chan struct{} // closed by cancel
	ended     chan struct{} // closed when the watch is over
	once      sync.Once
	parent    *watchers
	cancelled bool // cancel was called
	finished  bool // ch closed and ended closed
}

func (ws *watchers) add(w *watcher) *watcher {
	w.stop, w.ended, w.parent = make(chan struct{}), make(chan struct{}), ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		w.once.Do(func() { close(w.stop) })
		w.mu.Lock()
		w.finish()
		w.mu.Unlock()
		return w
	}
	if ws.set == nil {
		ws.set = map[*watcher]struct{}{}
	}
	ws.set[w] = struct{}{}
	return w
}

// publish queues c for every watcher; it never blocks.
func (ws *watchers) publish(c LeaderChange) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set {
		w.mu.Lock()
		w.queue = append(w.queue, c)
		w.wake()
		w.mu.Unlock()
	}
}

// close ends every watch: each watcher delivers what it has queued, then
// closes its channel. Later watches get a closed channel.
func (ws *watchers) close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	for w := range ws.set {
		w.mu.Lock()
		w.ending = true
		w.wake()
		w.mu.Unlock()
	}
	ws.set = nil
}

// wake starts the delivering goroutine unless one runs (w.mu held).
func (w *watcher) wake() {
	if !w.running {
		w.running = true
		go w.run()
	}
}

// finish ends the watch (w.mu held): closes the channel and ended, once.
// running stays set, so that no goroutine starts again.
func (w *watcher) finish() {
	w.running = true
	if w.finished {
		return
	}
	w.finished = true
	if w.ch != nil {
		close(w.ch)
	}
	close(w.ended)
}

func (w *watcher) cancel() {
	w.once.Do(func() {
		w.parent.mu.Lock()
		delete(w.parent.set, w)
		w.parent.mu.Unlock()
		close(w.stop)
		w.mu.Lock()
		w.cancelled = true
		if !w.running {
			w.finish()
		}
		w.mu.Unlock()
	})
}

func (w *watcher) run() {
	for {
		w.mu.Lock()
		q, ending := w.queue, w.ending
		w.queue = nil
		if len(q) == 0 {
			if ending || w.cancelled {
				w.finish()
			} else {
				w.running = false
			}
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for _, c := range q {
			if !w.deliver(c) {
				w.mu.Lock()
				w.finish()
				w.mu.Unlock()
				return
			}
		}
	}
}

// deliver hands c over; false when the watch was cancelled.
func (w *watcher) deliver(c LeaderChange) bool {
	if w.f != nil {
		select {
		case <-w.stop:
			return false
		default:
		}
		w.f(c)
		return true
	}
	select {
	case w.ch <- c:
		return true
	case <-w.stop:
		return false
	}
}
