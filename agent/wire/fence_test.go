package wire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// A fence (what is left of the sender's fast-path fence) goes out in
// milliseconds rounded up, so that the receiver never waits less than the
// sender would have; it is sent only to members of protocol 5 or later and
// only on an ack or a granted vote.
func TestWireFence(t *testing.T) {
	ack := election.Message{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 10}
	for _, tc := range []struct {
		fence time.Duration
		ms    string
		want  time.Duration
	}{
		{10 * time.Millisecond, `"fence":10`, 10 * time.Millisecond},
		{9*time.Millisecond + time.Microsecond, `"fence":10`, 10 * time.Millisecond}, // rounded up
		{time.Nanosecond, `"fence":1`, time.Millisecond},
	} {
		m := ack
		m.Fence = int64(tc.fence)
		data, err := wire.EncodeAt("g", m, 0, 0, wire.ProtocolMax)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), tc.ms) {
			t.Errorf("fence %s: encoded %s, want %s", tc.fence, data, tc.ms)
		}
		got, err := wire.Decode(data, wireSubject(m), wireCtx())
		if err != nil || got.Fence != int64(tc.want) {
			t.Errorf("fence %s: decoded %s (%v), want %s", tc.fence, time.Duration(got.Fence), err, tc.want)
		}
	}

	// Not to an older member, whose parser drops an unknown key.
	withFence := ack
	withFence.Fence = int64(5 * time.Millisecond)
	for level := wire.ProtocolMin; level < wire.ProtocolFence; level++ {
		data, err := wire.EncodeAt("g", withFence, 0, 0, level)
		if err != nil || strings.Contains(string(data), "fence") {
			t.Errorf("protocol %d gets a fence: %s (%v)", level, data, err)
		}
	}

	// The closed connection it is about goes with it, and only with it.
	about := ack
	about.Fence, about.FenceConn = int64(3*time.Millisecond), "NSRV/7"
	data, err := wire.EncodeAt("g", about, 0, 0, wire.ProtocolMax)
	if err != nil || !strings.Contains(string(data), `"fenceconn":"NSRV/7"`) {
		t.Fatalf("fenceconn: %s (%v)", data, err)
	}
	if got, err := wire.Decode(data, wireSubject(about), wireCtx()); err != nil || got.FenceConn != "NSRV/7" || got.Fence != int64(3*time.Millisecond) {
		t.Errorf("decoded %+v (%v)", got, err)
	}
	if data, _ := wire.EncodeAt("g", about, 0, 0, wire.ProtocolFence-1); strings.Contains(string(data), "fenceconn") {
		t.Errorf("protocol %d gets a fenceconn: %s", wire.ProtocolFence-1, data)
	}
	for _, m := range []election.Message{
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 1, FenceConn: "NSRV/7"},
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 1, Fence: 1, FenceConn: "a b"},
	} {
		if _, err := wire.EncodeAt("g", m, 0, 0, wire.ProtocolMax); err == nil {
			t.Errorf("encoded fenceconn %q with fence %d", m.FenceConn, m.Fence)
		}
	}

	vote := election.Message{Type: election.MsgVote, From: "c", To: "b", Term: 3, Seq: 1, Granted: true, Fence: int64(time.Millisecond)}
	if _, err := wire.EncodeAt("g", vote, 0, 0, wire.ProtocolMax); err != nil {
		t.Errorf("a granted vote with a fence: %v", err)
	}
	for _, m := range []election.Message{
		{Type: election.MsgVote, From: "c", To: "b", Term: 3, Seq: 1, Fence: int64(time.Millisecond)},
		{Type: election.MsgHeartbeat, From: "c", Term: 3, Seq: 1, Fence: int64(time.Millisecond)},
		{Type: election.MsgCoordinator, From: "c", Term: 3, Seq: 1, Fence: int64(time.Millisecond)},
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 1, Fence: -1},
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 1, Fence: int64(wire.MaxFence + time.Millisecond)},
	} {
		if _, err := wire.EncodeAt("g", m, 0, 0, wire.ProtocolMax); err == nil {
			t.Errorf("encoded a fence of %d on %s (granted %v)", m.Fence, m.Type, m.Granted)
		}
	}

	for _, raw := range []string{
		`{"v":1,"group":"g","type":"vote","from":"c","to":"b","term":3,"seq":1,"granted":false,"fence":3}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"c","term":3,"seq":1,"fence":3}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fence":-1}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fence":6000001}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fence":"3"}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fenceconn":"S/1"}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fence":3,"fenceconn":"a b"}`,
	} {
		expectRefused(t, raw)
	}
	raw := `{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"fence":6000000}`
	if got, err := wire.Decode([]byte(raw), wireSubject(ack), wireCtx()); err != nil || got.Fence != int64(wire.MaxFence) {
		t.Errorf("the longest fence (100 minutes): %d, %v", got.Fence, err)
	}
}

// A heartbeat may say nofence (protocol 6): about the connection it names,
// so never without one, on no other type, and never to an older member.
func TestWireNoFence(t *testing.T) {
	hb := election.Message{Type: election.MsgHeartbeat, From: "c", Term: 3, Seq: 1, Conn: "NSRV/7", NoFence: true}
	data, err := wire.EncodeAt("g", hb, 0, 0, wire.ProtocolMax)
	if err != nil || !strings.Contains(string(data), `"nofence":true`) {
		t.Fatalf("encoded %s (%v)", data, err)
	}
	if got, err := wire.Decode(data, wireSubject(hb), wireCtx()); err != nil || !got.NoFence || got.Conn != "NSRV/7" {
		t.Errorf("decoded %+v (%v)", got, err)
	}
	for level := wire.ProtocolMin; level < wire.ProtocolNoFence; level++ {
		data, err := wire.EncodeAt("g", hb, 0, 0, level)
		if err != nil || strings.Contains(string(data), "nofence") {
			t.Errorf("protocol %d gets nofence: %s (%v)", level, data, err)
		}
	}
	without := hb
	without.NoFence = false
	if data, _ := wire.EncodeAt("g", without, 0, 0, wire.ProtocolMax); strings.Contains(string(data), "nofence") {
		t.Errorf("a heartbeat that says nothing says nofence: %s", data)
	}
	for _, m := range []election.Message{
		{Type: election.MsgHeartbeat, From: "c", Term: 3, Seq: 1, NoFence: true},
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 1, NoFence: true},
		{Type: election.MsgCoordinator, From: "c", Term: 3, Seq: 1, NoFence: true},
	} {
		if _, err := wire.EncodeAt("g", m, 0, 0, wire.ProtocolMax); err == nil {
			t.Errorf("encoded nofence on %s with conn %q", m.Type, m.Conn)
		}
	}
	for _, raw := range []string{
		`{"v":1,"group":"g","type":"heartbeat","from":"c","term":3,"seq":1,"nofence":true}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"c","term":3,"seq":1,"conn":"S/1","nofence":1}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"nofence":true}`,
	} {
		expectRefused(t, raw)
	}
}

// expectRefused checks that raw, a message from c (to b, unless a
// heartbeat), is refused as a bad field or malformed.
func expectRefused(t *testing.T, raw string) {
	t.Helper()
	var be *wire.BadMessageError
	m := election.Message{From: "c", To: "b"}
	if strings.Contains(raw, "heartbeat") {
		m.To = ""
	}
	if _, err := wire.Decode([]byte(raw), wireSubject(m), wireCtx()); !errors.As(err, &be) || (be.Reason != wire.ReasonBadField && be.Reason != wire.ReasonMalformed) {
		t.Errorf("%s: %v, want bad_field or malformed", raw, err)
	}
}
