package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// WireVersion is the version of the wire format, sent as "v" in every
// message. A receiver drops messages of any other version.
const WireVersion = 1

// WireMaxMembers is the largest group the wire format carries: no list in a
// message (alive, participants) may be longer. Config validation must keep
// Members within it, or a full heartbeat could not be encoded.
const WireMaxMembers = 256

// MaxPromise bounds a promise (election.Message.Promise) on the wire: the
// longest D an agent's config accepts, 100 heartbeats of a minute.
const MaxPromise = 100 * time.Minute

// MaxFence bounds a fence (election.Message.Fence) on the wire: a fence is
// shorter than the lease, which is shorter than D.
const MaxFence = MaxPromise

// MaxMessageSize is the largest encoded message, in bytes; anything larger is
// dropped before it is parsed. It fits the largest legal message of a group
// of WireMaxMembers members with 64-byte ids: a message carries at most one
// list (alive on a heartbeat, participants on a ring token) of at most 256
// ids costing 64+3 bytes each (quotes and comma), 17152 bytes; every other
// field together (group, type, from, to, nominee, initiator, candidate of 64
// bytes, term and seq of 20 digits, the keys and punctuation) stays under 600
// bytes.
// 20 KiB leaves about 15% headroom; TestWireMaxLegalMessageFits checks it.
const MaxMessageSize = 20 << 10

// Reasons for dropping an inbound message, as passed to Hooks.OnBad and set
// in BadMessageError.Reason.
const (
	ReasonOversize        = "oversize"
	ReasonMalformed       = "malformed"
	ReasonUnknownVersion  = "unknown_version"
	ReasonUnknownType     = "unknown_type"
	ReasonWrongGroup      = "wrong_group"
	ReasonNotMember       = "not_member"
	ReasonSubjectMismatch = "subject_mismatch"
	ReasonNotForMe        = "not_for_me"
	ReasonBadField        = "bad_field"
	ReasonInboxFull       = "inbox_full"
	// ReasonRateLimited: over the rate of messages accepted from one
	// sender (SenderRate), or of control requests.
	ReasonRateLimited = "rate_limited"
)

// BadMessageError is the error of Decode (and of Encode) for a message that
// must not be applied. Reason is one of the Reason constants and is meant as
// a metrics label; Err says what exactly was wrong.
type BadMessageError struct {
	Reason string
	Err    error
}

