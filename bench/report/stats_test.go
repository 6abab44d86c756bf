package main

import (
	"strings"
	"testing"
)

// A value just over a target must never print as the target.
func TestVerdictNeverRoundsTowardTheTarget(t *testing.T) {
	s := series{Unit: "ms", Samples: []float64{310.04}, Targets: []target{{Stat: "p99", Max: 310}}}
	v, missed := verdict(s)
	if !missed || !strings.Contains(v, "310.04 ms > 310 ms") {
		t.Fatalf("verdict = %q, missed = %v", v, missed)
	}
	s.Samples = []float64{310}
	if v, missed := verdict(s); missed {
		t.Fatalf("310 against 310: %q", v)
	}
	s = series{Unit: "groups", Samples: []float64{500, 499.6}, Targets: []target{{Stat: "min", Min: 500, AtLeast: true}}}
	if v, missed := verdict(s); !missed || !strings.Contains(v, "499.6 groups < 500 groups") {
		t.Fatalf("verdict = %q, missed = %v", v, missed)
	}
}
