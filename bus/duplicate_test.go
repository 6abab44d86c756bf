package bus_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
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
	conns := map[string]*nats.Conn{}
	start := func(self, inst string, echo bool) *dupLog {
		opts := []nats.Option{nats.NoEcho()}
		if echo {
			opts = nil
		}
		d := &dupLog{}
		hl := newHookLog()
		hooks[inst] = hl
		conns[inst] = connectNATSTest(t, s, opts...)
		tr, err := bus.NewNATSTransport(conns[inst], bus.NATSTransportConfig{Group: "g", Self: self, Members: members,
			Hooks: hl.hooks(), Heartbeat: 20 * time.Millisecond, Instance: inst, OnDuplicate: d.add})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return d
	}
	alone := start("gw1", "hostA/1/aa", true) // echoes: hears its own announcements
	other := start("gw2", "hostB/2/bb", false)
	// Until its own announcements came back to its connection (where its
	// transport receives them) five times.
	var echoed atomic.Int32
	own, err := conns["hostA/1/aa"].Subscribe(wire.DirectSubject(agent.DefaultSubjectPrefix, "g", "gw1", "gw1"), func(m *nats.Msg) {
		if strings.Contains(string(m.Data), "hostA/1/aa") {
			echoed.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, natsTestWait, "gw1's own announcements echoed five times", func() bool { return echoed.Load() >= 5 })
	_ = own.Unsubscribe()
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
