package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Protocol versions. The wire format ("v", WireVersion) is the envelope and
// stays 1: an agent drops a message of any other "v" and any key it does not
// know, so the envelope cannot change while older agents run. The protocol
// version says what a member understands inside it, and every member
// announces the range it speaks (Announcement). A member sends a field or a
// message type of protocol N only to members that announced N or more; a
// broadcast goes at the site's version, the highest that every member
// speaks. A member that announces nothing speaks protocol 1.
//
// History (docs/PROTOCOL.md lists the commits of each release):
//
//	1  every build before protocol announcements (up to and including the
//	   release at commit fc25320)
//	2  announces its range on AnnounceSubject; says "pv" in its messages;
//	   an acknowledgement may say "drained" (edge-agent drain); a candidate
//	   that gives up sends "withdraw", which frees its voters
//	3  an announcement says how often its member announces ("every", in
//	   milliseconds), and a member forgets another's announcement after
//	   three of that member's periods; on a site running protocol 3 the
//	   members announce every QuietAnnouncements heartbeat periods instead
//	   of every period
//	4  an acknowledgement of a heartbeat and a granted vote say the
//	   sender's D ("promise", in milliseconds): a leader counts them for
//	   its lease only as long as that D allows (election.Message.Promise),
//	   so that a lease longer than another gateway's D, as mid-way through
//	   a timing change, is shortened rather than outlived
//	5  an acknowledgement and a granted vote sent within the sender's
//	   fast-path fence say what is left of it ("fence", in
//	   milliseconds) and which closed connection's report began it
//	   ("fenceconn"): a member that leads on them waits it out before it
//	   acts, as if it had acted on that report itself
//	6  a heartbeat may say that its leader runs no leader work that could
//	   outlive its connection ("nofence"): a member that acts on the
//	   server's report of that connection's close needs no fence
const (
	ProtocolMin = 1
	ProtocolMax = 6
)

// ProtocolNoFence is the first protocol version whose members read a
// leader's "nofence". An older member is not sent it (it would drop the
// heartbeat for a key it does not know); it keeps its fence, as every
// build before it did.
const ProtocolNoFence = 6

// ProtocolFence is the first protocol version whose members read a fence.
// An older member is not sent it (it would drop the message for a key it
// does not know); it leads on such answers without waiting, as every build
// before it did.
const ProtocolFence = 5

// ProtocolPromise is the first protocol version whose members read a
// promise. To an older member it is not sent: it would drop the message
// for a key it does not know. A leader reads an older member's silence as
// its own D, as every build before it did.
const ProtocolPromise = 4

// ProtocolQuiet is the first protocol version whose members read an
// announcement's period ("every"): a member announces less often only on
// a site that runs it, since a member of protocol 2 forgets an
// announcement after three heartbeat periods whatever it says.
const ProtocolQuiet = 3

// QuietAnnouncements is how many heartbeat periods apart a member
// announces itself on a site that runs ProtocolQuiet or later.
const QuietAnnouncements = 10

// maxEvery bounds an announcement's period.
const maxEvery = time.Hour

// announceToken ends an announcement's subject. It is not a valid member
// id, so no agent's election subscription (el.*.<id>) matches it: agents of
// protocol 1 never receive announcements, and the permissions that let a
// member publish el.<id>.* already cover it.
const announceToken = "~pv"

// AnnounceSubject is the subject of member from's announcements.
func AnnounceSubject(prefix, group, from string) string {
	return BroadcastSubject(prefix, group, from) + "." + announceToken
}

// AnnounceWildcard receives every member's announcements in group.
func AnnounceWildcard(prefix, group string) string {
	return BroadcastSubject(prefix, group, "*") + "." + announceToken
}

// AnnounceSender returns the member an announcement subject names.
func AnnounceSender(subject, prefix, group string) (string, bool) {
	from, to, ok := SubjectParties(subject, prefix, group)
	if !ok || to != announceToken {
		return "", false
	}
	return from, election.ValidID(from)
}

// Announcement is what a member says of itself: the protocol versions it
// speaks and its build, and from protocol 3 on how long until it
// announces again at the latest (Every; 0: not said, a build of protocol
// 2, which announces every heartbeat period).
type Announcement struct {
	From     string
	Min, Max int
	Build    string
	Every    time.Duration
}

// maxBuildLen bounds the build string of an announcement.
const maxBuildLen = 64

type wireAnnouncement struct {
	V     int    `json:"v"`
	Group string `json:"group"`
	Type  string `json:"type"`
	From  string `json:"from"`
	Min   int    `json:"min"`
	Max   int    `json:"max"`
	Build string `json:"build,omitempty"`
	Every int64  `json:"every,omitempty"` // milliseconds
}

const announcementType = "protocol"

