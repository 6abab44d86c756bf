package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// TestNextEpochGrowsAndSaturates: the epoch grows at every start (older
// agents accept only growing epochs), carries the new-style bit and random
// low bits, and a damaged or saturated counter never wraps.
func TestNextEpochGrowsAndSaturates(t *testing.T) {
	dir := t.TempDir()
	prev := uint64(0)
	for i := 0; i < 3; i++ {
		e, err := NextEpoch(dir)
		if err != nil {
			t.Fatal(err)
		}
		if e&wire.NewStyleEpoch == 0 || e <= prev || (e>>32)&wire.MaxEpochCount != uint64(i+1) {
			t.Fatalf("epoch %x after %x", e, prev)
		}
		prev = e
	}
	if err := os.WriteFile(filepath.Join(dir, "epoch"), []byte(strconv.FormatUint(^uint64(0), 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := NextEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e&wire.NewStyleEpoch == 0 || (e>>32)&wire.MaxEpochCount != wire.MaxEpochCount {
		t.Fatalf("epoch %x from a saturated counter", e)
	}
}

// TestSecretFileReadableByOthersIsRefused: a seed others can read is
// refused, naming the setting.
func TestSecretFileReadableByOthersIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckSecretFile("signing_seed", path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o602, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckSecretFile("signing_seed", path); err == nil {
			t.Fatalf("mode %04o accepted", mode)
		}
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := CheckSecretFile("signing_seed", path); err != nil {
		t.Fatalf("a group-readable seed (root:edge-agent 0640) refused: %v", err)
	}
}
