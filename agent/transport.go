package agent

import "github.com/edge-agent/edge-agent/election"

// Transport carries election messages between the members of one group.
// Implementations decode and validate what they receive: only well-formed
// messages from members of the group, addressed to this member or to all,
// reach Inbox. Everything else is dropped and reported through Hooks.OnBad.
type Transport interface {
	// Send delivers m to member m.To, or to every other member when m.To is "".
	// It never buffers for later delivery: a message that cannot go out now
	// is lost, since a late election message is worse than a lost one.
	Send(m election.Message) error
	// Inbox is the stream of accepted messages. It is closed by Close.
	Inbox() <-chan election.Message
	// Connected reports whether the transport can currently reach the bus.
	Connected() bool
	// Close stops delivery and releases the transport's resources.
	Close() error
}

// Hooks let a transport report traffic for metrics. Nil funcs are skipped.
// Hooks must not block and must not call the transport's Close.
type Hooks struct {
	// OnBad is called once for every dropped inbound message with a short
	// reason label: malformed, oversize, unknown_version, unknown_type,
	// wrong_group, not_member, subject_mismatch, bad_field, not_for_me,
	// inbox_full, rate_limited; with signing also unsigned, bad_signature,
	// replayed and unverified.
	OnBad func(reason string)
	// OnMessage is called for every inbound message that reached Inbox
	// ("in") and every sent message ("out").
	OnMessage func(t election.MsgType, direction string)
}
