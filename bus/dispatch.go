package bus

import (
	"cmp"
	"sync"

	"github.com/nats-io/nats.go"
)

// dispatchKind names a Shared's dispatchers: announcements, control
// requests and election messages each get their own, so that a flood of one
// kind cannot crowd the others out of its queue.
type dispatchKind int

const (
	dispatchAnnounce dispatchKind = iota
	dispatchControl
	dispatchElection
	dispatchKinds
)

// dispatchQueue is how many messages of one kind wait for a Shared's
// dispatcher in the NATS client, for every bus on the connection together:
// a witness process serving a thousand groups at H = 1 s receives about two
// thousand announcements a second. What does not fit is dropped by the
// client and reported as a slow consumer (the Shared's error handler logs
// it); the dispatcher empties it into its subscriptions' shares before it
// runs each handler, so it fills only if the dispatcher itself is starved.
const dispatchQueue = 4096

// dispatchShare is how many messages of one subscription wait in its
// dispatcher, as the pending limit of an asynchronous subscription of its
// own would let wait: what comes beyond it is dropped (and counted by the
// subscription's onDrop) while the others' messages still get through. On a
// witness serving many sites, one site's gateways flooding its control
// subjects must not drop or delay another site's requests by more than one
// share's handling.
const dispatchShare = 64

// dispatcher runs the handlers of many subscriptions on one goroutine: the
// client delivers their messages to one queue (nats.ChanSubscribe), where an
// asynchronous subscription each would park a goroutine each. Its goroutine
// runs while a subscription is registered. It moves everything the client
// queued into the subscriptions' shares (dispatchShare each) before each
// handler it runs, and serves the subscriptions with messages waiting in
// turn, one message each, so that a flood of one is confined to its share.
// Handlers must not block: they run one at a time for every bus on the
// connection.
type dispatcher struct {
	ch chan *nats.Msg

	life sync.Mutex    // serializes subscribe and unsubscribe (not taken by handlers)
	stop chan struct{} // closed to stop the goroutine; nil while none runs
	done chan struct{} // closed when that goroutine returned

	mu     sync.Mutex // guards routes
	routes map[*nats.Subscription]*route

	// The goroutine's own: the subscriptions with messages waiting, in the
	// order they are served.
	ready []*route
}

// route is one subscription of a dispatcher.
type route struct {
	handle nats.MsgHandler
	// admit, when set, decides before the message takes a place in the
	// share: false drops it (admit counts why). It runs on the
	// dispatcher's goroutine, as handle does.
	admit   func(*nats.Msg) bool
	share   int    // messages waiting at most (0: dispatchShare)
	onDrop  func() // nil: drops are not counted
	pending []*nats.Msg
	queued  bool // in the dispatcher's ready list
}

func newDispatcher() *dispatcher {
	return &dispatcher{ch: make(chan *nats.Msg, dispatchQueue), routes: map[*nats.Subscription]*route{}}
}

// subscribe subscribes handle to subj on nc through d; onDrop (when not nil)
// is called for each message dropped because the subscription's share was
// full. The returned undo unsubscribes; a message of subj still queued then
// is dropped. Neither may be called from a handler.
func (d *dispatcher) subscribe(nc *nats.Conn, subj string, handle nats.MsgHandler, onDrop func()) (*nats.Subscription, func(), error) {
	subs, undo, err := d.subscribeAll(nc, []string{subj}, route{handle: handle, onDrop: onDrop})
	if err != nil {
		return nil, nil, err
	}
	return subs[0], undo, nil
}

// subscribeAll subscribes every subject of subjs as one route, with rt's
// handler, admission and drop count: their messages share one share
// (dispatchShare) and reach the handler in the order the connection
// received them, across the subjects (an election transport's broadcast and
// direct subjects). On an error nothing stays subscribed.
func (d *dispatcher) subscribeAll(nc *nats.Conn, subjs []string, rt route) ([]*nats.Subscription, func(), error) {
	d.life.Lock()
	defer d.life.Unlock()
	r := &route{handle: rt.handle, admit: rt.admit, share: cmp.Or(rt.share, dispatchShare), onDrop: rt.onDrop}
	var subs []*nats.Subscription
	for _, subj := range subjs {
		sub, err := nc.ChanSubscribe(subj, d.ch)
		if err != nil {
			d.drop(subs)
			return nil, nil, err
		}
		d.mu.Lock()
		d.routes[sub] = r
		d.mu.Unlock()
		subs = append(subs, sub)
	}
	if d.stop == nil && len(subs) > 0 {
		d.stop, d.done = make(chan struct{}), make(chan struct{})
		go d.run(d.stop, d.done)
	}
	return subs, func() { d.unsubscribe(subs) }, nil
}

// unsubscribe ends subs (a handler of them already running finishes, as
// with an asynchronous subscription); the last one stops the goroutine and
// waits for it, so that two never run at once.
func (d *dispatcher) unsubscribe(subs []*nats.Subscription) {
	d.life.Lock()
	defer d.life.Unlock()
	if d.drop(subs) {
		close(d.stop)
		<-d.done
		d.stop, d.done = nil, nil
	}
}

// drop unsubscribes subs and forgets their routes; it reports whether the
// last route went while the goroutine runs. d.life is held.
func (d *dispatcher) drop(subs []*nats.Subscription) (last bool) {
	for _, sub := range subs {
		_ = sub.Unsubscribe()
		d.mu.Lock()
		_, ok := d.routes[sub]
		delete(d.routes, sub)
		last = last || ok && len(d.routes) == 0
		d.mu.Unlock()
	}
	return last && d.stop != nil
}

func (d *dispatcher) run(stop, done chan struct{}) {
	defer close(done)
	defer d.forget()
	for {
		if len(d.ready) == 0 {
			select {
			case <-stop:
				return
			case m := <-d.ch:
				d.admit(m)
			}
		}
		for more := true; more; {
			select {
			case m := <-d.ch:
				d.admit(m)
			default:
				more = false
			}
		}
		select {
		case <-stop:
			return
		default:
		}
		d.serveOne()
	}
}

// admit moves m into its subscription's share, or drops it.
func (d *dispatcher) admit(m *nats.Msg) {
	d.mu.Lock()
	r := d.routes[m.Sub]
	d.mu.Unlock()
	switch {
	case r == nil: // unsubscribed
	case r.admit != nil && !r.admit(m): // dropped, and counted, by admit
	case len(r.pending) >= r.share:
		if r.onDrop != nil {
			r.onDrop()
		}
	default:
		r.pending = append(r.pending, m)
		if !r.queued {
			r.queued = true
			d.ready = append(d.ready, r)
		}
	}
}

// serveOne runs the handler of the first subscription waiting for its
// oldest message, and puts the subscription back at the end if more wait.
func (d *dispatcher) serveOne() {
	if len(d.ready) == 0 {
		return
	}
	r := d.ready[0]
	d.ready[0] = nil
	d.ready = d.ready[1:]
	m := r.pending[0]
	r.pending[0] = nil
	r.pending = r.pending[1:]
	if len(r.pending) == 0 {
		r.pending = nil // let a flood's backing array go
		r.queued = false
	} else {
		d.ready = append(d.ready, r)
	}
	d.mu.Lock()
	live := d.routes[m.Sub] == r
	d.mu.Unlock()
	if live {
		r.handle(m)
	}
}

// forget drops what waits when the goroutine ends (the last subscription
// went): a later goroutine starts with nothing.
func (d *dispatcher) forget() {
	for _, r := range d.ready {
		r.pending, r.queued = nil, false
	}
	d.ready = nil
}
