package agent

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countingRoutes is a RouteWatcher that also counts its routes, as the
// embedded server does.
type countingRoutes struct {
	fakeRoutes
}

func (c *countingRoutes) NumRoutes() int { return len(c.RoutedServers()) }

// TestRoutePollerWakesTheLoop: the poller reports at once when the number of
// routes falls, and not when it stays or grows.
func TestRoutePollerWakesTheLoop(t *testing.T) { synctest.Test(t, testRoutePollerWakesTheLoop) }

func testRoutePollerWakesTheLoop(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(1)
	defer mb.Close()
	stop := WatchRoutes(routes, h, mb, nil)
	defer stop()
	routes.set(map[string]bool{"S1": true, "S2": true, "S4": true}) // grows
	select {
	case r := <-mb.C():
		t.Fatalf("reported %+v while no route closed", r)
	case <-time.After(20 * routePoll(h)):
	}
	routes.set(map[string]bool{"S1": true})
	start := time.Now()
	select {
	case r := <-mb.C():
		if r.Kind != InputRoutesClosed || len(r.Closed) != 2 || r.Routes != 1 {
			t.Fatalf("reported %+v, want S2 and S4 closed, 1 route left", r)
		}
		if took := time.Since(start); took > routePoll(h) {
			t.Fatalf("reported %s after the routes closed, want within one poll (%s)", took, routePoll(h))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report after routes closed")
	}
}

// TestRoutePollerSeesASwap: a route that closed while another opened keeps
// the number of routes; the poller still reports it within H.
func TestRoutePollerSeesASwap(t *testing.T) { synctest.Test(t, testRoutePollerSeesASwap) }

func testRoutePollerSeesASwap(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(4)
	defer mb.Close()
	stop := WatchRoutes(routes, h, mb, nil)
	defer stop()
	routes.set(map[string]bool{"S1": true, "S4": true})
	start := time.Now()
	r := <-mb.C()
	if r.Kind != InputRoutesClosed || len(r.Closed) != 1 || r.Closed[0].ID != "S2" {
		t.Fatalf("reported %+v, want S2 closed", r)
	}
	if took := time.Since(start); took > h+routePoll(h) {
		t.Fatalf("the swap was reported after %s, want within H + one poll", took)
	}
}

// TestRoutePollerReportsAgainWhenTheMailboxWasFull: a report the loop could
// not take is not lost: it comes with the next poll that finds room.
func TestRoutePollerReportsAgainWhenTheMailboxWasFull(t *testing.T) {
	synctest.Test(t, testRoutePollerReportsAgainWhenTheMailboxWasFull)
}

func testRoutePollerReportsAgainWhenTheMailboxWasFull(t *testing.T) {
	const h = 100 * time.Millisecond
	routes := &countingRoutes{fakeRoutes{id: "S3", routed: map[string]bool{"S1": true, "S2": true}}}
	mb := NewMailbox(1)
	defer mb.Close()
	if !mb.Offer(Input{Kind: InputMessage}) {
		t.Fatal("an empty mailbox refused an input")
	}
	var dropped atomic.Int32
	stop := WatchRoutes(routes, h, mb, func(string) { dropped.Add(1) })
	defer stop()
	routes.set(map[string]bool{"S1": true})
	stall(3 * routePoll(h)) // three polls find the mailbox full
	synctest.Wait()
	if dropped.Load() == 0 {
		t.Fatal("a report that did not fit was not counted")
	}
	<-mb.C() // make room
	r := <-mb.C()
	if r.Kind != InputRoutesClosed || len(r.Closed) != 1 || r.Closed[0].ID != "S2" {
		t.Fatalf("reported %+v, want S2 closed", r)
	}
}

func TestRoutePollFollowsH(t *testing.T) {
	for h, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: 5 * time.Millisecond,
		time.Second:            50 * time.Millisecond,
		20 * time.Millisecond:  2 * time.Millisecond,
		0:                      2 * time.Millisecond,
	} {
		if got := routePoll(h); got != want {
			t.Errorf("routePoll(%s) = %s, want %s", h, got, want)
		}
	}
}
