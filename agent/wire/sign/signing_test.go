package sign

import (
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent/wire"
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
	if got, _ := s.Admit(from, ep, n); got != reason {
		t.Fatalf("admit(%s, %x, %d) = %q, want %q", from, ep, n, got, reason)
	}
}

// TestEpochIsAcceptedOnlyOnceProved: a new-style epoch is refused until
// its sender answers a challenge; then only growing counters of it pass.
func TestEpochIsAcceptedOnlyOnceProved(t *testing.T) {
	const eb = wire.NewStyleEpoch | 1<<32 | 7
	a, _ := twoSigners(t, wire.NewStyleEpoch|1<<32|1, eb)
	if reason, challenge := a.Admit("b", eb, 1); reason != wire.ReasonUnverified || !challenge {
		t.Fatalf("first message of an unproved epoch: %q, challenge %v", reason, challenge)
	}
	if _, challenge := a.Admit("b", eb, 2); challenge {
		t.Fatal("challenged again within challengeInterval")
	}
	nonce := a.Challenge("b")
	if r := a.Proof("b", eb, 3, nonce+1); r == "" {
		t.Fatal("a proof of another nonce was taken")
	}
	if r := a.Proof("b", eb, 3, nonce); r != "" {
		t.Fatalf("the proof was refused: %s", r)
	}
	if r := a.Proof("b", eb, 4, nonce); r == "" {
		t.Fatal("a nonce was taken twice")
	}
	wantAdmit(t, a, "b", eb, 2, wire.ReasonReplayed) // sent before the proof
	wantAdmit(t, a, "b", eb, 4, "")
	wantAdmit(t, a, "b", eb, 4, wire.ReasonReplayed)
	wantAdmit(t, a, "b", eb, 9, "")
}

// TestRestartedSenderIsProvedAgain: a sender's new epoch (a restart, or a
// reflash whose counter went back) is refused until proved; its old epoch
// is refused for good once the new one is.
func TestRestartedSenderIsProvedAgain(t *testing.T) {
	const e1, e2 = wire.NewStyleEpoch | 5<<32 | 99, wire.NewStyleEpoch | 1<<32 | 3 // e2 < e1: a reflash
	a, _ := twoSigners(t, wire.NewStyleEpoch|1<<32|1, e1)
	if r := a.Proof("b", e1, 1, a.Challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", e1, 2, "")
	wantAdmit(t, a, "b", e2, 1, wire.ReasonUnverified)
	if r := a.Proof("b", e2, 2, a.Challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", e2, 3, "")
	wantAdmit(t, a, "b", e1, 1000, wire.ReasonUnverified) // the dead incarnation's traffic
}

// TestChallengeExpires: a proof that comes after wire.NonceLifetime proves
// nothing (a late or captured proof must not switch epochs).
func TestChallengeExpires(t *testing.T) {
	const eb = wire.NewStyleEpoch | 1<<32 | 7
	a, _ := twoSigners(t, wire.NewStyleEpoch|1<<32|1, eb)
	nonce := a.Challenge("b")
	a.start = a.start.Add(-wire.NonceLifetime - time.Second)
	if r := a.Proof("b", eb, 1, nonce); r == "" {
		t.Fatal("an expired challenge was answered")
	}
}

// TestOlderBuildNumbering: epochs without the new-style bit (an agent of an
// older build) pass as the older build checks them, until the member
// proves a new-style epoch in this run.
func TestOlderBuildNumbering(t *testing.T) {
	a, _ := twoSigners(t, wire.NewStyleEpoch|1<<32|1, 3)
	wantAdmit(t, a, "b", 3, 10, "")
	wantAdmit(t, a, "b", 3, 10, wire.ReasonReplayed)
	wantAdmit(t, a, "b", 2, 50, wire.ReasonReplayed)
	wantAdmit(t, a, "b", 4, 1, "") // restarted
	const eb = wire.NewStyleEpoch | 5<<32 | 1
	if r := a.Proof("b", eb, 1, a.Challenge("b")); r != "" {
		t.Fatal(r)
	}
	wantAdmit(t, a, "b", 5, 1, wire.ReasonReplayed) // proved new numbering: no going back
	if ids := a.Unproven(); len(ids) != 0 {
		t.Fatalf("unproven after the proof: %v", ids)
	}
}
