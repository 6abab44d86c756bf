package bus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
)

// TestGroupStatusSignedAndVerified: a member asks its group over its own
// connection, signed with its key, and gets every other member's own report;
// forged answers (unsigned, or signed by a key that is not the member's)
// are left out even when they come first.
func TestGroupStatusSignedAndVerified(t *testing.T) {
	s := newSecureSite(t)
	forger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(agent.StatusReport{ID: "gw2", Group: secGroup, Role: "leader", Leader: "gw2", Version: "forged"})
	sub, err := s.admin.Subscribe(wire.ControlSubject(secPrefix, secGroup, wire.VerbStatus), func(m *nats.Msg) {
		_ = s.admin.Publish(m.Reply, forged)
		signed := &nats.Msg{Subject: m.Reply, Data: forged}
		if sign.SignControl(forger, signed, wire.Numbering{Epoch: 1, N: 1}.String()) == nil {
			_ = s.admin.PublishMsg(signed)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := s.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	b := s.buses["gw1"]
	if b == nil {
		t.Fatal("bus.Expose stored no bus")
	}
	rs, err := b.GroupStatus(context.Background(), 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d answers, want gw2's and gw3's: %+v", len(rs), rs)
	}
	for i, id := range []string{"gw2", "gw3"} {
		if rs[i].Report.ID != id || rs[i].Report.Version == "forged" || rs[i].At.IsZero() {
			t.Fatalf("answer %d = %+v, want %s's own", i, rs[i], id)
		}
	}
	if rs[0].Report.Role != "follower" || rs[1].Report.Role != "leader" {
		t.Fatalf("roles %s %s, want follower leader", rs[0].Report.Role, rs[1].Report.Role)
	}

	// Waiting for gw3 only ends at its answer, long before the timeout.
	start := time.Now()
	rs, err = b.GroupStatus(context.Background(), time.Minute, []string{"gw3"})
	if err != nil || time.Since(start) > 30*time.Second {
		t.Fatalf("waiting for gw3: %v after %s", err, time.Since(start))
	}
	if len(rs) == 0 || rs[len(rs)-1].Report.ID != "gw3" {
		t.Fatalf("waiting for gw3: %+v", rs)
	}

	// A cancelled context ends the wait at once with what came so far.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.GroupStatus(ctx, time.Minute, nil); err == nil {
		t.Fatal("GroupStatus with a cancelled context returned no error")
	}
}
