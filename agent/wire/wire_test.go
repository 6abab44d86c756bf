package wire_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

const wirePrefix = "edge.election"

// wireCtx is member b of group g, with members a, b, c and d.
func wireCtx() wire.DecodeContext {
	return wire.DecodeContext{
		Prefix:  wirePrefix,
		Group:   "g",
		Self:    "b",
		Members: map[string]bool{"a": true, "b": true, "c": true, "d": true},
	}
}

// wireSubject is the subject m travels on in group g.
func wireSubject(m election.Message) string {
	if m.To == "" {
		return wire.BroadcastSubject(wirePrefix, "g", m.From)
	}
	return wire.DirectSubject(wirePrefix, "g", m.From, m.To)
}

// wireSamples are legal messages of every type, as seen by member b.
func wireSamples() []election.Message {
	return []election.Message{
		{Type: election.MsgHeartbeat, From: "a", Term: 3, Seq: 10, Alive: []string{"a", "b", "c"}},
		{Type: election.MsgAck, From: "c", To: "b", Term: 3, Seq: 10},
		{Type: election.MsgElection, From: "a"},
		{Type: election.MsgElection, From: "a", Term: 7},
		{Type: election.MsgOK, From: "d", To: "b", Term: 2},
		{Type: election.MsgCoordinator, From: "d", Term: 4, Seq: 1},
		{Type: election.MsgVote, From: "a", To: "b", Term: 4, Seq: 1, Granted: true},
		{Type: election.MsgVote, From: "a", To: "b", Term: 4},
		{Type: election.MsgResign, From: "d", Term: 4, Nominee: "b"},
		{Type: election.MsgResign, From: "d", Term: 4},
		{Type: election.MsgRingToken, From: "a", To: "b", Seq: 2, Initiator: "c", Participants: []string{"c", "d", "a"}},
		{Type: election.MsgRingToken, From: "a", To: "b", Term: 5, Seq: 1, Initiator: "a", Participants: []string{"a"}},
		{Type: election.MsgRingToken, From: "d", To: "b", Term: 6, Seq: 3, Initiator: "c", Candidate: "d"},
		{Type: election.MsgRingToken, From: "a", To: "b", Term: 6, Seq: 3, Initiator: "c", Candidate: "b", Participants: []string{"a"}},
		{Type: election.MsgRingAck, From: "c", To: "b", Term: 1, Seq: 7, Initiator: "b"},
		{Type: election.MsgRingAck, From: "c", To: "b", Seq: 1, Initiator: "a"},
		{Type: election.MsgPreVote, From: "a", Term: 5, Seq: 3},
		{Type: election.MsgPreVoteReply, From: "a", To: "b", Term: 5, Seq: 3, Granted: true},
		{Type: election.MsgPreVoteReply, From: "a", To: "b", Term: 5, Granted: true},
		{Type: election.MsgPreVoteReply, From: "a", To: "b", Term: 7, Seq: 3},
	}
}

func mustEncode(t testing.TB, group string, m election.Message) []byte {
	t.Helper()
	data, err := wire.Encode(group, m)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", m, err)
	}
	return data
}

func TestWireSubjects(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{wire.BroadcastSubject("edge.election", "g1", "a"), "edge.election.g1.el.a"},
		{wire.DirectSubject("edge.election", "g1", "a", "b"), "edge.election.g1.el.a.b"},
		{wire.ControlSubject("edge.election", "g1", wire.VerbStatus), "edge.election.g1.ctl.status"},
		{wire.ControlSubject("site", "g1", wire.VerbResign), "site.g1.ctl.resign"},
		{wire.ControlSubject("site", "g1", wire.VerbTransfer), "site.g1.ctl.transfer"},
		{wire.BroadcastWildcard("edge.election", "g1"), "edge.election.g1.el.*"},
		{wire.DirectWildcard("edge.election", "g1", "b"), "edge.election.g1.el.*.b"},
	} {
		if c.got != c.want {
			t.Errorf("got subject %q, want %q", c.got, c.want)
		}
	}
}

