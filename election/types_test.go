package election

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"gw1": true, "GW-1_a": true, "0": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "gw.1": false, "gw 1": false, "gw*": false, "gw>": false,
		"é": false, "gw\x00": false, "a/b": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}
