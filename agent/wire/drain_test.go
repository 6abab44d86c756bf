package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// An ack carries drained; no other type may, and an older receiver's strict
// parser is the reason it is omitted when false, and never sent to a
// receiver of protocol 1 (wire.Downgrade).
func TestWireDrainedOnAckOnly(t *testing.T) {
	ack := election.Message{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 10, Drained: true}
	if data, _ := wire.Encode("g", ack); strings.Contains(string(data), "drained") {
		t.Fatalf("an ack at protocol 1 says drained: %s", data)
	}
	data, err := wire.EncodeAt("g", ack, 0, 0, wire.ProtocolMax)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"drained":true`) {
		t.Fatalf("encoded ack %s has no drained", data)
	}
	got, err := wire.Decode(data, wireSubject(ack), wireCtx())
	if err != nil || !got.Drained {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	ack.Drained = false
	if data, _ := wire.EncodeAt("g", ack, 0, 0, wire.ProtocolMax); strings.Contains(string(data), "drained") {
		t.Fatalf("an ack of a member that is not drained says drained: %s", data)
	}
	vote := election.Message{Type: election.MsgVote, From: "c", To: "b", Term: 3, Seq: 1, Granted: true, Drained: true}
	if _, err := wire.EncodeAt("g", vote, 0, 0, wire.ProtocolMax); err == nil {
		t.Fatal("encoded drained on a vote")
	}
	raw := `{"v":1,"group":"g","type":"vote","from":"c","to":"b","term":3,"seq":1,"granted":true,"drained":true}`
	var be *wire.BadMessageError
	if _, err := wire.Decode([]byte(raw), wireSubject(vote), wireCtx()); !errors.As(err, &be) || be.Reason != wire.ReasonBadField {
		t.Fatalf("drained on a vote: %v", err)
	}
}

// An instance announcement goes from a member to itself; anything else
// about it is refused, and it never passes for an election message.
func TestWireInstance(t *testing.T) {
	ctx := wireCtx() // member b
	data, err := wire.EncodeInstance("g", wire.InstanceMsg{From: "b", Instance: "host/42/cafe"})
	if err != nil {
		t.Fatal(err)
	}
	subj := wire.DirectSubject(wirePrefix, "g", "b", "b")
	in, err := wire.DecodeInbound(data, subj, ctx)
	if err != nil || in.Instance == nil || in.Instance.Instance != "host/42/cafe" || in.Instance.From != "b" {
		t.Fatalf("decoded %+v, %v", in, err)
	}
	if _, err := wire.Decode(data, subj, ctx); err == nil {
		t.Fatal("an instance announcement decoded as an election message")
	}
	for _, c := range []struct{ raw, subj, reason string }{
		{`{"v":1,"group":"g","type":"instance","from":"a","to":"a","inst":"h/1/x"}`, wire.DirectSubject(wirePrefix, "g", "a", "a"), wire.ReasonNotForMe},
		{`{"v":1,"group":"g","type":"instance","from":"b","to":"b","inst":"h/1/x"}`, wire.DirectSubject(wirePrefix, "g", "a", "b"), wire.ReasonSubjectMismatch},
		{`{"v":1,"group":"g","type":"instance","from":"b","to":"b","inst":""}`, subj, wire.ReasonBadField},
		{`{"v":1,"group":"g","type":"instance","from":"b","to":"b","inst":"h 1"}`, subj, wire.ReasonBadField},
		{`{"v":1,"group":"g","type":"instance","from":"b","to":"b","inst":"h/1/x","term":3}`, subj, wire.ReasonBadField},
		{`{"v":1,"group":"h","type":"instance","from":"b","to":"b","inst":"h/1/x"}`, subj, wire.ReasonWrongGroup},
		{`{"v":1,"group":"g","type":"ack","from":"c","to":"b","term":3,"seq":1,"inst":"h/1/x"}`, wire.DirectSubject(wirePrefix, "g", "c", "b"), wire.ReasonBadField},
	} {
		_, err := wire.DecodeInbound([]byte(c.raw), c.subj, ctx)
		var be *wire.BadMessageError
		if !errors.As(err, &be) || be.Reason != c.reason {
			t.Errorf("%s on %s: %v, want %s", c.raw, c.subj, err, c.reason)
		}
	}
	if _, err := wire.EncodeInstance("g", wire.InstanceMsg{From: "b", Instance: strings.Repeat("x", wire.MaxInstanceLen+1)}); err == nil {
		t.Error("encoded an instance name over the bound")
	}
}
