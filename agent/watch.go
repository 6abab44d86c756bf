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
	w := a.out.watchers.add()
	return w.ch, w.cancel
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

// watcher moves the changes of its queue to its channel, on a goroutine of
// its own.
type watcher struct {
	ch     chan LeaderChange
	mu     sync.Mutex
	queue  []LeaderChange
	wake   chan struct{} // has a value when the queue grew or the watch ends
	ending bool          // no more changes will come: drain, then close
	stop   chan struct{} // closed by cancel
	once   sync.Once
	parent *watchers
}

func (ws *watchers) add() *watcher {
	w := &watcher{ch: make(chan LeaderChange), wake: make(chan struct{}, 1), stop: make(chan struct{}), parent: ws}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		close(w.ch)
		w.once.Do(func() { close(w.stop) })
		return w
	}
	if ws.set == nil {
		ws.set = map[*watcher]struct{}{}
	}
	ws.set[w] = struct{}{}
	ws.mu.Unlock()
	go w.run()
	return w
}

// publish queues c for every watcher; it never blocks.
func (ws *watchers) publish(c LeaderChange) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set {
		w.mu.Lock()
		w.queue = append(w.queue, c)
		w.mu.Unlock()
		w.signal()
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
		w.mu.Unlock()
		w.signal()
	}
	ws.set = nil
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) cancel() {
	w.once.Do(func() {
		w.parent.mu.Lock()
		delete(w.parent.set, w)
		w.parent.mu.Unlock()
		close(w.stop)
	})
}

func (w *watcher) run() {
	defer close(w.ch)
	for {
		w.mu.Lock()
		q, ending := w.queue, w.ending
		w.queue = nil
		w.mu.Unlock()
		for _, c := range q {
			select {
			case w.ch <- c:
			case <-w.stop:
				return
			}
		}
		if len(q) > 0 {
			continue
		}
		if ending {
			return
		}
		select {
		case <-w.wake:
		case <-w.stop:
			return
		}
	}
}
