package quorum

import "testing"

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

func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		q    Size
		xs   []uint64
		want uint64
	}{
		{2, []uint64{9, 7}, 7},
		{2, []uint64{9}, 0},
		{3, []uint64{4, 9, 7, 1, 8}, 7},
		{1, []uint64{4, 9}, 9},
		{3, []uint64{5, 5, 5}, 5},
	} {
		xs := append([]uint64(nil), tc.xs...)
		if got := tc.q.Index(tc.xs); got != tc.want {
			t.Errorf("%d.Index(%v) = %d, want %d", tc.q, tc.xs, got, tc.want)
		}
		for i := range xs {
			if xs[i] != tc.xs[i] {
				t.Fatalf("Index reordered its argument: %v", tc.xs)
			}
		}
	}
}
