package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// protocol1Keys are the keys a build of protocol 1 decodes; any other key
// makes it drop the whole message as malformed.
var protocol1Keys = map[string]bool{"v": true, "group": true, "type": true, "from": true, "to": true, "term": true, "seq": true,
	"granted": true, "alive": true, "nominee": true, "initiator": true, "candidate": true, "participants": true,
	"conn": true, "alg": true, "ep": true, "n": true}

func keysOf(t *testing.T, data []byte) []string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestEncodeAtProtocol1 checks that what goes to a member of protocol 1
// has only the keys it reads, and that from protocol 2 on the message says
// the sender's version, which Decode returns.
func TestEncodeAtProtocol1(t *testing.T) {
	msgs := []election.Message{
		{Type: election.MsgHeartbeat, From: "a", Term: 3, Seq: 9, Alive: []string{"a", "b"}, Conn: "S/1", Algorithm: "bully"},
		{Type: election.MsgAck, From: "b", To: "a", Term: 3, Seq: 9},
		{Type: election.MsgAck, From: "b", To: "a", Term: 3, Seq: 9, Drained: true},
		{Type: election.MsgVote, From: "b", To: "a", Term: 3, Seq: 1, Granted: true},
	}
	for _, m := range msgs {
		old, err := EncodeAt("g", m, 0, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keysOf(t, old) {
			if !protocol1Keys[k] {
				t.Errorf("%s at protocol 1 carries %q, which protocol 1 drops: %s", m.Type, k, old)
			}
		}
		subj := BroadcastSubject("p", "g", m.From)
		if m.To != "" {
			subj = DirectSubject("p", "g", m.From, m.To)
		}
		ctx := DecodeContext{Prefix: "p", Group: "g", Self: "a", Members: map[string]bool{"a": true, "b": true}}
		in, err := DecodeInbound(old, subj, ctx)
		if err != nil || in.Protocol != 0 {
			t.Fatalf("%s at protocol 1: decoded protocol %d, err %v", m.Type, in.Protocol, err)
		}
		cur, err := EncodeAt("g", m, 0, 0, ProtocolMax)
		if err != nil {
			t.Fatal(err)
		}
		in, err = DecodeInbound(cur, subj, ctx)
		if err != nil || in.Protocol != ProtocolMax {
			t.Fatalf("%s at protocol %d: decoded protocol %d, err %v (%s)", m.Type, ProtocolMax, in.Protocol, err, cur)
		}
		if strings.Contains(string(old), `"pv"`) || !strings.Contains(string(cur), fmt.Sprintf(`"pv":%d`, ProtocolMax)) {
			t.Errorf("pv: protocol 1 %s, protocol %d %s", old, ProtocolMax, cur)
		}
		if m.Drained && (in.Msg.Drained != true || strings.Contains(string(old), "drained")) {
			t.Errorf("drained: protocol 1 %s, protocol 2 %s decoded %+v", old, cur, in.Msg)
		}
	}
}

func TestAnnouncement(t *testing.T) {
	subj := AnnounceSubject("p", "g", "gw1")
	if from, ok := AnnounceSender(subj, "p", "g"); !ok || from != "gw1" {
		t.Fatalf("AnnounceSender(%q) = %q, %v", subj, from, ok)
	}
	// No election subscription of a member matches it: el.*.<id> needs a
	// valid id where the announcement has ~pv.
	if election.ValidID(announceToken) {
		t.Fatalf("%q is a valid member id", announceToken)
	}
	a := Announcement{From: "gw1", Min: 1, Max: 3, Build: "v1.2.3", Every: 1500 * time.Millisecond}
	data, err := EncodeAnnouncement("g", a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAnnouncement(data, subj, "p", "g")
	if err != nil || got != a {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if !strings.Contains(string(data), `"every":1500`) {
		t.Errorf("the period goes in milliseconds: %s", data)
	}
	// A build of protocol 2 says no period.
	old := strings.Replace(string(data), `,"every":1500`, ``, 1)
	if got, err := DecodeAnnouncement([]byte(old), subj, "p", "g"); err != nil || got.Every != 0 {
		t.Errorf("an announcement without a period: %+v, %v", got, err)
	}
	// Later protocols may add keys.
	more := strings.Replace(string(data), `"v":1`, `"v":1,"features":["x"]`, 1)
	if _, err := DecodeAnnouncement([]byte(more), subj, "p", "g"); err != nil {
		t.Errorf("an announcement with a key of a later protocol: %v", err)
	}
	for _, tc := range []struct {
		name, data, subject, reason string
	}{
		{"not json", `{"v":1,`, subj, ReasonMalformed},
		{"two objects", string(data) + string(data), subj, ReasonMalformed},
		{"trailing brace", string(data) + `}`, subj, ReasonMalformed},
		{"other sender", string(data), AnnounceSubject("p", "g", "gw2"), ReasonSubjectMismatch},
		{"election subject", string(data), BroadcastSubject("p", "g", "gw1"), ReasonSubjectMismatch},
		{"group", strings.Replace(string(data), `"group":"g"`, `"group":"h"`, 1), subj, ReasonWrongGroup},
		{"range", strings.Replace(string(data), `"min":1`, `"min":4`, 1), subj, ReasonBadField},
		{"zero", strings.Replace(string(data), `"min":1`, `"min":0`, 1), subj, ReasonBadField},
		{"build", strings.Replace(string(data), `v1.2.3`, `v1\n`, 1), subj, ReasonBadField},
		{"negative period", strings.Replace(string(data), `"every":1500`, `"every":-1`, 1), subj, ReasonBadField},
		{"period over an hour", strings.Replace(string(data), `"every":1500`, `"every":3600001`, 1), subj, ReasonBadField},
		{"period not an integer", strings.Replace(string(data), `"every":1500`, `"every":1.5`, 1), subj, ReasonMalformed},
		{"type", strings.Replace(string(data), `"protocol"`, `"heartbeat"`, 1), subj, ReasonUnknownVersion},
		{"oversize", `{"v":1,"build":"` + strings.Repeat("x", 2000) + `"}`, subj, ReasonOversize},
	} {
		_, err := DecodeAnnouncement([]byte(tc.data), tc.subject, "p", "g")
		var be *BadMessageError
		if !errors.As(err, &be) || be.Reason != tc.reason {
			t.Errorf("%s: err %v, want reason %s", tc.name, err, tc.reason)
		}
	}
	if !Overlaps(1, 1) || !Overlaps(3, 5) || Overlaps(ProtocolMax+1, ProtocolMax+2) {
		t.Error("Overlaps")
	}
}

// A WITHDRAW is of protocol 2: it encodes and decodes at 2, and is refused
// at 1 (a build of protocol 1 would drop it as an unknown type).
func TestWithdrawIsProtocol2(t *testing.T) {
	m := election.Message{Type: election.MsgWithdraw, From: "a", Term: 3}
	if Speaks(m.Type, 1) || !Speaks(m.Type, 2) || !Speaks(election.MsgResign, 1) {
		t.Fatal("Speaks: want withdraw from protocol 2, resign from 1")
	}
	var be *BadMessageError
	if _, err := EncodeAt("g", m, 0, 0, 1); !errors.As(err, &be) || be.Reason != ReasonUnknownType {
		t.Fatalf("withdraw at protocol 1: %v", err)
	}
	data, err := EncodeAt("g", m, 0, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := DecodeContext{Prefix: "p", Group: "g", Self: "b", Members: map[string]bool{"a": true, "b": true}}
	in, err := DecodeInbound(data, BroadcastSubject("p", "g", "a"), ctx)
	if err != nil || in.Msg.Type != election.MsgWithdraw || in.Msg.Term != 3 {
		t.Fatalf("round trip: %+v, %v (%s)", in.Msg, err, data)
	}
	m.Term = 0
	if _, err := EncodeAt("g", m, 0, 0, 2); err == nil {
		t.Error("a withdraw without a term encoded")
	}
}
