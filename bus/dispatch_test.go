package bus

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// A dispatcher runs the handlers of many subscriptions on one goroutine:
// each handler gets the messages of its own subject, the goroutines do not
// grow with the subscriptions, and the last unsubscribe ends the goroutine
// (a message then queued is not handled).
func TestDispatcherRunsManySubscriptionsOnOneGoroutine(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)

	const n = 200
	d := newDispatcher()
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	got := map[string][]string{} // by subscription's subject: the subjects handled
	undo := make([]func(), n)
	for i := range n {
		subj := fmt.Sprintf("g%03d.ctl.status", i)
		_, u, err := d.subscribe(nc, subj, func(m *nats.Msg) {
			mu.Lock()
			got[subj] = append(got[subj], m.Subject)
			mu.Unlock()
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		undo[i] = u
	}
	if g := runtime.NumGoroutine() - before; g > 1 {
		t.Errorf("%d subscriptions added %d goroutines, want 1", n, g)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := pub.Publish(fmt.Sprintf("g%03d.ctl.status", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "every handler to get its message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	mu.Lock()
	for subj, subjects := range got {
		if len(subjects) != 1 || subjects[0] != subj {
			t.Errorf("handler of %s got %v", subj, subjects)
		}
	}
	mu.Unlock()

	for _, u := range undo[1:] {
		u()
	}
	if d.stop == nil {
		t.Fatal("the goroutine ended with a subscription left")
	}
	undo[0]()
	if d.stop != nil {
		t.Error("the goroutine still runs after the last unsubscribe")
	}
	// Queued after the end: nobody handles it, and a new subscription
	// starts the goroutine again and gets its own messages.
	d.ch <- &nats.Msg{Subject: "g000.ctl.status"}
	again := make(chan string, 1)
	_, u, err := d.subscribe(nc, "again", func(m *nats.Msg) { again <- m.Subject }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("again", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case subj := <-again:
		if subj != "again" {
			t.Errorf("got %q", subj)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a subscription after a restart got nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got["g000.ctl.status"]) != 1 {
		t.Errorf("a message queued after its unsubscribe was handled: %v", got["g000.ctl.status"])
	}
}

// A flood of one subscription is confined to its share: while the
// dispatcher is busy, 3,000 messages of one subscription then one of
// another queue in the client; the other's runs after one more of the
// flood's, not after all of them, and what is over the flood's share is
// dropped and counted, not handled late.
func TestDispatcherConfinesAFloodToItsSubscription(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)

	d := newDispatcher()
	var handledA, dropsA, aWhenB atomic.Int64
	aWhenB.Store(-1)
	entered, release := make(chan struct{}), make(chan struct{})
	_, undoA, err := d.subscribe(nc, "a.ctl", func(*nats.Msg) {
		if handledA.Add(1) == 1 {
			close(entered)
			<-release
		}
	}, func() { dropsA.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer undoA()
	_, undoB, err := d.subscribe(nc, "b.ctl", func(*nats.Msg) { aWhenB.Store(handledA.Load()) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer undoB()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := pub.Publish("a.ctl", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first message was not handled")
	}
	const flood = 3000
	for range flood {
		if err := pub.Publish("a.ctl", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish("b.ctl", nil); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the flood and the other's message queued in the client", func() bool {
		return len(d.ch) == flood+1
	})
	close(release)
	poll.Until(t, 10*time.Second, "the other subscription's message handled", func() bool { return aWhenB.Load() >= 0 })
	if got := aWhenB.Load(); got > 2 {
		t.Errorf("the other subscription ran after %d of the flood's messages, want at most 2 (the one running, then one turn)", got)
	}
	poll.Until(t, 10*time.Second, "the flood's share handled", func() bool { return handledA.Load() == 1+dispatchShare })
	if got, want := dropsA.Load(), int64(flood-dispatchShare); got != want {
		t.Errorf("%d of the flood dropped, want %d (all over its share of %d)", got, want, dispatchShare)
	}
	if len(d.ch) != 0 {
		t.Errorf("%d messages still queued", len(d.ch))
	}
	if got := handledA.Load(); got != 1+dispatchShare {
		t.Errorf("%d of the flood handled, want %d", got, 1+dispatchShare)
	}
}

// subscriberAndPublisher starts a server and returns two connections to it:
// one for the dispatcher's subscriptions, one to publish.
func subscriberAndPublisher(t *testing.T) (nc, pub *nats.Conn) {
	t.Helper()
	s := startPlainServer(t)
	var err error
	if nc, err = nats.Connect(s.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if pub, err = nats.Connect(s.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	return nc, pub
}
