package harness

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFreePortsAreReservedOutsideTheEphemeralRange(t *testing.T) {
	a, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	low := lowEphemeral()
	seen := map[int]bool{}
	for _, p := range append(a, b...) {
		if p >= low || p < 1024 {
			t.Errorf("port %d is not below the ephemeral range (from %d)", p, low)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		// Another process opens its own file, as a second open here does:
		// the lock must keep it out.
		f, err := reserve(filepath.Join(os.TempDir(), "edge-agent-test-ports"), p)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f.Close()
			t.Errorf("port %d could be reserved again while held", p)
		}
	}
}
