package wire

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// SignatureHeader is the NATS header that carries a message's ed25519
// signature (base64url, no padding) over its subject, a newline and its
// payload.
const SignatureHeader = "Edge-Sig"

// Reasons for dropping inbound messages when signing is on.
const (
	ReasonUnsigned     = "unsigned"
	ReasonBadSignature = "bad_signature"
	ReasonReplayed     = "replayed"
	// ReasonUnverified: a message numbered in an epoch of its sender that
	// has not answered this agent's challenge (see Signing).
	ReasonUnverified = "unverified"
)

// Freshness. A signed message is numbered (epoch, counter): the sender draws
// a new epoch at every start and counts its messages within it. A receiver
// accepts from each sender only one epoch at a time, and in it only counters
// above the newest it accepted, so a captured message played back is refused.
//
// That alone does not survive restarts: a receiver that restarts has
// forgotten which epochs it saw, and a sender whose state directory was lost
// starts over from epoch 1. So an epoch is accepted only once its sender has
// proved it live: the receiver sends the sender a challenge carrying a random
// nonce, and the sender answers with a proof, signed and numbered in its
// current epoch, that echoes the nonce. A message of an epoch that has not
// been proved in this run is dropped (ReasonUnverified) and the sender is
// challenged (at most every ChallengeInterval). Every agent challenges the
// whole group when it starts, and every member answers and challenges back,
// so both sides of a restart are proved within a round trip, long before a
// restarted member may vote (it waits D first). A dead member cannot answer:
// its captured messages are refused whenever they are played back, by
// receivers that restarted since as much as by those that did not, and a
// member that was flashed anew (epoch back to 1) is proved like any other
// restart.
//
// Epochs of this numbering have their top bit set (NewStyleEpoch), then the
// start counter kept in the state directory (31 bits, so that older agents,
// which accept only growing epochs, keep accepting them), then 32 random
// bits. An agent of an older build numbers with the start counter alone and
// answers no challenge: its epochs are accepted as the older build did (the
// newest epoch seen in this run, growing counters), until it has proved a
// new-style epoch in this run, after which its older numbering is refused.

// NewStyleEpoch marks an epoch whose sender answers challenges.
const NewStyleEpoch = 1 << 63

// MaxEpochCount is the largest start counter an epoch carries (see
// NewEpoch).
const MaxEpochCount = 1<<31 - 1

// Challenge timing: a member is challenged at most every
// ChallengeInterval and answers a member's challenges at most every
// ProofInterval; a challenge left unanswered for NonceLifetime is void.
const (
	ChallengeInterval = 100 * time.Millisecond
	ProofInterval     = 50 * time.Millisecond
	NonceLifetime     = 5 * time.Second
)

// RandomNonce returns a random, non-zero 64-bit value (nonces, epochs).
func RandomNonce() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("wire: crypto/rand: " + err.Error()) // the Go runtime never returns an error here
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// NewEpoch returns the epoch of a run whose start counter (kept durably by
// the caller, growing at every start) is count: NewStyleEpoch | count<<32 |
// 32 random bits. count must be between 1 and MaxEpochCount.
func NewEpoch(count uint64) uint64 {
	return NewStyleEpoch | count<<32 | RandomNonce()&0xffffffff
}
