package quorum

import (
	"cmp"
	"slices"
	"testing"
)

func TestMajority(t *testing.T) {
	for n, want := range map[int]Size{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4, 15: 8} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestVote(t *testing.T) {
	q := Majority(5)
	for _, tc := range []struct {
		granted, refused int
		want             VoteResult
	}{{1, 0, Pending}, {3, 0, Won}, {2, 2, Pending}, {2, 3, Lost}, {3, 2, Won}, {0, 3, Lost}} {
		if got := q.Vote(5, tc.granted, tc.refused); got != tc.want {
			t.Errorf("Vote(5, %d, %d) = %d, want %d", tc.granted, tc.refused, got, tc.want)
		}
	}
}

func TestLatest(t *testing.T) {
	for _, tc := range []struct {
		q    Size
		xs   []int
		want int
		ok   bool
	}{
		{2, []int{9, 7}, 7, true},
		{2, []int{9}, 0, false},
		{3, []int{4, 9, 7, 1, 8}, 7, true},
		{1, []int{4, 9}, 9, true},
		{3, []int{5, 5, 5}, 5, true},
		{0, []int{5}, 0, false},
	} {
		xs := append([]int(nil), tc.xs...)
		got, ok := Latest(tc.q, tc.xs, cmp.Compare[int])
		if got != tc.want || ok != tc.ok {
			t.Errorf("Latest(%d, %v) = %d, %v; want %d, %v", tc.q, tc.xs, got, ok, tc.want, tc.ok)
		}
		if !slices.Equal(xs, tc.xs) {
			t.Fatalf("Latest reordered its argument: %v", tc.xs)
		}
	}
}
