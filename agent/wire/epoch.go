package wire

import (
	"encoding/json"

	"github.com/edge-agent/edge-agent/election"
)

// The wire-only message types. A challenge asks a member to prove that the
// epoch it numbers its messages in is live; a proof answers it, echoing the
// challenge's nonce in seq. They never reach the election core (see
// Signing). Agents of older builds drop them as unknown_type.
const (
	wireChallenge = "challenge"
	wireProof     = "proof"
)

// EpochMsg is a challenge or a proof (see Signing).
type EpochMsg struct {
	Proof    bool
	From, To string // To is "" for a challenge to the whole group
	Nonce    uint64 // the challenge's nonce, or the one a proof answers
	Ep, N    uint64 // the sender's numbering
}

// EncodeEpochMsg encodes a challenge (to "" for the whole group) or a proof
// (always to one member) of group.
func EncodeEpochMsg(group string, e EpochMsg) ([]byte, error) {
	typ := wireChallenge
	if e.Proof {
		typ = wireProof
	}
	if e.Nonce == 0 || e.Ep == 0 || e.N == 0 || (e.Proof && e.To == "") {
		return nil, bad(ReasonBadField, "%s without nonce, numbering or target", typ)
	}
	return json.Marshal(&wireMessage{V: WireVersion, Group: group, Type: typ, From: e.From, To: e.To, Seq: e.Nonce, Ep: e.Ep, N: e.N})
}

// decodeEpochMsg checks a parsed challenge or proof received on subject.
func decodeEpochMsg(w wireMessage, subject string, expect DecodeContext) (EpochMsg, error) {
	e := EpochMsg{Proof: w.Type == wireProof, From: w.From, To: w.To, Nonce: w.Seq, Ep: w.Ep, N: w.N}
	if w.Group != expect.Group {
		return e, bad(ReasonWrongGroup, "group %q, want %q", w.Group, expect.Group)
	}
	if !expect.Members[w.From] || (w.To != "" && !expect.Members[w.To]) {
		return e, bad(ReasonNotMember, "%s from %q to %q", w.Type, w.From, w.To)
	}
	from, to, ok := SubjectParties(subject, expect.Prefix, expect.Group)
	if !ok || from != w.From || to != w.To {
		return e, bad(ReasonSubjectMismatch, "%s on subject %q", w.Type, subject)
	}
	if w.To != "" && w.To != expect.Self {
		return e, bad(ReasonNotForMe, "to %q", w.To)
	}
	if w.Term != 0 || w.Granted != nil || len(w.Alive) > 0 || w.Nominee != "" || w.Initiator != "" || w.Candidate != "" ||
		len(w.Participants) > 0 || w.Conn != "" || w.Alg != "" || w.Seq == 0 || w.Ep == 0 || w.N == 0 ||
		(e.Proof && w.To == "") || w.To == w.From {
		return e, bad(ReasonBadField, "%s with fields it does not carry, or without nonce or numbering", w.Type)
	}
	return e, nil
}

// Inbound is one message received on an election subject, decoded and
// checked: an election message, or (Epoch non-nil) a challenge or a proof.
type Inbound struct {
	Msg   election.Message
	Epoch *EpochMsg
	// Num is the sender's numbering ({0, 0} when unsigned).
	Num Numbering
	// Protocol is the version the sender said it speaks ("pv"), 0 when it
	// did not say (a build of protocol 1, or one that does not know yet
	// that this member speaks 2).
	Protocol int
}

// DecodeInbound parses and checks, in one pass over data, one message
// received on subject: an election message as Decode does, or a challenge or
// proof. Its errors are those of Decode.
func DecodeInbound(data []byte, subject string, expect DecodeContext) (Inbound, error) {
	if len(data) > MaxMessageSize {
		return Inbound{}, bad(ReasonOversize, "%d bytes, over %d", len(data), MaxMessageSize)
	}
	w, err := parseWire(data)
	if err != nil {
		return Inbound{}, err
	}
	num := Numbering{Epoch: w.Ep, N: w.N}
	if w.Type == wireChallenge || w.Type == wireProof {
		e, err := decodeEpochMsg(w, subject, expect)
		if err != nil {
			return Inbound{}, err
		}
		return Inbound{Epoch: &e, Num: num}, nil
	}
	m, err := decodeChecked(w, subject, expect)
	if err != nil {
		return Inbound{}, err
	}
	return Inbound{Msg: m, Num: num, Protocol: w.PV}, nil
}
