package benchresult

import (
	"testing"
)

func TestPercentileIsNearestRank(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {20, 1}, {21, 2}, {50, 3}, {99, 5}, {100, 5}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	// With fewer than 100 samples p99 is the maximum, never below it.
	var many []float64
	for i := 1; i <= 60; i++ {
		many = append(many, float64(i))
	}
	if got := Percentile(many, 99); got != 60 {
		t.Errorf("p99 of 1..60 = %v, want 60", got)
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its argument in place")
	}
}

func TestAlgorithmAvailable(t *testing.T) {
	if err := AlgorithmAvailable("bully"); err != nil {
		t.Fatalf("bully: %v", err)
	}
	if err := AlgorithmAvailable("paxos"); err == nil {
		t.Fatal("paxos reported available")
	}
}