// EncodeAnnouncement encodes a's announcement in group.
func EncodeAnnouncement(group string, a Announcement) ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	return json.Marshal(wireAnnouncement{V: WireVersion, Group: group, Type: announcementType, From: a.From, Min: a.Min, Max: a.Max, Build: a.Build, Every: a.Every.Milliseconds()})
}

// DecodeAnnouncement parses and checks an announcement received on subject:
// one JSON object, of group, from the member the subject
// names, a sane range and a printable build of at most 64 bytes.
func DecodeAnnouncement(data []byte, subject, prefix, group string) (Announcement, error) {
	if len(data) > 1024 {
		return Announcement{}, bad(ReasonOversize, "announcement of %d bytes", len(data))
	}
	// Unknown keys are allowed: later protocols may say more of
	// themselves, and the announcement is what tells them apart.
	var w wireAnnouncement
	if err := json.Unmarshal(data, &w); err != nil {
		return Announcement{}, bad(ReasonMalformed, "announcement: %v", err)
	}
	if w.V != WireVersion || w.Type != announcementType {
		return Announcement{}, bad(ReasonUnknownVersion, "announcement v %d type %q", w.V, w.Type)
	}
	if w.Group != group {
		return Announcement{}, bad(ReasonWrongGroup, "group %q, want %q", w.Group, group)
	}
	from, ok := AnnounceSender(subject, prefix, group)
	if !ok || from != w.From {
		return Announcement{}, bad(ReasonSubjectMismatch, "announcement from %q on %q", w.From, subject)
	}
	if w.Every < 0 || w.Every > maxEvery.Milliseconds() {
		return Announcement{}, bad(ReasonBadField, "announcement period of %d ms", w.Every)
	}
	a := Announcement{From: w.From, Min: w.Min, Max: w.Max, Build: w.Build, Every: time.Duration(w.Every) * time.Millisecond}
	if err := a.check(); err != nil {
		return Announcement{}, err
	}
	return a, nil
}

func (a Announcement) check() error {
	if !election.ValidID(a.From) {
		return bad(ReasonBadField, "announcement from %q", a.From)
	}
	if a.Min < 1 || a.Max < a.Min || a.Max > 1<<16 {
		return bad(ReasonBadField, "protocol range %d..%d", a.Min, a.Max)
	}
	if a.Every < 0 || a.Every > maxEvery {
		return bad(ReasonBadField, "announcement period %s", a.Every)
	}
	if len(a.Build) > maxBuildLen {
		return bad(ReasonBadField, "build of %d bytes", len(a.Build))
	}
	for i := 0; i < len(a.Build); i++ {
		if c := a.Build[i]; c < 0x20 || c > 0x7e {
			return bad(ReasonBadField, "build %q is not printable ASCII", a.Build)
		}
	}
	return nil
}

// Overlaps reports whether a member speaking min..max can talk to this
// build at all.
func Overlaps(min, max int) bool { return min <= ProtocolMax && max >= ProtocolMin }

// Downgrade returns m as a member speaking protocol level reads it: the
// fields of later protocols cleared. Encode m at the level of its receiver
// (the site's version for a broadcast). Each field added from protocol 2 on
// is cleared here below its version.
func Downgrade(m election.Message, level int) election.Message {
	if level < 2 {
		// A leader of protocol 1 does not know drained members: it may
		// nominate one, which then declines to stand (the election goes on
		// as if the nominee had not answered).
		m.Drained = false
	}
	if level < ProtocolPromise {
		m.Promise = 0
	}
	if level < ProtocolFence {
		m.Fence, m.FenceConn = 0, ""
	}
	if level < ProtocolNoFence {
		m.NoFence = false
	}
	return m
}

// typeSince holds the protocol version that introduced each message type
// after protocol 1.
var typeSince = map[election.MsgType]int{
	election.MsgWithdraw: 2,
}

// Speaks reports whether a member speaking protocol level understands
// messages of type t. A message it does not is never sent to it: dropped
// as an unknown type, it would be counted as bad input, and a type's
// meaning may rest on rules of its own protocol. A broadcast of a type the
// site's version lacks goes as direct messages to the members that speak
// it (bus.NATSTransport.Send): a WITHDRAW on a site mid-upgrade frees the
// upgraded voters, and the older ones wait out D as builds of protocol 1 do.
func Speaks(t election.MsgType, level int) bool { return level >= typeSince[t] }

// ReasonProtocolMismatch: the sender announced a protocol range that does
// not overlap this build's.
const ReasonProtocolMismatch = "protocol_mismatch"

// String names a range for logs.
func (a Announcement) String() string {
	return fmt.Sprintf("%s (build %q, protocol %d..%d)", a.From, a.Build, a.Min, a.Max)
}
