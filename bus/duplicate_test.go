package bus_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/bus"
)

// dupLog records the instances a transport reported as duplicates.
type dupLog struct {
	mu  sync.Mutex
	got []string
}

func (d *dupLog) add(s string) { d.mu.Lock(); d.got = append(d.got, s); d.mu.Unlock() }
func (d *dupLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// Two transports with one member id on one bus each report the other's
// instance; a transport alone never reports one, even on a connection that
// echoes its own messages back; the other members never receive the
// announcements.
func TestInstanceAnnouncementsFindADuplicate(t *testing.T) {
	s := startNATSTestServer(t)
	members := []string{"gw1", "gw2"}
	hooks := map[string]*hookLog{}
	start := func(self, inst string, echo bool) *dupLog {
		opts := []nats.Option{nats.NoEcho()}
		if echo {
			opts = nil
		}
		d := &dupLog{}
		hl := newHookLog()
		hooks[inst] = hl
		tr, err := bus.NewNATSTransport(connectNATSTest(t, s, opts...), bus.NATSTransportConfig{Group: "g", Self: self, Members: members,
			Hooks: hl.hooks(), Heartbeat: 20 * time.Millisecond, Instance: inst, OnDuplicate: d.add})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return d
	}
	alone := start("gw1", "hostA/1/aa", true) // echoes: hears its own announcements
	other := start("gw2", "hostB/2/bb", false)
	// Long enough for many announcements each way.
	<-time.After(200 * time.Millisecond) // the period under test: announcements every 20 ms
	if got := alone.list(); len(got) != 0 {
		t.Fatalf("a transport alone reported duplicates %v", got)
	}
	if bad := hooks["hostB/2/bb"].badCounts(); len(bad) != 0 {
		t.Fatalf("another member received something: %v", bad)
	}
	dup := start("gw1", "hostC/3/cc", false)
	poll(t, natsTestWait, "both gw1 transports report the other", func() bool {
		a, b := alone.list(), dup.list()
		return len(a) > 0 && len(b) > 0
	})
	for _, inst := range alone.list() {
		if inst != "hostC/3/cc" {
			t.Fatalf("the first gw1 reported %q", inst)
		}
	}
	for _, inst := range dup.list() {
		if inst != "hostA/1/aa" {
			t.Fatalf("the second gw1 reported %q", inst)
		}
	}
	if got, bad := other.list(), hooks["hostB/2/bb"].badCounts(); len(got) != 0 || len(bad) != 0 {
		t.Fatalf("gw2 received announcements: %v %v", got, bad)
	}
}
