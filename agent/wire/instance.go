package wire

import (
	"encoding/json"
)

// wireInstance is the wire-only message with which an agent announces its
// process to other processes that speak with the same member id: it is sent
// every heartbeat period to the member's own direct subject
// (<prefix>.<group>.el.<id>.<id>), which only processes with that id
// subscribe to, so the other members never see it. An agent that receives
// one naming another instance knows that a second process runs with its id.
const wireInstance = "instance"

// MaxInstanceLen bounds an instance name.
const MaxInstanceLen = 128

// InstanceMsg is an instance announcement: From is the member id, Instance
// names the process (host, pid, a random nonce), Ep and N number it when the
// group signs.
type InstanceMsg struct {
	From, Instance string
	Ep, N          uint64
}

// EncodeInstance encodes an instance announcement of group.
func EncodeInstance(group string, m InstanceMsg) ([]byte, error) {
	if m.Instance == "" || len(m.Instance) > MaxInstanceLen || !validConn(m.Instance) {
		return nil, bad(ReasonBadField, "instance %q is not a process name", m.Instance)
	}
	return json.Marshal(&wireMessage{V: WireVersion, Group: group, Type: wireInstance, From: m.From, To: m.From,
		Inst: m.Instance, Ep: m.Ep, N: m.N})
}

// decodeInstance checks a parsed instance announcement received on subject:
// from this member, to this member, and nothing else.
func decodeInstance(w wireMessage, subject string, expect DecodeContext) (InstanceMsg, error) {
	m := InstanceMsg{From: w.From, Instance: w.Inst, Ep: w.Ep, N: w.N}
	if w.Group != expect.Group {
		return m, bad(ReasonWrongGroup, "group %q, want %q", w.Group, expect.Group)
	}
	from, to, ok := SubjectParties(subject, expect.Prefix, expect.Group)
	if !ok || from != w.From || to != w.To {
		return m, bad(ReasonSubjectMismatch, "instance on subject %q", subject)
	}
	if w.From != expect.Self || w.To != expect.Self {
		return m, bad(ReasonNotForMe, "instance from %q to %q", w.From, w.To)
	}
	if w.Term != 0 || w.Seq != 0 || w.Granted != nil || len(w.Alive) > 0 || w.Nominee != "" || w.Initiator != "" ||
		w.Candidate != "" || len(w.Participants) > 0 || w.Conn != "" || w.Alg != "" || w.Drained ||
		w.Inst == "" || len(w.Inst) > MaxInstanceLen || !validConn(w.Inst) {
		return m, bad(ReasonBadField, "instance with fields it does not carry, or without a process name")
	}
	return m, nil
}
