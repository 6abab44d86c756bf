package agent_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/election"
)

const wirePrefix = agent.DefaultSubjectPrefix

// wireCtx is member b of group g, with members a, b, c and d.
func wireCtx() agent.DecodeContext {
	return agent.DecodeContext{
		Prefix:  wirePrefix,
		Group:   "g",
		Self:    "b",
		Members: map[string]bool{"a": true, "b": true, "c": true, "d": true},
	}
}

// wireSubject is the subject m travels on in group g.
func wireSubject(m election.Message) string {
	if m.To == "" {
		return agent.BroadcastSubject(wirePrefix, "g", m.From)
	}
	return agent.DirectSubject(wirePrefix, "g", m.From, m.To)
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
	data, err := agent.Encode(group, m)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", m, err)
	}
	return data
}

func TestWireSubjects(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{agent.BroadcastSubject("edge.election", "g1", "a"), "edge.election.g1.el.a"},
		{agent.DirectSubject("edge.election", "g1", "a", "b"), "edge.election.g1.el.a.b"},
		{agent.ControlSubject("edge.election", "g1", agent.VerbStatus), "edge.election.g1.ctl.status"},
		{agent.ControlSubject("site", "g1", agent.VerbResign), "site.g1.ctl.resign"},
		{agent.ControlSubject("site", "g1", agent.VerbTransfer), "site.g1.ctl.transfer"},
		{agent.BroadcastWildcard("edge.election", "g1"), "edge.election.g1.el.*"},
		{agent.DirectWildcard("edge.election", "g1", "b"), "edge.election.g1.el.*.b"},
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
		got, err := agent.Decode(data, wireSubject(m), wireCtx())
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
	hb := agent.BroadcastSubject(wirePrefix, "g", "a")
	toB := agent.DirectSubject(wirePrefix, "g", "a", "b")
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
			got, err := agent.Decode([]byte(c.data), c.subject, wireCtx())
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
	fromA := agent.BroadcastSubject(wirePrefix, "g", "a")
	aToB := agent.DirectSubject(wirePrefix, "g", "a", "b")
	aToC := agent.DirectSubject(wirePrefix, "g", "a", "c")
	msg := func(fields string) string { return `{"v":1,"group":"g",` + fields + `}` }

	cases := []struct {
		name, data, subject, reason string
	}{
		{"oversize valid JSON", hb[:len(hb)-1] + strings.Repeat(" ", agent.MaxMessageSize) + "}", fromA, agent.ReasonOversize},
		{"oversize garbage", strings.Repeat("x", agent.MaxMessageSize+1), fromA, agent.ReasonOversize},

		{"empty", "", fromA, agent.ReasonMalformed},
		{"not JSON", "hello", fromA, agent.ReasonMalformed},
		{"array", `[1]`, fromA, agent.ReasonMalformed},
		{"string", `"v"`, fromA, agent.ReasonMalformed},
		{"truncated", hb[:len(hb)-1], fromA, agent.ReasonMalformed},
		{"trailing object", hb + `{}`, fromA, agent.ReasonMalformed},
		{"trailing garbage", hb + ` x`, fromA, agent.ReasonMalformed},
		{"unknown field", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"leader":"a"`), fromA, agent.ReasonMalformed},
		{"key in other case", msg(`"type":"heartbeat","From":"a","term":3,"seq":1`), fromA, agent.ReasonMalformed},
		{"repeated key", msg(`"type":"heartbeat","from":"a","from":"c","term":3,"seq":1`), fromA, agent.ReasonMalformed},
		{"repeated v", `{"v":1,"v":1,` + hbBody + `}`, fromA, agent.ReasonMalformed},
		{"term as string", msg(`"type":"heartbeat","from":"a","term":"3","seq":1`), fromA, agent.ReasonMalformed},
		{"negative term", msg(`"type":"heartbeat","from":"a","term":-3,"seq":1`), fromA, agent.ReasonMalformed},
		{"fractional seq", msg(`"type":"heartbeat","from":"a","term":3,"seq":1.5`), fromA, agent.ReasonMalformed},
		{"term overflows", msg(`"type":"heartbeat","from":"a","term":18446744073709551616,"seq":1`), fromA, agent.ReasonMalformed},
		{"alive not a list", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":"a"`), fromA, agent.ReasonMalformed},
		{"alive of numbers", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":[1]`), fromA, agent.ReasonMalformed},
		{"granted as string", msg(`"type":"vote","from":"a","to":"b","term":3,"granted":"yes"`), aToB, agent.ReasonMalformed},
		{"v as string", `{"v":"1",` + hbBody + `}`, fromA, agent.ReasonMalformed},
		{"v fractional", `{"v":1.0,` + hbBody + `}`, fromA, agent.ReasonMalformed},
		{"v null", `{"v":null,` + hbBody + `}`, fromA, agent.ReasonMalformed},

		{"no version", `{` + hbBody + `}`, fromA, agent.ReasonUnknownVersion},
		{"version 0", `{"v":0,` + hbBody + `}`, fromA, agent.ReasonUnknownVersion},
		{"version 2", `{"v":2,` + hbBody + `}`, fromA, agent.ReasonUnknownVersion},
		{"version 2 with new fields", `{"v":2,` + hbBody + `,"sig":"abc"}`, fromA, agent.ReasonUnknownVersion},

		{"unknown type", msg(`"type":"bogus","from":"a","term":3`), fromA, agent.ReasonUnknownType},
		{"type invalid", msg(`"type":"invalid","from":"a","term":3`), fromA, agent.ReasonUnknownType},
		{"type in capitals", msg(`"type":"Heartbeat","from":"a","term":3,"seq":1`), fromA, agent.ReasonUnknownType},
		{"no type", msg(`"from":"a","term":3`), fromA, agent.ReasonUnknownType},

		{"other group", `{"v":1,"group":"h","type":"heartbeat","from":"a","term":3,"seq":1}`, fromA, agent.ReasonWrongGroup},
		{"no group", `{"v":1,"type":"heartbeat","from":"a","term":3,"seq":1}`, fromA, agent.ReasonWrongGroup},

		{"sender not a member", msg(`"type":"heartbeat","from":"zz","term":3,"seq":1`), agent.BroadcastSubject(wirePrefix, "g", "zz"), agent.ReasonNotMember},
		{"no sender", msg(`"type":"heartbeat","term":3,"seq":1`), fromA, agent.ReasonNotMember},
		{"target not a member", msg(`"type":"ack","from":"a","to":"zz","term":3`), agent.DirectSubject(wirePrefix, "g", "a", "zz"), agent.ReasonNotMember},
		{"alive not a member", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","zz"]`), fromA, agent.ReasonNotMember},
		{"participant not a member", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a","zz"]`), aToB, agent.ReasonNotMember},
		{"nominee not a member", msg(`"type":"resign","from":"a","term":3,"nominee":"zz"`), fromA, agent.ReasonNotMember},
		{"initiator not a member", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"zz"`), aToB, agent.ReasonNotMember},
		{"candidate not a member", msg(`"type":"ring_token","from":"a","to":"b","term":1,"seq":1,"initiator":"a","candidate":"zz"`), aToB, agent.ReasonNotMember},

		{"sender forged", hb, agent.BroadcastSubject(wirePrefix, "g", "c"), agent.ReasonSubjectMismatch},
		{"direct message on broadcast subject", msg(`"type":"ack","from":"a","to":"b","term":3`), fromA, agent.ReasonSubjectMismatch},
		{"broadcast on direct subject", hb, aToB, agent.ReasonSubjectMismatch},
		{"target differs", msg(`"type":"ack","from":"a","to":"c","term":3`), aToB, agent.ReasonSubjectMismatch},
		{"other prefix", hb, agent.BroadcastSubject("other", "g", "a"), agent.ReasonSubjectMismatch},
		{"other subject group", hb, agent.BroadcastSubject(wirePrefix, "h", "a"), agent.ReasonSubjectMismatch},
		{"control subject", hb, agent.ControlSubject(wirePrefix, "g", agent.VerbStatus), agent.ReasonSubjectMismatch},
		{"extra subject token", hb, aToB + ".c", agent.ReasonSubjectMismatch},
		{"empty subject", hb, "", agent.ReasonSubjectMismatch},

		{"addressed to another member", msg(`"type":"ack","from":"a","to":"c","term":3`), aToC, agent.ReasonNotForMe},

		{"heartbeat term 0", msg(`"type":"heartbeat","from":"a","seq":1`), fromA, agent.ReasonBadField},
		{"heartbeat seq 0", msg(`"type":"heartbeat","from":"a","term":3`), fromA, agent.ReasonBadField},
		{"coordinator term 0", msg(`"type":"coordinator","from":"a","term":0`), fromA, agent.ReasonBadField},
		{"vote term 0", msg(`"type":"vote","from":"a","to":"b","granted":true`), aToB, agent.ReasonBadField},
		{"ack term 0", msg(`"type":"ack","from":"a","to":"b"`), aToB, agent.ReasonBadField},
		{"resign term 0", msg(`"type":"resign","from":"a"`), fromA, agent.ReasonBadField},
		{"granted on an ack", msg(`"type":"ack","from":"a","to":"b","term":3,"granted":true`), aToB, agent.ReasonBadField},
		{"seq on ok", msg(`"type":"ok","from":"a","to":"b","seq":4`), aToB, agent.ReasonBadField},
		{"alive on coordinator", msg(`"type":"coordinator","from":"a","term":3,"alive":["a"]`), fromA, agent.ReasonBadField},
		{"nominee on heartbeat", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"nominee":"c"`), fromA, agent.ReasonBadField},
		{"initiator on election", msg(`"type":"election","from":"a","initiator":"a"`), fromA, agent.ReasonBadField},
		{"participants on ring ack", msg(`"type":"ring_ack","from":"a","to":"b","seq":1,"initiator":"a","participants":["a"]`), aToB, agent.ReasonBadField},
		{"ring token without initiator", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"participants":["a"]`), aToB, agent.ReasonBadField},
		{"ring token without seq", msg(`"type":"ring_token","from":"a","to":"b","initiator":"a","participants":["a"]`), aToB, agent.ReasonBadField},
		{"ring ack without seq", msg(`"type":"ring_ack","from":"a","to":"b","initiator":"a"`), aToB, agent.ReasonBadField},
		{"ring token to the group", msg(`"type":"ring_token","from":"a","seq":1,"initiator":"a","participants":["a"]`), fromA, agent.ReasonBadField},
		{"ring ack to the group", msg(`"type":"ring_ack","from":"a","seq":1,"initiator":"a"`), fromA, agent.ReasonBadField},
		{"ring ack without initiator", msg(`"type":"ring_ack","from":"a","to":"b","seq":1`), aToB, agent.ReasonBadField},
		{"candidate on ring ack", msg(`"type":"ring_ack","from":"a","to":"b","seq":1,"initiator":"a","candidate":"a"`), aToB, agent.ReasonBadField},
		{"candidate on coordinator", msg(`"type":"coordinator","from":"a","term":3,"candidate":"a"`), fromA, agent.ReasonBadField},
		{"candidate not an id", msg(`"type":"ring_token","from":"a","to":"b","term":1,"seq":1,"initiator":"a","candidate":"a b"`), aToB, agent.ReasonNotMember},
		{"alive on ring token", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a"],"alive":["a"]`), aToB, agent.ReasonBadField},
		{"resign nominating its sender", msg(`"type":"resign","from":"a","term":3,"nominee":"a"`), fromA, agent.ReasonBadField},
		{"message to its sender", msg(`"type":"ok","from":"b","to":"b"`), agent.DirectSubject(wirePrefix, "g", "b", "b"), agent.ReasonBadField},
		{"alive lists a member twice", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","b","a"]`), fromA, agent.ReasonBadField},
		{"alive longer than the group", msg(`"type":"heartbeat","from":"a","term":3,"seq":1,"alive":["a","b","c","d","a"]`), fromA, agent.ReasonBadField},
		{"participants list a member twice", msg(`"type":"ring_token","from":"a","to":"b","seq":1,"initiator":"a","participants":["a","c","c"]`), aToB, agent.ReasonBadField},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := agent.Decode([]byte(c.data), c.subject, wireCtx())
			var be *agent.BadMessageError
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
	agent.ReasonOversize, agent.ReasonMalformed, agent.ReasonUnknownVersion, agent.ReasonUnknownType,
	agent.ReasonWrongGroup, agent.ReasonNotMember, agent.ReasonSubjectMismatch, agent.ReasonNotForMe,
	agent.ReasonBadField,
}

func TestDecodeWithoutMembers(t *testing.T) {
	ctx := wireCtx()
	ctx.Members = nil
	m := wireSamples()[0]
	_, err := agent.Decode(mustEncode(t, "g", m), wireSubject(m), ctx)
	var be *agent.BadMessageError
	if !errors.As(err, &be) || be.Reason != agent.ReasonNotMember {
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
		{"invalid group", "a.b", election.Message{Type: election.MsgElection, From: "a"}, agent.ReasonBadField},
		{"invalid type", "g", election.Message{Type: election.MsgInvalid, From: "a"}, agent.ReasonUnknownType},
		{"out of range type", "g", election.Message{Type: 200, From: "a"}, agent.ReasonUnknownType},
		{"no sender", "g", election.Message{Type: election.MsgElection}, agent.ReasonBadField},
		{"sender with a dot", "g", election.Message{Type: election.MsgElection, From: "a.b"}, agent.ReasonBadField},
		{"wildcard target", "g", election.Message{Type: election.MsgOK, From: "a", To: "*"}, agent.ReasonBadField},
		{"id too long", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: []string{long}}, agent.ReasonBadField},
		{"heartbeat without seq", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1}, agent.ReasonBadField},
		{"granted on a heartbeat", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Granted: true}, agent.ReasonBadField},
		{"too many ids", "g", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: wireIDs(agent.WireMaxMembers + 1)}, agent.ReasonBadField},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := agent.Encode(c.group, c.m)
			var be *agent.BadMessageError
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
	ids := wireIDs(agent.WireMaxMembers)
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
		t.Logf("largest %s: %d bytes of %d", m.Type, len(data), agent.MaxMessageSize)
		subj := agent.DirectSubject(wirePrefix, group, m.From, m.To)
		ctx := agent.DecodeContext{Prefix: wirePrefix, Group: group, Self: m.To, Members: members}
		got, err := agent.Decode(data, subj, ctx)
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
	err := error(&agent.BadMessageError{Reason: agent.ReasonBadField, Err: cause})
	if !errors.Is(err, cause) {
		t.Error("BadMessageError does not unwrap to its cause")
	}
	if got := err.Error(); !strings.Contains(got, "bad_field") || !strings.Contains(got, "cause") {
		t.Errorf("Error() = %q", got)
	}
	if got := (&agent.BadMessageError{Reason: agent.ReasonMalformed}).Error(); !strings.Contains(got, "malformed") {
		t.Errorf("Error() without cause = %q", got)
	}
}

