package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// twoSigners returns the signers of members a and b of one group, with
// epochs ea and eb.
func twoSigners(t *testing.T, ea, eb uint64) (*Signing, *Signing) {
	t.Helper()
	keys := map[string]string{}
	seeds := map[string][]byte{}
	for _, id := range []string{"a", "b"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[id], _ = kp.PublicKey()
		seeds[id], _ = kp.Seed()
	}
	a, err := NewSigning("a", seeds["a"], keys, ea)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSigning("b", seeds["b"], keys, eb)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func wantAdmit(t *testing.T, s *Signing, from string, ep, n uint64, reason string) {
	t.Helper()
	if got, _ := s.admit(from, ep, n); got != reason {
		t.Fatalf("admit(%s, %x, %d) = %q, want %q", from, ep, n, got, reason)
	}
}

// TestEpochIsAcceptedOnlyOnceProved: a new-style epoch is refused until
// its sender answers a challenge; then only growing counters of it pass.
func TestEpochIsAcceptedOnlyOnceProved(t *testing.T) {
	const eb = newStyleEpoch | 1<<32 | 7
	a, _ := twoSigners(t, newStyleEpoch|1<<32|1, eb)
	if reason, challenge := a.admit("b", eb, 1); reason != ReasonUnverified || !challenge {
		t.Fatalf("first message of an unproved epoch: %q, challenge %v", reason, challenge)
	}
	if _, challenge := a.admit("b", eb, 2); challenge {
		t.Fatal("challenged again within challengeInterval")
	}
	nonce := a.challenge("b")
	if r := a.proof("b", eb, 3, nonce+1); r == "" {
		t.Fatal("a proof of another nonce was taken")
	}
	if r := a.proof("b", eb, 3, nonce); r != "" {
		t.Fatalf("the proof was refused: %s", r)
	}
	if r := a.proof("b", eb, 4, nonce); r == "" {
		t.Fatal("a nonce was taken twice")
	}
	wantAdmit(t, a, "b", eb, 2, ReasonReplayed) // sent before the proof
	wantAdmit(t, a, "b", eb, 4, "")
	wantAdmit(t, a, "b", eb, 4, ReasonReplayed)
	wantAdmit(t, a, "b", eb, 9, "")
}

// TestRestartedSenderIsProvedAgain: a sender's new epoch (a restart, or a
// reflash whose counter went back) is refused until proved; its old epoch
// is refused for good once the new one is.
func TestRestartedSenderIsProvedAgain(t *testing.T) {
	const e1, e2 = newStyleEpoch | 5<<32 | 99, newStyleEpoch | 1<<32 | 3 // e2 < e1: a reflash
	a, _ := twoSigners(t, newStyleEpoch|1<<32|1, e1)
	if r := a.proof("b", e1, 1, a.challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", e1, 2, "")
	wantAdmit(t, a, "b", e2, 1, ReasonUnverified)
	if r := a.proof("b", e2, 2, a.challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", e2, 3, "")
	wantAdmit(t, a, "b", e1, 1000, ReasonUnverified) // the dead incarnation's traffic
}

// TestChallengeExpires: a proof that comes after nonceLifetime proves
// nothing (a late or captured proof must not switch epochs).
func TestChallengeExpires(t *testing.T) {
	const eb = newStyleEpoch | 1<<32 | 7
	a, _ := twoSigners(t, newStyleEpoch|1<<32|1, eb)
	nonce := a.challenge("b")
	a.start = a.start.Add(-nonceLifetime - time.Second)
	if r := a.proof("b", eb, 1, nonce); r == "" {
		t.Fatal("an expired challenge was answered")
	}
}

// TestOlderBuildNumbering: epochs without the new-style bit (an agent of an
// older build) pass as the older build checks them, until the member
// proves a new-style epoch in this run.
func TestOlderBuildNumbering(t *testing.T) {
	a, _ := twoSigners(t, newStyleEpoch|1<<32|1, 3)
	wantAdmit(t, a, "b", 3, 10, "")
	wantAdmit(t, a, "b", 3, 10, ReasonReplayed)
	wantAdmit(t, a, "b", 2, 50, ReasonReplayed)
	wantAdmit(t, a, "b", 4, 1, "") // restarted
	const eb = newStyleEpoch | 5<<32 | 1
	if r := a.proof("b", eb, 1, a.challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", 5, 1, ReasonReplayed) // proved new numbering: no going back
	if ids := a.unproven(); len(ids) != 0 {
		t.Fatalf("unproven after the proof: %v", ids)
	}
}

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
		if e&newStyleEpoch == 0 || e <= prev || (e>>32)&maxEpochCount != uint64(i+1) {
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
	if e&newStyleEpoch == 0 || (e>>32)&maxEpochCount != maxEpochCount {
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

func TestTokenBuckets(t *testing.T) {
	var b bucket
	for i := 0; i < 5; i++ {
		if !b.take(0, 1, 5) {
			t.Fatalf("token %d of a burst of 5 refused", i)
		}
	}
	if b.take(0, 1, 5) {
		t.Fatal("a sixth token at once")
	}
	if !b.take(time.Second, 1, 5) || b.take(time.Second, 1, 5) {
		t.Fatal("one token per second")
	}
	l := newLimiter(1, 1, 2)
	if !l.allow("a", 0) || !l.allow("b", 0) || l.allow("a", 0) {
		t.Fatal("per-key buckets")
	}
	if !l.allow("c", 0) || l.allow("d", 0) {
		t.Fatal("keys beyond maxKeys share one bucket")
	}
}
