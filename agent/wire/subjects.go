package wire

import "strings"

// Subjects. Election traffic from member F to the whole group goes to
// <prefix>.<group>.el.<F>, and from F to member T to <prefix>.<group>.el.<F>.<T>.
// Putting the sender in the subject lets the server's permissions pin a
// member to its own subjects, and lets a member subscribe only to broadcasts
// and to what is addressed to it. Operator requests go to
// <prefix>.<group>.ctl.<verb>.
const (
	subjectElection = "el"
	subjectControl  = "ctl"
)

// Control verbs accepted by ControlSubject.
const (
	VerbStatus   = "status"
	VerbResign   = "resign"
	VerbTransfer = "transfer"
	// VerbDrain and VerbUndrain ask the member a request names to stop (or
	// resume) standing for election; only that member answers.
	VerbDrain   = "drain"
	VerbUndrain = "undrain"
)

// BroadcastSubject returns the subject on which member from sends election
// messages to every member of group.
func BroadcastSubject(prefix, group, from string) string {
	return prefix + "." + group + "." + subjectElection + "." + from
}

// DirectSubject returns the subject on which member from sends election
// messages to member to alone.
func DirectSubject(prefix, group, from, to string) string {
	return BroadcastSubject(prefix, group, from) + "." + to
}

// ControlSubject returns the subject of an operator request to group; verb is
// one of VerbStatus, VerbResign, VerbTransfer.
func ControlSubject(prefix, group, verb string) string {
	return prefix + "." + group + "." + subjectControl + "." + verb
}

// BroadcastWildcard returns the subscription that receives every member's
// broadcasts in group (the subscriber's own included, unless the connection
// is NoEcho).
func BroadcastWildcard(prefix, group string) string {
	return BroadcastSubject(prefix, group, "*")
}

// DirectWildcard returns the subscription that receives every message
// addressed to member self in group.
func DirectWildcard(prefix, group, self string) string {
	return DirectSubject(prefix, group, "*", self)
}

// SubjectParties extracts the sender and the target ("" for a broadcast) from
// an election subject of prefix and group; ok is false when subject is not one.
func SubjectParties(subject, prefix, group string) (from, to string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+"."+group+"."+subjectElection+".")
	if !found {
		return "", "", false
	}
	from, to, direct := strings.Cut(rest, ".")
	if from == "" || (direct && (to == "" || strings.Contains(to, "."))) {
		return "", "", false
	}
	return from, to, true
}
