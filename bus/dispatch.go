package bus

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// dispatchKind names a Shared's dispatchers: announcements and control
// requests each get their own, so that a flood of one kind cannot crowd the
// other out of its queue.
type dispatchKind int

const (
	dispatchAnnounce dispatchKind = iota
	dispatchControl
	dispatchKinds
)

// dispatchQueue is how many messages of one kind wait for a Shared's
// dispatcher, for every bus on the connection together: a witness process
// serving a thousand groups at H = 1 s receives about two thousand
// announcements a second. What does not fit is dropped by the NATS client
// and reported as a slow consumer (the Shared's error handler logs it).
const dispatchQueue = 4096

// dispatcher runs the handlers of many subscriptions on one goroutine: the
// client delivers their messages to one queue (nats.ChanSubscribe), where an
// asynchronous subscription each would park a goroutine each. Its goroutine
// runs while a subscription is registered. Handlers must not block: they
// run one at a time for every bus on the connection.
type dispatcher struct {
	ch chan *nats.Msg

	life sync.Mutex    // serializes subscribe and unsubscribe (not taken by handlers)
	stop chan struct{} // closed to stop the goroutine; nil while none runs
	done chan struct{} // closed when that goroutine returned

	mu       sync.Mutex // guards handlers
	handlers map[*nats.Subscription]nats.MsgHandler
}

func newDispatcher() *dispatcher {
	return &dispatcher{ch: make(chan *nats.Msg, dispatchQueue), handlers: map[*nats.Subscription]nats.MsgHandler{}}
}

// subscribe subscribes handle to subj on nc through d. The returned undo
// unsubscribes; a message of subj still queued then is dropped. Neither may
// be called from a handler.
func (d *dispatcher) subscribe(nc *nats.Conn, subj string, handle nats.MsgHandler) (*nats.Subscription, func(), error) {
	d.life.Lock()
	defer d.life.Unlock()
	sub, err := nc.ChanSubscribe(subj, d.ch)
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	d.handlers[sub] = handle
	d.mu.Unlock()
	if d.stop == nil {
		d.stop, d.done = make(chan struct{}), make(chan struct{})
		go d.run(d.stop, d.done)
	}
	return sub, func() { d.unsubscribe(sub) }, nil
}

// unsubscribe ends sub (a handler of it already running finishes, as with
// an asynchronous subscription); the last one stops the goroutine and waits
// for it, so that two never run at once.
func (d *dispatcher) unsubscribe(sub *nats.Subscription) {
	d.life.Lock()
	defer d.life.Unlock()
	_ = sub.Unsubscribe()
	d.mu.Lock()
	_, ok := d.handlers[sub]
	delete(d.handlers, sub)
	last := ok && len(d.handlers) == 0
	d.mu.Unlock()
	if last {
		close(d.stop)
		<-d.done
		d.stop, d.done = nil, nil
	}
}

func (d *dispatcher) run(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case m := <-d.ch:
			d.mu.Lock()
			h := d.handlers[m.Sub]
			d.mu.Unlock()
			if h != nil {
				h(m)
			}
		}
	}
}