func TestWireEncodeFormat(t *testing.T) {
	for _, c := range []struct {
		m    election.Message
		want string
	}{
		{
			election.Message{Type: election.MsgHeartbeat, From: "a", Term: 3, Seq: 10, Alive: []string{"a", "b"}},
			`{"v":1,"group":"g","type":"heartbeat","from":"a","term":3,"seq":10,"alive":["a","b"]}`,
		},
		{
			election.Message{Type: election.MsgVote, From: "b", To: "a", Term: 3, Seq: 10},
			`{"v":1,"group":"g","type":"vote","from":"b","to":"a","term":3,"seq":10,"granted":false}`,
		},
		{
			election.Message{Type: election.MsgElection, From: "b"},
			`{"v":1,"group":"g","type":"election","from":"b","term":0}`,
		},
		{
			election.Message{Type: election.MsgRingToken, From: "a", To: "b", Seq: 1, Initiator: "a", Participants: []string{"a"}},
			`{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","term":0,"seq":1,"initiator":"a","participants":["a"]}`,
		},
		{
			election.Message{Type: election.MsgRingToken, From: "a", To: "b", Term: 4, Seq: 2, Initiator: "c", Candidate: "c", Participants: []string{"a"}},
			`{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","term":4,"seq":2,"initiator":"c","candidate":"c","participants":["a"]}`,
		},
		{
			election.Message{Type: election.MsgRingAck, From: "b", To: "a", Term: 2, Seq: 1, Initiator: "a"},
			`{"v":1,"group":"g","type":"ring_ack","from":"b","to":"a","term":2,"seq":1,"initiator":"a"}`,
		},
		{
			election.Message{Type: election.MsgPreVoteReply, From: "b", To: "a", Term: 4, Granted: true},
			`{"v":1,"group":"g","type":"pre_vote_reply","from":"b","to":"a","term":4,"granted":true}`,
		},
		{
			election.Message{Type: election.MsgResign, From: "a", Term: 9, Nominee: "b"},
			`{"v":1,"group":"g","type":"resign","from":"a","term":9,"nominee":"b"}`,
		},
	} {
		if got := string(mustEncode(t, "g", c.m)); got != c.want {
			t.Errorf("Encode(%+v)\n got %s\nwant %s", c.m, got, c.want)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, m := range wireSamples() {
		data := mustEncode(t, "g", m)
		got, err := wire.Decode(data, wireSubject(m), wireCtx())
		if err != nil {
			t.Errorf("Decode(%s): %v", data, err)
			continue
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip of %s\n got %+v\nwant %+v", data, got, m)
		}
	}
}

func TestDecodeAccepts(t *testing.T) {
	hb := wire.BroadcastSubject(wirePrefix, "g", "a")
	toB := wire.DirectSubject(wirePrefix, "g", "a", "b")
	for _, c := range []struct {
		name, data, subject string
		want                election.Message
	}{
		{"whitespace", " \n{ \"v\" : 1 , \"group\":\"g\",\"type\":\"election\",\"from\":\"a\"}\n ", hb,
			election.Message{Type: election.MsgElection, From: "a"}},
		{"vote without granted", `{"v":1,"group":"g","type":"vote","from":"a","to":"b","term":2}`, toB,
			election.Message{Type: election.MsgVote, From: "a", To: "b", Term: 2}},
		{"granted false on an ack", `{"v":1,"group":"g","type":"ack","from":"a","to":"b","term":2,"granted":false}`, toB,
			election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 2}},
		{"empty lists and nulls", `{"v":1,"group":"g","type":"heartbeat","from":"a","to":null,"term":2,"seq":1,"alive":[],"participants":null}`, hb,
			election.Message{Type: election.MsgHeartbeat, From: "a", Term: 2, Seq: 1}},
		{"keys in any order", `{"term":2,"seq":5,"from":"a","type":"heartbeat","group":"g","v":1}`, hb,
			election.Message{Type: election.MsgHeartbeat, From: "a", Term: 2, Seq: 5}},
		// An older edge-agent's token has no candidate: it still decodes, and
		// the Ring core refuses it (its participants did not vote).
		{"ring token of an older agent", `{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","term":3,"seq":1,"initiator":"a","participants":["a"]}`, toB,
			election.Message{Type: election.MsgRingToken, From: "a", To: "b", Term: 3, Seq: 1, Initiator: "a", Participants: []string{"a"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := wire.Decode([]byte(c.data), c.subject, wireCtx())
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	const hbBody = `"group":"g","type":"heartbeat","from":"a","term":3,"seq":1`
	hb := `{"v":1,` + hbBody + `}`
	fromA := wire.BroadcastSubject(wirePrefix, "g", "a")
	aToB := wire.DirectSubject(wirePrefix, "g", "a", "b")
	aToC := wire.DirectSubject(wirePrefix, "g", "a", "c")
	msg := func(fields string) string { return `{"v":1,"group":"g",` + fields + `}` }

	cases := []struct {
		name, data, subject, reason string
	}{
		{"oversize valid JSON", hb[:len(hb)-1] + strings.Repeat(" ", wire.MaxMessageSize) + "}", fromA, wire.ReasonOversize},
		{"oversize garbage", strings.Repeat("x", wire.MaxMessageSize+1), fromA, wire.ReasonOversize},

		{"empty", "", fromA, wire.ReasonMalformed},
		{"not JSON", "hello", fromA, wire.ReasonMalformed},
		{"array", `[1]`, fromA, wire.ReasonMalformed},
		{"string", `"v"`, fromA, wire.ReasonMalformed},
		{"truncated", hb[:len(hb)-1], fromA, wire.ReasonMalformed},
		{"trailing object", hb + `{}`, fromA, wire.ReasonMalformed},
		{"trailing garbage", hb + ` x`, fromA, wire.ReasonMalformed},
		{"unknown field", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"leader":"a"`), fromA, wire.ReasonMalformed},
		{"key in other case", msg(`"type":"heartbeat","From":"a","term":3,"seq":1`), fromA, wire.ReasonMalformed},
		{"repeated key", msg(`"type":"heartbeat","from":"a","from":"c","term":3,"seq":1`), fromA, wire.ReasonMalformed},
		{"repeated v", `{"v":1,"v":1,` + hbBody + `}`, fromA, wire.ReasonMalformed},
		{"term as string", msg(`"type":"heartbeat","from":"a","term":"3","seq":1`), fromA, wire.ReasonMalformed},
		{"negative term", msg(`"type":"heartbeat","from":"a","term":-3,"seq":1`), fromA, wire.ReasonMalformed},
		{"fractional seq", msg(`"type":"heartbeat","from":"a","term":3,"seq":1.5`), fromA, wire.ReasonMalformed},
		{"term overflows", msg(`"type":"heartbeat","from":"a","term":18446744073709551616,"seq":1`), fromA, wire.ReasonMalformed},
		{"alive not a list", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":"a"`), fromA, wire.ReasonMalformed},
		{"alive of numbers", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":[1]`), fromA, wire.ReasonMalformed},
		{"granted as string", msg(`"type":"vote","from":"a","to":"b","term":3,"granted":"yes"`), aToB, wire.ReasonMalformed},
		{"v as string", `{"v":"1",` + hbBody + `}`, fromA, wire.ReasonMalformed},
		{"v fractional", `{"v":1.0,` + hbBody + `}`, fromA, wire.ReasonMalformed},
		{"v null", `{"v":null,` + hbBody + `}`, fromA, wire.ReasonMalformed},

		{"no version", `{` + hbBody + `}`, fromA, wire.ReasonUnknownVersion},
		{"version 0", `{"v":0,` + hbBody + `}`, fromA, wire.ReasonUnknownVersion},
		{"version 2", `{"v":2,` + hbBody + `}`, fromA, wire.ReasonUnknownVersion},
		{"version 2 with new fields", `{"v":2,` + hbBody + `,"sig":"abc"}`, fromA, wire.ReasonUnknownVersion},

		{"unknown type", msg(`"type":"bogus","from":"a","term":3`), fromA, wire.ReasonUnknownType},
		{"type invalid", msg(`"type":"invalid","from":"a","term":3`), fromA, wire.ReasonUnknownType},
		{"type in capitals", msg(`"type":"Heartbeat","from":"a","term":3,"seq":1`), fromA, wire.ReasonUnknownType},
		{"no type", msg(`"from":"a","term":3`), fromA, wire.ReasonUnknownType},

		{"other group", `{"v":1,"group":"h","type":"heartbeat","from":"a","term":3,"seq":1}`, fromA, wire.ReasonWrongGroup},
		{"no group", `{"v":1,"type":"heartbeat","from":"a","term":3,"seq":1}`, fromA, wire.ReasonWrongGroup},

		{"sender not a member", msg(`"type":"heartbeat","from":"zz","term":3,"seq":1`), wire.BroadcastSubject(wirePrefix, "g", "zz"), wire.ReasonNotMember},
		{"no sender", msg(`"type":"heartbeat","term":3,"seq":1`), fromA, wire.ReasonNotMember},
		{"target not a member", msg(`"type":"ack","from":"a","to":"zz","term":3`), wire.DirectSubject(wirePrefix, "g", "a", "zz"), wire.ReasonNotMember},
		{"alive not a member", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","zz"]`), fromA, wire.ReasonNotMember},
		{"participant not a member", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a","zz"]`), aToB, wire.ReasonNotMember},
		{"nominee not a member", msg(`"type":"resign","from":"a","term":3,"nominee":"zz"`), fromA, wire.ReasonNotMember},
		{"initiator not a member", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"zz"`), aToB, wire.ReasonNotMember},
		{"candidate not a member", msg(`"type":"ring_token","from":"a","to":"b","term":1,"seq":1,"initiator":"a","candidate":"zz"`), aToB, wire.ReasonNotMember},

		{"sender forged", hb, wire.BroadcastSubject(wirePrefix, "g", "c"), wire.ReasonSubjectMismatch},
		{"direct message on broadcast subject", msg(`"type":"ack","from":"a","to":"b","term":3`), fromA, wire.ReasonSubjectMismatch},
		{"broadcast on direct subject", hb, aToB, wire.ReasonSubjectMismatch},
		{"target differs", msg(`"type":"ack","from":"a","to":"c","term":3`), aToB, wire.ReasonSubjectMismatch},
		{"other prefix", hb, wire.BroadcastSubject("other", "g", "a"), wire.ReasonSubjectMismatch},
		{"other subject group", hb, wire.BroadcastSubject(wirePrefix, "h", "a"), wire.ReasonSubjectMismatch},
		{"control subject", hb, wire.ControlSubject(wirePrefix, "g", wire.VerbStatus), wire.ReasonSubjectMismatch},
		{"extra subject token", hb, aToB + ".c", wire.ReasonSubjectMismatch},
		{"empty subject", hb, "", wire.ReasonSubjectMismatch},

		{"addressed to another member", msg(`"type":"ack","from":"a","to":"c","term":3`), aToC, wire.ReasonNotForMe},

		{"heartbeat term 0", msg(`"type":"heartbeat","from":"a","seq":1`), fromA, wire.ReasonBadField},
		{"heartbeat seq 0", msg(`"type":"heartbeat","from":"a","term":3`), fromA, wire.ReasonBadField},
		{"coordinator term 0", msg(`"type":"coordinator","from":"a","term":0`), fromA, wire.ReasonBadField},
		{"vote term 0", msg(`"type":"vote","from":"a","to":"b","granted":true`), aToB, wire.ReasonBadField},
		{"ack term 0", msg(`"type":"ack","from":"a","to":"b"`), aToB, wire.ReasonBadField},
		{"resign term 0", msg(`"type":"resign","from":"a"`), fromA, wire.ReasonBadField},
		{"granted on an ack", msg(`"type":"ack","from":"a","to":"b","term":3,"granted":true`), aToB, wire.ReasonBadField},
		{"seq on ok", msg(`"type":"ok","from":"a","to":"b","seq":4`), aToB, wire.ReasonBadField},
		{"alive on coordinator", msg(`"type":"coordinator","from":"a","term":3,"alive":["a"]`), fromA, wire.ReasonBadField},
		{"nominee on heartbeat", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"nominee":"c"`), fromA, wire.ReasonBadField},
		{"initiator on election", msg(`"type":"election","from":"a","initiator":"a"`), fromA, wire.ReasonBadField},
		{"participants on ring ack", msg(`"type":"ring_ack","from":"a","to":"b","seq":1,"initiator":"a","participants":["a"]`), aToB, wire.ReasonBadField},
		{"ring token without initiator", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"participants":["a"]`), aToB, wire.ReasonBadField},
		{"ring token without seq", msg(`"type":"ring_token","from":"a","to":"b","initiator":"a","participants":["a"]`), aToB, wire.ReasonBadField},
		{"ring ack without seq", msg(`"type":"ring_ack","from":"a","to":"b","initiator":"a"`), aToB, wire.ReasonBadField},
		{"ring token to the group", msg(`"type":"ring_token","from":"a","seq":1,"initiator":"a","participants":["a"]`), fromA, wire.ReasonBadField},
		{"ring ack to the group", msg(`"type":"ring_ack","from":"a","seq":1,"initiator":"a"`), fromA, wire.ReasonBadField},
		{"ring ack without initiator", msg(`"type":"ring_ack","from":"a","to":"b","seq":1`), aToB, wire.ReasonBadField},
		{"candidate on ring ack", msg(`"type":"ring_ack","from":"a","to":"b","seq":1,"initiator":"a","candidate":"a"`), aToB, wire.ReasonBadField},
		{"candidate on coordinator", msg(`"type":"coordinator","from":"a","term":3,"candidate":"a"`), fromA, wire.ReasonBadField},
		{"candidate not an id", msg(`"type":"ring_token","from":"a","to":"b","term":1,"seq":1,"initiator":"a","candidate":"a b"`), aToB, wire.ReasonNotMember},
		{"alive on ring token", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a"],"alive":["a"]`), aToB, wire.ReasonBadField},
		{"resign nominating its sender", msg(`"type":"resign","from":"a","term":3,"nominee":"a"`), fromA, wire.ReasonBadField},
		{"message to its sender", msg(`"type":"ok","from":"b","to":"b"`), wire.DirectSubject(wirePrefix, "g", "b", "b"), wire.ReasonBadField},
		{"alive lists a member twice", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","b","a"]`), fromA, wire.ReasonBadField},
		{"alive longer than the group", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","b","c","d","a"]`), fromA, wire.ReasonBadField},
		{"participants list a member twice", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a","c","c"]`), aToB, wire.ReasonBadField},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := wire.Decode([]byte(c.data), c.subject, wireCtx())
			var be *wire.BadMessageError
			if !errors.As(err, &be) {
				t.Fatalf("Decode = %+v, %v; want a *BadMessageError %q", m, err, c.reason)
			}
			if be.Reason != c.reason {
				t.Fatalf("reason %q (%v), want %q", be.Reason, err, c.reason)
			}
			if !reflect.DeepEqual(m, election.Message{}) {
				t.Fatalf("rejected message came with a value: %+v", m)
			}
		})
		seen[c.reason] = true
	}
	for _, r := range wireDecodeReasons {
		if !seen[r] {
			t.Errorf("no case for reason %q", r)
		}
	}
}

// wireDecodeReasons are the reasons Decode can give.
var wireDecodeReasons = []string{
	wire.ReasonOversize, wire.ReasonMalformed, wire.ReasonUnknownVersion, wire.ReasonUnknownType,
	wire.ReasonWrongGroup, wire.ReasonNotMember, wire.ReasonSubjectMismatch, wire.ReasonNotForMe,
	wire.ReasonBadField,
}

func TestDecodeWithoutMembers(t *testing.T) {
	ctx := wireCtx()
	ctx.Members = nil
	m := wireSamples()[0]
	_, err := wire.Decode(mustEncode(t, "g", m), wireSubject(m), ctx)
	var be *wire.BadMessageError
	if !errors.As(err, &be) || be.Reason != wire.ReasonNotMember {
		t.Fatalf("Decode with no members: %v, want not_member", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	long := strings.Repeat("x", 65)
	for _, c := range []struct {
		name, group string
		m           election.Message
		reason      string
	}{
		{"invalid group", "a.b", election.Message{Type: election.MsgElection, From: "a"}, wire.ReasonBadField},
		{"invalid type", "g", election.Message{Type: election.MsgInvalid, From: "a"}, wire.ReasonUnknownType},
		{"out of range type", "g", election.Message{Type: 200, From: "a"}, wire.ReasonUnknownType},
		{"no sender", "g", election.Message{Type: election.MsgElection}, wire.ReasonBadField},
		{"sender with a dot", "g", election.Message{Type: election.MsgElection, From: "a.b"}, wire.ReasonBadField},
		{"wildcard target", "g", election.Message{Type: election.MsgOK, From: "a", To: "*"}, wire.ReasonBadField},
		{"id too long", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: []string{long}}, wire.ReasonBadField},
		{"heartbeat without seq", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1}, wire.ReasonBadField},
		{"granted on a heartbeat", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Granted: true}, wire.ReasonBadField},
		{"too many ids", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: wireIDs(wire.WireMaxMembers + 1)}, wire.ReasonBadField},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := wire.Encode(c.group, c.m)
			var be *wire.BadMessageError
			if !errors.As(err, &be) || be.Reason != c.reason {
				t.Fatalf("Encode = %s, %v; want reason %q", data, err, c.reason)
			}
		})
	}
}

// wireIDs returns n distinct 64-byte member ids.
func wireIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%064d", i)
	}
	return ids
}

