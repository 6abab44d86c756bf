// Package quorum is the arithmetic of a group's quorum: how many votes or
// acknowledgements make one, whether an election is won, lost or still open,
// and the newest value that a quorum has reached. It is pure and tiny, so
// that each rule is written once.
package quorum

import "slices"

// Size is the number of members, counting the one that counts, whose votes
// (or acknowledgements) make a quorum.
type Size int

// Majority returns the majority of a group of n: floor(n/2)+1.
func Majority(n int) Size { return Size(n/2 + 1) }

// Reached reports whether n votes make a quorum.
func (q Size) Reached(n int) bool { return n >= int(q) }

// VoteResult is the state of an election.
type VoteResult uint8

// Election states.
const (
	Pending VoteResult = iota // neither won nor lost yet
	Won                       // a quorum granted
	Lost                      // so many refused that a quorum can no longer grant
)

// Vote returns the state of an election among members voters of which
// granted and refused have answered.
func (q Size) Vote(members, granted, refused int) VoteResult {
	switch {
	case granted >= int(q):
		return Won
	case members-refused < int(q):
		return Lost
	}
	return Pending
}

// Index returns the highest value that at least q of xs have reached (the
// q-th highest), or 0 if xs has fewer than q values. A leader's lease runs
// from the newest heartbeat sequence that a quorum, itself included, has
// acknowledged: Index of the acknowledged sequences.
func (q Size) Index(xs []uint64) uint64 {
	if int(q) < 1 || len(xs) < int(q) {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)-int(q)]
}