// FuzzDecode checks that Decode never panics, that it rejects only with a
// *BadMessageError of a known reason, and that any message it accepts
// re-encodes, within MaxMessageSize, to bytes that decode to the same value.
func FuzzDecode(f *testing.F) {
	for _, m := range wireSamples() {
		data, err := agent.Encode("g", m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, wireSubject(m))
	}
	hb := agent.BroadcastSubject(wirePrefix, "g", "a")
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"v":1}`, `{"v":2,"x":1}`, `{"v":1,"v":1}`, `{"V":1}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1,"alive":["a","a"]}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1} {}`,
		`{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","seq":1,"initiator":"c","participants":["zz"]}`,
		`{"v":1e0,"group":"g","type":"election","from":"a"}`,
		"{\"v\":1,\"group\":\"g\",\"type\":\"election\",\"from\":\"a\xff\"}",
		`{"v":1,"group":"g","type":"election","from":"a","alive":[[[[[]]]]]}`,
	} {
		f.Add([]byte(s), hb)
	}
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		ctx := wireCtx()
		m, err := agent.Decode(data, subject, ctx)
		if err != nil {
			var be *agent.BadMessageError
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
		out, err := agent.Encode(ctx.Group, m)
		if err != nil {
			t.Fatalf("accepted %q as %+v, but Encode fails: %v", data, m, err)
		}
		if len(out) > agent.MaxMessageSize {
			t.Fatalf("re-encoding is %d bytes", len(out))
		}
		again, err := agent.Decode(out, subject, ctx)
		if err != nil {
			t.Fatalf("accepted %q as %+v, but its encoding %s is rejected: %v", data, m, out, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip of %q: %+v became %+v", data, m, again)
		}
	})
}
