package wire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// A promise (the sender's D) goes out in milliseconds from the sender's
// ticks and is read in the receiver's, rounded down both ways, so that a
// receiver never reads it longer than it was made; it is sent only to
// members of protocol 4 or later and only on an ack or a granted vote.
func TestWirePromise(t *testing.T) {
	ack := election.Message{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 10, Promise: 30}
	for _, tc := range []struct {
		send, recv time.Duration
		ms         string
		want       int
	}{
		{10 * time.Millisecond, 10 * time.Millisecond, `"promise":300`, 30},    // same timing
		{10 * time.Millisecond, 20 * time.Millisecond, `"promise":300`, 15},    // receiver's H twice as long
		{10 * time.Millisecond, 7 * time.Millisecond, `"promise":300`, 42},     // 300/7 = 42.86, rounded down
		{1500 * time.Microsecond, time.Millisecond, `"promise":45`, 45},        // 30 * 1.5 ms
		{1550 * time.Microsecond, time.Millisecond, `"promise":46`, 46},        // 46.5 ms rounded down
		{time.Millisecond / 3, 50 * time.Millisecond, `"promise":9`, 1},        // under a tick: one tick
		{100 * time.Millisecond, 100 * time.Millisecond, `"promise":3000`, 30}, // H = 1 s
	} {
		data, err := wire.EncodeTimed("g", tc.send, ack, 0, 0, wire.ProtocolMax)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), tc.ms) {
			t.Errorf("tick %s: encoded %s, want %s", tc.send, data, tc.ms)
		}
		ctx := wireCtx()
		ctx.Tick = tc.recv
		got, err := wire.Decode(data, wireSubject(ack), ctx)
		if err != nil || got.Promise != tc.want {
			t.Errorf("tick %s to %s: decoded promise %d (%v), want %d", tc.send, tc.recv, got.Promise, err, tc.want)
		}
	}

	// Not to an older member, whose parser drops an unknown key; not
	// without a tick to read it in.
	for level := wire.ProtocolMin; level < wire.ProtocolPromise; level++ {
		if data, _ := wire.EncodeTimed("g", time.Millisecond, ack, 0, 0, level); strings.Contains(string(data), "promise") {
			t.Errorf("protocol %d gets a promise: %s", level, data)
		}
	}
	if data, _ := wire.EncodeAt("g", ack, 0, 0, wire.ProtocolMax); strings.Contains(string(data), "promise") {
		t.Errorf("encoded without a tick, a promise went out: %s", data)
	}
	data, _ := wire.EncodeTimed("g", time.Millisecond, ack, 0, 0, wire.ProtocolMax)
	if got, err := wire.Decode(data, wireSubject(ack), wireCtx()); err != nil || got.Promise != 0 {
		t.Errorf("decoded without a tick: promise %d, %v; want 0 (not said)", got.Promise, err)
	}

	vote := election.Message{Type: election.MsgVote, From: "c", To: "b", Term: 3, Seq: 1, Granted: true, Promise: 30}
	if _, err := wire.EncodeTimed("g", time.Millisecond, vote, 0, 0, wire.ProtocolMax); err != nil {
		t.Errorf("a granted vote with a promise: %v", err)
	}
	for _, m := range []election.Message{
		{Type: election.MsgVote, From: "c", To: "b", Term: 3, Seq: 1, Promise: 30},
		{Type: election.MsgHeartbeat, From: "c", Term: 3, Seq: 1, Promise: 30},
		{Type: election.MsgPreVoteReply, From: "c", To: "b", Term: 3, Seq: 1, Granted: true, Promise: 30},
	} {
		if _, err := wire.EncodeTimed("g", time.Millisecond, m, 0, 0, wire.ProtocolMax); err == nil {
			t.Errorf("encoded a promise on %s (granted %v)", m.Type, m.Granted)
		}
	}

	ctx := wireCtx()
	ctx.Tick = time.Millisecond
	for _, raw := range []string{
		`{"v":1,"group":"g","type":"vote","from":"c","to":"b","term":3,"seq":1,"granted":false,"promise":30}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"c","term":3,"seq":1,"promise":30}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"promise":-1}`,
		`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"promise":6000001}`,
	} {
		var be *wire.BadMessageError
		m := election.Message{From: "c", To: "b"}
		if strings.Contains(raw, "heartbeat") {
			m.To = ""
		}
		if _, err := wire.Decode([]byte(raw), wireSubject(m), ctx); !errors.As(err, &be) || be.Reason != wire.ReasonBadField {
			t.Errorf("%s: %v, want bad_field", raw, err)
		}
	}
	raw := `{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"promise":6000000}`
	if got, err := wire.Decode([]byte(raw), wireSubject(ack), ctx); err != nil || got.Promise != 6000000 {
		t.Errorf("the longest promise (100 minutes): %d, %v", got.Promise, err)
	}
}
