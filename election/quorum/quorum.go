// Package quorum is the arithmetic of a group's quorum: how many votes or
// acknowledgements make one, whether an election is won, lost or still open,
// and the latest value that a quorum has reached. It is pure and tiny, so
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

// Latest returns the q-th latest of xs by compare (which orders earlier
// values first): the latest value that at least q of xs have reached. ok is
// false if xs has fewer than q values. xs is not reordered. A leader's lease
// lasts while a quorum, itself included, backs it: Latest of the times the
// members' backings end.
func Latest[T any](q Size, xs []T, compare func(a, b T) int) (v T, ok bool) {
	if int(q) < 1 || len(xs) < int(q) {
		return v, false
	}
	s := slices.Clone(xs)
	slices.SortStableFunc(s, compare)
	return s[len(s)-int(q)], true
}