// TestWireMaxLegalMessageFits builds the largest legal messages of a group of
// WireMaxMembers members with 64-byte ids and checks they fit
// MaxMessageSize, and decode.
func TestWireMaxLegalMessageFits(t *testing.T) {
	ids := wireIDs(wire.WireMaxMembers)
	group := strings.Repeat("g", 64)
	members := map[string]bool{}
	for _, id := range ids {
		members[id] = true
	}
	const maxU64, maxTerm = ^uint64(0), election.MaxTerm
	for _, m := range []election.Message{
		{Type: election.MsgHeartbeat, From: ids[0], To: ids[1], Term: maxTerm, Seq: maxU64, Alive: ids},
		{Type: election.MsgRingToken, From: ids[0], To: ids[1], Term: maxTerm, Seq: maxU64, Initiator: ids[2], Candidate: ids[3], Participants: ids},
		{Type: election.MsgVote, From: ids[0], To: ids[1], Term: maxTerm, Seq: maxU64, Granted: true},
		{Type: election.MsgResign, From: ids[0], To: ids[1], Term: maxTerm, Nominee: ids[2]},
	} {
		data := mustEncode(t, group, m)
		t.Logf("largest %s: %d bytes of %d", m.Type, len(data), wire.MaxMessageSize)
		subj := wire.DirectSubject(wirePrefix, group, m.From, m.To)
		ctx := wire.DecodeContext{Prefix: wirePrefix, Group: group, Self: m.To, Members: members}
		got, err := wire.Decode(data, subj, ctx)
		if err != nil {
			t.Fatalf("Decode of the largest %s: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("largest %s does not round-trip", m.Type)
		}
	}
}

func TestBadMessageError(t *testing.T) {
	cause := errors.New("cause")
	err := error(&wire.BadMessageError{Reason: wire.ReasonBadField, Err: cause})
	if !errors.Is(err, cause) {
		t.Error("BadMessageError does not unwrap to its cause")
	}
	if got := err.Error(); !strings.Contains(got, "bad_field") || !strings.Contains(got, "cause") {
		t.Errorf("Error() = %q", got)
	}
	if got := (&wire.BadMessageError{Reason: wire.ReasonMalformed}).Error(); !strings.Contains(got, "malformed") {
		t.Errorf("Error() without cause = %q", got)
	}
}

// FuzzDecode checks that Decode never panics, that it rejects only with a
// *BadMessageError of a known reason, and that any message it accepts
// re-encodes, within MaxMessageSize, to bytes that decode to the same value.
func FuzzDecode(f *testing.F) {
	for _, m := range wireSamples() {
		data, err := wire.Encode("g", m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, wireSubject(m))
	}
	hb := wire.BroadcastSubject(wirePrefix, "g", "a")
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"v":1}`, `{"v":2,"x":1}`, `{"v":1,"v":1}`, `{"V":1}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1,"alive":["a","a"]}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1} {}`,
		`{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","seq":1,"initiator":"c","participants":["zz"]}`,
		`{"v":1e0,"group":"g","type":"election","from":"a"}`,
		"{\"v\":1,\"group\":\"g\",\"type\":\"election\",\"from\":\"a\xff\"}",
		`{"v":1,"group":"g","type":"election","from":"a","alive":[[[[[]]]]]}`,
		`{"v":1,"group":"g","type":"ack","from":"b","to":"a","term":3,"seq":1,"fence":10}`,
		`{"v":1,"group":"g","type":"vote","from":"b","to":"a","term":3,"seq":1,"granted":false,"fence":10}`,
	} {
		f.Add([]byte(s), hb)
	}
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		ctx := wireCtx()
		m, err := wire.Decode(data, subject, ctx)
		if err != nil {
			var be *wire.BadMessageError
			if !errors.As(err, &be) {
				t.Fatalf("Decode error %v is not a *BadMessageError", err)
			}
			known := false
			for _, r := range wireDecodeReasons {
				known = known || be.Reason == r
			}
			if !known {
				t.Fatalf("Decode gave unknown reason %q", be.Reason)
			}
			return
		}
		out, err := wire.Encode(ctx.Group, m)
		if err != nil {
			t.Fatalf("accepted %q as %+v, but Encode fails: %v", data, m, err)
		}
		if len(out) > wire.MaxMessageSize {
			t.Fatalf("re-encoding is %d bytes", len(out))
		}
		again, err := wire.Decode(out, subject, ctx)
		if err != nil {
			t.Fatalf("accepted %q as %+v, but its encoding %s is rejected: %v", data, m, out, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip of %q: %+v became %+v", data, m, again)
		}
	})
}