// Error implements error.
func (e *BadMessageError) Error() string {
	if e.Err == nil {
		return "wire: bad message: " + e.Reason
	}
	return "wire: bad message: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *BadMessageError) Unwrap() error { return e.Err }

func bad(reason, format string, args ...any) error {
	return &BadMessageError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// DecodeContext is what Decode checks an inbound message against: the subject
// prefix and group this member runs in, its own id, and the group's members.
// Tick is this member's tick, in which Decode gives a message's promise
// (election.Message.Promise); 0 decodes every promise as not said.
type DecodeContext struct {
	Prefix  string
	Group   string
	Self    string
	Members map[string]bool
	Tick    time.Duration
}

// wireMessage is the JSON form of election.Message. v, group, type, from and
// term are always present; the rest only when set. Granted is a pointer so
// that a vote always says whether it was granted and other types never do.
type wireMessage struct {
	V            int      `json:"v"`
	Group        string   `json:"group"`
	Type         string   `json:"type"`
	From         string   `json:"from"`
	To           string   `json:"to,omitempty"`
	Term         uint64   `json:"term"`
	Seq          uint64   `json:"seq,omitempty"`
	Granted      *bool    `json:"granted,omitempty"`
	Alive        []string `json:"alive,omitempty"`
	Nominee      string   `json:"nominee,omitempty"`
	Initiator    string   `json:"initiator,omitempty"`
	Candidate    string   `json:"candidate,omitempty"`
	Participants []string `json:"participants,omitempty"`
	Conn         string   `json:"conn,omitempty"`
	Alg          string   `json:"alg,omitempty"`
	// Drained, on an ack, says the sender never stands (edge-agent drain).
	Drained bool `json:"drained,omitempty"`
	// Promise, on an ack or a granted vote (protocol 4), is the sender's D
	// in milliseconds (election.Message.Promise).
	Promise int64 `json:"promise,omitempty"`
	// Fence, on an ack or a granted vote (protocol 5), is what was left of
	// the sender's fast-path fence, in milliseconds rounded up
	// (election.Message.Fence).
	Fence int64 `json:"fence,omitempty"`
	// FenceConn, with a fence (protocol 5), names the closed connection
	// whose report began it (election.Message.FenceConn).
	FenceConn string `json:"fenceconn,omitempty"`
	// NoFence, on a heartbeat (protocol 6), says the leader runs no work
	// that could outlive its connection (election.Message.NoFence).
	NoFence bool `json:"nofence,omitempty"`
	// Inst names a process, on an instance announcement (instance.go).
	Inst string `json:"inst,omitempty"`
	// Ep and N number a signed message (epoch of the sender's process,
	// counter within it), so that receivers can refuse replays.
	Ep uint64 `json:"ep,omitempty"`
	N  uint64 `json:"n,omitempty"`
	// PV is the sender's protocol version, sent (protocol 2 and later)
	// only to members that speak it: a member that announced protocol 2
	// and then sends without it runs an older build again.
	PV int `json:"pv,omitempty"`
}

// fieldRule says which optional fields a message type uses. A field that a
// type does not use must be zero; a required one must not be.
type fieldRule struct {
	needTerm      bool // term >= 1: the message speaks for an established term
	seq, needSeq  bool
	granted       bool
	alive         bool
	nominee       bool
	initiator     bool
	needInitiator bool
	candidate     bool
	needTo        bool // the message goes to one member, never to the group
	participants  bool
	conn          bool
	drained       bool
	promise       bool
	noFence       bool
}

// fieldRules is the per-type field contract of the wire format. Election, OK
// and the ring messages may carry term 0: a member that never saw a leader
// has no term yet. A ring token carries its round (initiator and seq, the
// initiator's round counter), which its ring ack echoes, and the candidate
// its participants voted for. The candidate is optional here so that a token
// of an older edge-agent (which had none) still decodes; the Ring core
// refuses a token without one, since the older protocol's participants did
// not vote.
var fieldRules = map[election.MsgType]fieldRule{
	election.MsgHeartbeat:   {needTerm: true, seq: true, needSeq: true, alive: true, conn: true, noFence: true},
	election.MsgAck:         {needTerm: true, seq: true, drained: true, promise: true},
	election.MsgElection:    {},
	election.MsgOK:          {},
	election.MsgCoordinator: {needTerm: true, seq: true},
	election.MsgVote:        {needTerm: true, seq: true, granted: true, promise: true},
	election.MsgResign:      {needTerm: true, nominee: true},
	election.MsgRingToken:   {seq: true, needSeq: true, initiator: true, needInitiator: true, candidate: true, participants: true, needTo: true},
	election.MsgRingAck:     {seq: true, needSeq: true, initiator: true, needInitiator: true, needTo: true},
	// A pre-vote request names the term asked for and numbers the request;
	// the reply echoes the number, or carries 0 when sent unasked.
	election.MsgPreVote:      {needTerm: true, seq: true, needSeq: true},
	election.MsgPreVoteReply: {needTerm: true, seq: true, granted: true, needTo: true},
	// Protocol 2: a candidacy ended without leading (see Speaks).
	election.MsgWithdraw: {needTerm: true},
}

// Encode returns the wire form of m, a message of group. It refuses (with a
// *BadMessageError) a message that a receiver would drop for its form alone:
// an unknown type, an invalid id, a field its type does not use, a missing
// required field, duplicate or too many ids, or a size over MaxMessageSize.
func Encode(group string, m election.Message) ([]byte, error) {
	return EncodeNumbered(group, m, 0, 0)
}

// EncodeNumbered is Encode for a signed message numbered (ep, n).
func EncodeNumbered(group string, m election.Message, ep, n uint64) ([]byte, error) {
	return EncodeAt(group, m, ep, n, ProtocolMin)
}

// EncodeAt is EncodeNumbered for a receiver that speaks protocol level
// (the site's version for a broadcast): m is downgraded to it, and from
// protocol 2 on the message says the sender's version ("pv").
func EncodeAt(group string, m election.Message, ep, n uint64, level int) ([]byte, error) {
	return EncodeTimed(group, 0, m, ep, n, level)
}

// EncodeTimed is EncodeAt for a sender whose tick is tick: m's promise
// (election.Message.Promise, in ticks) goes out in milliseconds, rounded
// down. With tick 0 it is not sent.
func EncodeTimed(group string, tick time.Duration, m election.Message, ep, n uint64, level int) ([]byte, error) {
	level = min(level, ProtocolMax)
	if !Speaks(m.Type, level) {
		return nil, bad(ReasonUnknownType, "a member of protocol %d does not know message type %s", level, m.Type)
	}
	m = Downgrade(m, level)
	if !election.ValidID(group) {
		return nil, bad(ReasonBadField, "group %q is not a valid group name", group)
	}
	if _, ok := fieldRules[m.Type]; !ok {
		return nil, bad(ReasonUnknownType, "cannot encode message type %s", m.Type)
	}
	if err := checkIDs(m); err != nil {
		return nil, err
	}
	if err := checkFields(m); err != nil {
		return nil, err
	}
	w := wires.Get().(*wireMessage) // json.Marshal's argument is on the heap
	defer func() {
		*w = wireMessage{}
		wires.Put(w)
	}()
	*w = wireMessage{
		V:            WireVersion,
		Group:        group,
		Type:         m.Type.String(),
		From:         m.From,
		To:           m.To,
		Term:         m.Term,
		Seq:          m.Seq,
		Alive:        m.Alive,
		Nominee:      m.Nominee,
		Initiator:    m.Initiator,
		Candidate:    m.Candidate,
		Participants: m.Participants,
		Conn:         m.Conn,
		Alg:          m.Algorithm,
		Drained:      m.Drained,
		FenceConn:    m.FenceConn,
		NoFence:      m.NoFence,
		Ep:           ep,
		N:            n,
	}
	if m.Promise > 0 && tick > 0 {
		w.Promise = (time.Duration(m.Promise) * tick).Milliseconds()
	}
	if m.Fence > 0 {
		w.Fence = int64((time.Duration(m.Fence) + time.Millisecond - 1) / time.Millisecond)
	}
	if level >= 2 {
		w.PV = ProtocolMax
	}
	if m.Type == election.MsgVote || m.Type == election.MsgPreVoteReply {
		g := m.Granted // not &m.Granted, which would put all of m on the heap for every message
		w.Granted = &g
	}
	data, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("wire: encode %s: %w", m.Type, err)
	}
	if len(data) > MaxMessageSize {
		return nil, bad(ReasonOversize, "encoded %s is %d bytes, over %d", m.Type, len(data), MaxMessageSize)
	}
	return data, nil
}

// Decode parses and checks one message received on subject. It returns a
// *BadMessageError for anything that must not be applied. The checks run in
// this order, and the first failing one gives the reason:
//
//   - oversize: more than MaxMessageSize bytes (before any parsing);
//   - malformed: not a single JSON object, a repeated or unknown key (keys
//     are case-sensitive), a value of the wrong JSON type, trailing data;
//   - unknown_version: "v" missing or not WireVersion. It is checked before
//     unknown keys, so that a newer version's new fields are reported as a
//     version skew rather than as garbage;
//   - unknown_type;
//   - wrong_group: "group" is not expect.Group;
//   - not_member: from, to, nominee, initiator, candidate or an id of alive or
//     participants is not in expect.Members;
//   - subject_mismatch: subject is not an election subject of the group, or
//     its sender is not from, or its target is not to ("" on a broadcast);
//   - not_for_me: to is set and is not expect.Self;
//   - bad_field: the type's field contract is broken (see Encode), a term is
//     above election.MaxTerm, or a list is longer than the group.
//
// Empty lists decode as nil. Decode never panics and does not retain data.
func Decode(data []byte, subject string, expect DecodeContext) (election.Message, error) {
	m, _, _, err := DecodeNumbered(data, subject, expect)
	return m, err
}

// DecodeNumbered is Decode that also returns the message's numbering (0, 0
// when unsigned).
func DecodeNumbered(data []byte, subject string, expect DecodeContext) (m election.Message, ep, n uint64, err error) {
	if len(data) > MaxMessageSize {
		return election.Message{}, 0, 0, bad(ReasonOversize, "%d bytes, over %d", len(data), MaxMessageSize)
	}
	w, err := parseWire(data)
	if err != nil {
		return election.Message{}, 0, 0, err
	}
	m, err = decodeChecked(w, subject, expect)
	return m, w.Ep, w.N, err
}

func decodeChecked(w wireMessage, subject string, expect DecodeContext) (election.Message, error) {
	t, ok := election.ParseMsgType(w.Type)
	if !ok {
		return election.Message{}, bad(ReasonUnknownType, "type %q", w.Type)
	}
	if w.Group != expect.Group {
		return election.Message{}, bad(ReasonWrongGroup, "group %q, want %q", w.Group, expect.Group)
	}
	if w.Inst != "" {
		return election.Message{}, bad(ReasonBadField, "inst set on %s", w.Type)
	}
	m := election.Message{
		Type:         t,
		From:         w.From,
		To:           w.To,
		Term:         w.Term,
		Seq:          w.Seq,
		Granted:      w.Granted != nil && *w.Granted,
		Alive:        nilIfEmpty(w.Alive),
		Nominee:      w.Nominee,
		Initiator:    w.Initiator,
		Candidate:    w.Candidate,
		Participants: nilIfEmpty(w.Participants),
		Conn:         w.Conn,
		Algorithm:    w.Alg,
		Drained:      w.Drained,
		NoFence:      w.NoFence,
	}
	if err := checkMembers(m, expect.Members); err != nil {
		return election.Message{}, err
	}
	from, to, ok := SubjectParties(subject, expect.Prefix, expect.Group)
	if !ok {
		return election.Message{}, bad(ReasonSubjectMismatch, "subject %q is not an election subject of %s.%s", subject, expect.Prefix, expect.Group)
	}
	if from != m.From {
		return election.Message{}, bad(ReasonSubjectMismatch, "subject sender %q, payload from %q", from, m.From)
	}
	if to != m.To {
		return election.Message{}, bad(ReasonSubjectMismatch, "subject target %q, payload to %q", to, m.To)
	}
	if m.To != "" && m.To != expect.Self {
		return election.Message{}, bad(ReasonNotForMe, "to %q", m.To)
	}
	if err := checkFields(m); err != nil {
		return election.Message{}, err
	}
	if w.Promise != 0 {
		if r := fieldRules[t]; !r.promise || (t == election.MsgVote && !m.Granted) {
			return election.Message{}, bad(ReasonBadField, "promise set on %s", t)
		}
		if w.Promise < 0 || w.Promise > MaxPromise.Milliseconds() {
			return election.Message{}, bad(ReasonBadField, "promise of %d ms on %s", w.Promise, t)
		}
		// Read in this member's ticks, rounded down: a promise is never
		// read longer than it was made; one under a tick reads as one
		// tick (0 means not said). Without a tick, it is not read.
		if expect.Tick > 0 {
			m.Promise = max(1, int(time.Duration(w.Promise)*time.Millisecond/expect.Tick))
		}
	}
	if w.Fence != 0 || w.FenceConn != "" {
		if w.Fence < 0 || w.Fence > MaxFence.Milliseconds() {
			return election.Message{}, bad(ReasonBadField, "fence of %d ms on %s", w.Fence, t)
		}
		m.Fence = int64(time.Duration(w.Fence) * time.Millisecond)
		m.FenceConn = w.FenceConn
		if err := checkFields(m); err != nil {
			return election.Message{}, err
		}
	}
	if n := len(expect.Members); len(m.Alive) > n || len(m.Participants) > n {
		return election.Message{}, bad(ReasonBadField, "list of %d ids in a group of %d", max(len(m.Alive), len(m.Participants)), n)
	}
	return m, nil
}

// parseWire turns data into a wireMessage in one pass over the JSON
// object's members, reporting malformed or unknown_version: data must be
// exactly one JSON object with no repeated key, its "v" must be WireVersion
// (checked before unknown keys, so that a newer version's new fields are
// reported as a version skew), keys are matched case-sensitively and each
// value must have its field's JSON type. json.Valid checks the syntax
// first; the scan then relies on it, and plain strings and numbers, what
// every member sends, are read without encoding/json (a witness serving a
// thousand groups spent a tenth of its CPU in a token-by-token decoder).
// The results are those of the token-by-token parser it replaced
// (parseTokens in the tests, FuzzParseWire).
func parseWire(data []byte) (wireMessage, error) {
	s := scans.Get().(*wireScan) // the scan's fields point into it: on the heap
	defer func() {
		*s = wireScan{}
		scans.Put(s)
	}()
	if !json.Valid(data) {
		var v any
		return s.w, &BadMessageError{Reason: ReasonMalformed, Err: json.Unmarshal(data, &v)}
	}
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return s.w, bad(ReasonMalformed, "not a JSON object")
	}
	i++
	for {
		i = skipSpace(data, i)
		if data[i] == '}' {
			break
		}
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
		end := skipString(data, i)
		quoted := data[i:end]
		i = skipSpace(data, end) + 1 // the colon
		i = skipSpace(data, i)
		vend := skipValue(data, i)
		if err := s.member(quoted, data[i:vend]); err != nil {
			return s.w, err
		}
		i = vend
	}
	switch {
	case s.version != WireVersion:
		return s.w, bad(ReasonUnknownVersion, "version %d, want %d", s.version, WireVersion)
	case s.unknown != nil:
		return s.w, bad(ReasonMalformed, "unknown field %q", *s.unknown)
	case s.valueErr != nil:
		return s.w, &BadMessageError{Reason: ReasonMalformed, Err: s.valueErr}
	}
	s.w.V = WireVersion
	return s.w, nil
}

// wires are EncodeTimed's messages, reused as scans are.
var wires = sync.Pool{New: func() any { return new(wireMessage) }}

// scans are parseWire's scans, reused: a witness parses thousands of
// messages a second.
var scans = sync.Pool{New: func() any { return new(wireScan) }}

// wireScan is what parseWire has read of an object so far.
type wireScan struct {
	w        wireMessage
	version  uint64
	unknown  *string  // the first key the wire format does not have
	valueErr error    // the first value of the wrong type
	seen     uint32   // known keys, by fieldBit
	others   []string // unknown keys seen
}

// member reads one member of the object: its key as it stands in the
// JSON (quotes included) and its raw value. A repeated key, a bad escape
// in a key or a "v" that is not a number ends the parse; an unknown key or
// a value of the wrong type is kept for the end, where "v" is checked first.
func (s *wireScan) member(quoted, raw []byte) error {
	var (
		bit   uint32
		field any
		key   string
	)
	if plain(quoted) {
		bit, field = s.w.field(string(quoted[1 : len(quoted)-1])) // no copy: key does not escape
		if bit != 0 {
			key = fieldNames[bits.TrailingZeros32(bit)]
		} else {
			key = string(quoted[1 : len(quoted)-1])
		}
	} else {
		var escaped string
		if err := json.Unmarshal(quoted, &escaped); err != nil {
			return &BadMessageError{Reason: ReasonMalformed, Err: err}
		}
		key = escaped
		bit, field = s.w.field(key)
	}
	if bit != 0 {
		if s.seen&bit != 0 {
			return bad(ReasonMalformed, "repeated key %q", key)
		}
		s.seen |= bit
	} else {
		if slices.Contains(s.others, key) {
			return bad(ReasonMalformed, "repeated key %q", key)
		}
		s.others = append(s.others, key)
	}
	switch {
	case key == "v":
		var err error
		if s.version, err = strconv.ParseUint(string(raw), 10, 64); err != nil {
			return bad(ReasonMalformed, "v is %s, not a version number", raw)
		}
	case field == nil:
		if s.unknown == nil {
			first := key
			s.unknown = &first
		}
	case s.valueErr == nil:
		if err := decodeValue(raw, field); err != nil {
			s.valueErr = fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// The scanners below read valid JSON (json.Valid) only.

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string that starts at data[i].
func skipString(data []byte, i int) int {
	for i++; ; i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the end of the value that starts at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch data[i] {
			case '"':
				i = skipString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[i])) {
		i++
	}
	return i
}

// plain reports whether the JSON string s (quotes included) holds printable
// ASCII only and no escape: its value is what lies between the quotes.
func plain(s []byte) bool {
	for _, c := range s[1 : len(s)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// decodeValue decodes raw into field as encoding/json would, reading plain
// strings and unsigned integers itself.
func decodeValue(raw []byte, field any) error {
	switch f := field.(type) {
	case *string:
		if raw[0] == '"' && plain(raw) {
			*f = string(raw[1 : len(raw)-1])
			return nil
		}
	case *uint64:
		if digits(raw) {
			if n, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
				*f = n
				return nil
			}
		}
	case *int:
		if digits(raw) {
			if n, err := strconv.ParseInt(string(raw), 10, 0); err == nil {
				*f = int(n)
				return nil
			}
		}
	case *[]string:
		if ids, ok := plainList(raw); ok {
			*f = ids
			return nil
		}
	}
	return json.Unmarshal(raw, field)
}

// digits reports whether the JSON number raw is a non-negative integer
// written without fraction or exponent.
func digits(raw []byte) bool {
	return raw[0] >= '0' && raw[0] <= '9' && !bytes.ContainsAny(raw, ".eE")
}

// plainList reads the JSON array raw when it holds plain strings only.
func plainList(raw []byte) ([]string, bool) {
	if raw[0] != '[' {
		return nil, false
	}
	var ids []string
	for i := skipSpace(raw, 1); raw[i] != ']'; {
		if raw[i] != '"' {
			return nil, false
		}
		end := skipString(raw, i)
		if !plain(raw[i:end]) {
			return nil, false
		}
		ids = append(ids, string(raw[i+1:end-1]))
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, true
}

// fieldNames are the wire format's keys, by the bit field gives them.
var fieldNames = [...]string{"v", "group", "type", "from", "to", "term", "seq", "granted", "alive", "nominee", "initiator", "candidate", "participants", "conn", "alg", "drained", "inst", "ep", "n", "pv", "promise", "fence", "fenceconn", "nofence"}

// field returns the bit of key among the wire format's keys and a pointer
// to the field of w that it names; a bit of 0 for a key the wire format
// does not have, and a nil field for it and for "v".
func (w *wireMessage) field(key string) (uint32, any) {
	switch key {
	case "v":
		return 1, nil
	case "group":
		return 1 << 1, &w.Group
	case "type":
		return 1 << 2, &w.Type
	case "from":
		return 1 << 3, &w.From
	case "to":
		return 1 << 4, &w.To
	case "term":
		return 1 << 5, &w.Term
	case "seq":
		return 1 << 6, &w.Seq
	case "granted":
		return 1 << 7, &w.Granted
	case "alive":
		return 1 << 8, &w.Alive
	case "nominee":
		return 1 << 9, &w.Nominee
	case "initiator":
		return 1 << 10, &w.Initiator
	case "candidate":
		return 1 << 11, &w.Candidate
	case "participants":
		return 1 << 12, &w.Participants
	case "conn":
		return 1 << 13, &w.Conn
	case "alg":
		return 1 << 14, &w.Alg
	case "drained":
		return 1 << 15, &w.Drained
	case "inst":
		return 1 << 16, &w.Inst
	case "ep":
		return 1 << 17, &w.Ep
	case "n":
		return 1 << 18, &w.N
	case "pv":
		return 1 << 19, &w.PV
	case "promise":
		return 1 << 20, &w.Promise
	case "fence":
		return 1 << 21, &w.Fence
	case "fenceconn":
		return 1 << 22, &w.FenceConn
	case "nofence":
		return 1 << 23, &w.NoFence
	}
	return 0, nil
}

// checkIDs reports an id of m that cannot name a member.
func checkIDs(m election.Message) error {
	invalid := func(field, id string) error {
		return bad(ReasonBadField, "%s %q is not a valid member id", field, id)
	}
	if !election.ValidID(m.From) {
		return invalid("from", m.From)
	}
	for _, f := range [...]struct{ name, id string }{{"to", m.To}, {"nominee", m.Nominee}, {"initiator", m.Initiator}, {"candidate", m.Candidate}} {
		if f.id != "" && !election.ValidID(f.id) {
			return invalid(f.name, f.id)
		}
	}
	for _, id := range m.Alive {
		if !election.ValidID(id) {
			return invalid("alive", id)
		}
	}
	for _, id := range m.Participants {
		if !election.ValidID(id) {
			return invalid("participants", id)
		}
	}
	return nil
}

// CheckOutbound reports what a receiver in a group of members would drop m
// for and Encode cannot see: an id that is not a member, or a list longer
// than the group.
func CheckOutbound(m election.Message, members map[string]bool) error {
	if err := checkMembers(m, members); err != nil {
		return err
	}
	if n := len(members); len(m.Alive) > n || len(m.Participants) > n {
		return bad(ReasonBadField, "list of %d ids in a group of %d", max(len(m.Alive), len(m.Participants)), n)
	}
	return nil
}

// checkMembers reports an id of m that is not in members.
func checkMembers(m election.Message, members map[string]bool) error {
	notMember := func(field, id string) error {
		return bad(ReasonNotMember, "%s %q", field, id)
	}
	if !members[m.From] {
		return notMember("from", m.From)
	}
	for _, f := range [...]struct{ name, id string }{{"to", m.To}, {"nominee", m.Nominee}, {"initiator", m.Initiator}, {"candidate", m.Candidate}} {
		if f.id != "" && !members[f.id] {
			return notMember(f.name, f.id)
		}
	}
	for _, id := range m.Alive {
		if !members[id] {
			return notMember("alive", id)
		}
	}
	for _, id := range m.Participants {
		if !members[id] {
			return notMember("participants", id)
		}
	}
	return nil
}

// checkFields checks m against the field contract of its type; it needs no
// knowledge of the group, so Encode and Decode share it.
func checkFields(m election.Message) error {
	r, ok := fieldRules[m.Type]
	if !ok {
		return bad(ReasonUnknownType, "type %s", m.Type)
	}
	t := m.Type
	switch {
	case r.needTerm && m.Term == 0:
		return bad(ReasonBadField, "%s with term 0", t)
	case r.needSeq && m.Seq == 0:
		return bad(ReasonBadField, "%s with seq 0", t)
	case !r.seq && m.Seq != 0:
		return bad(ReasonBadField, "seq set on %s", t)
	case !r.granted && m.Granted:
		return bad(ReasonBadField, "granted set on %s", t)
	case !r.alive && len(m.Alive) > 0:
		return bad(ReasonBadField, "alive set on %s", t)
	case !r.nominee && m.Nominee != "":
		return bad(ReasonBadField, "nominee set on %s", t)
	case r.needTo && m.To == "":
		return bad(ReasonBadField, "%s sent to the whole group", t)
	case r.needInitiator && m.Initiator == "":
		return bad(ReasonBadField, "%s without initiator", t)
	case !r.initiator && m.Initiator != "":
		return bad(ReasonBadField, "initiator set on %s", t)
	case !r.candidate && m.Candidate != "":
		return bad(ReasonBadField, "candidate set on %s", t)
	case !r.participants && len(m.Participants) > 0:
		return bad(ReasonBadField, "participants set on %s", t)
	case !r.conn && m.Conn != "":
		return bad(ReasonBadField, "conn set on %s", t)
	case !r.drained && m.Drained:
		return bad(ReasonBadField, "drained set on %s", t)
	case !r.noFence && m.NoFence:
		return bad(ReasonBadField, "nofence set on %s", t)
	case m.NoFence && m.Conn == "":
		return bad(ReasonBadField, "nofence without a conn on %s", t)
	case !r.promise && m.Promise != 0, m.Type == election.MsgVote && !m.Granted && m.Promise != 0:
		return bad(ReasonBadField, "promise set on %s", t)
	case !r.promise && m.Fence != 0, m.Type == election.MsgVote && !m.Granted && m.Fence != 0:
		return bad(ReasonBadField, "fence set on %s", t)
	case m.Fence < 0 || m.Fence > int64(MaxFence):
		return bad(ReasonBadField, "fence of %s on %s", time.Duration(m.Fence), t)
	case m.FenceConn != "" && m.Fence == 0:
		return bad(ReasonBadField, "fenceconn without a fence on %s", t)
	case !validConn(m.FenceConn):
		return bad(ReasonBadField, "fenceconn %q is not a connection identity", m.FenceConn)
	case m.Algorithm != "" && m.Algorithm != "bully" && m.Algorithm != "ring":
		return bad(ReasonBadField, "alg %q is not bully or ring", m.Algorithm)
	case !validConn(m.Conn):
		return bad(ReasonBadField, "conn %q is not a connection identity", m.Conn)
	case m.Term > election.MaxTerm:
		return bad(ReasonBadField, "%s with term %d above the bound %d", t, m.Term, election.MaxTerm)
	case m.To != "" && m.To == m.From:
		return bad(ReasonBadField, "%s addressed to its sender", t)
	case m.Nominee != "" && m.Nominee == m.From:
		return bad(ReasonBadField, "resign nominating its sender")
	case len(m.Alive) > WireMaxMembers || len(m.Participants) > WireMaxMembers:
		return bad(ReasonBadField, "list longer than %d ids", WireMaxMembers)
	}
	if id := firstDuplicate(m.Alive); id != "" {
		return bad(ReasonBadField, "alive lists %q twice", id)
	}
	if id := firstDuplicate(m.Participants); id != "" {
		return bad(ReasonBadField, "participants lists %q twice", id)
	}
	return nil
}

func firstDuplicate(ids []string) string {
	if len(ids) < 2 {
		return ""
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return id
		}
		seen[id] = true
	}
	return ""
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// validConn reports whether s can identify a bus connection: empty, or at
// most 128 printable ASCII characters without spaces.
func validConn(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
