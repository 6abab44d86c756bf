package wire

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"
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
// proofInterval; a challenge left unanswered for nonceLifetime is void.
const (
	ChallengeInterval = 100 * time.Millisecond
	proofInterval     = 50 * time.Millisecond
	nonceLifetime     = 5 * time.Second
)

// Signing signs a member's election messages with its nkey and checks those
// of the others against their pinned public keys; it numbers outgoing
// messages and decides which inbound numbers are fresh (see above). It is
// safe for concurrent use.
type Signing struct {
	self  string
	key   nkeys.KeyPair
	pub   string
	peers map[string]nkeys.KeyPair
	epoch uint64
	count atomic.Uint64
	start time.Time

	mu   sync.Mutex
	wins map[string]*window
}

// window is what a receiver knows of one sender's numbering.
type window struct {
	epoch  uint64
	n      uint64 // newest counter accepted in epoch
	active bool   // epoch is accepted: proved (new style) or the newest older-style one
	// proved is set once the sender proved a new-style epoch in this run;
	// its older-style numbering is refused from then on.
	proved        bool
	nonces        []nonce // challenges sent to it, not yet answered
	lastChallenge time.Duration
	lastProof     time.Duration
	challenged    bool
	answered      bool
}

type nonce struct {
	v  uint64
	at time.Duration
}

// NewSigning builds the signer of member self from its nkey seed and the
// pinned public keys of every member (self included). epoch is this run's
// epoch (see NextEpoch).
func NewSigning(self string, seed []byte, keys map[string]string, epoch uint64) (*Signing, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("signing seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("signing seed: %w", err)
	}
	if keys[self] != pub {
		return nil, fmt.Errorf("signing seed: its public key %s is not the key pinned for %s (%q)", pub, self, keys[self])
	}
	s := &Signing{self: self, key: kp, pub: pub, peers: map[string]nkeys.KeyPair{}, epoch: epoch,
		start: time.Now(), wins: map[string]*window{}}
	for id, k := range keys {
		p, err := nkeys.FromPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("member_keys: %s: %w", id, err)
		}
		s.peers[id] = p
	}
	return s, nil
}

// Epoch returns this run's epoch.
func (s *Signing) Epoch() uint64 { return s.epoch }

// Key returns this member's key pair, which also signs its control
// messages (SignControl).
func (s *Signing) Key() nkeys.KeyPair { return s.key }

// PublicKey returns this member's public key.
func (s *Signing) PublicKey() string { return s.pub }

// Next returns the (epoch, counter) of the next outgoing message.
func (s *Signing) Next() (uint64, uint64) { return s.epoch, s.count.Add(1) }

func (s *Signing) now() time.Duration { return time.Since(s.start) }

func signedBytes(subject string, payload []byte) []byte {
	b := make([]byte, 0, len(subject)+1+len(payload))
	b = append(b, subject...)
	b = append(b, '\n')
	return append(b, payload...)
}

// Sign returns the header value signing payload on subject.
func (s *Signing) Sign(subject string, payload []byte) (string, error) {
	return s.signBytes(signedBytes(subject, payload))
}

func (s *Signing) signBytes(b []byte) (string, error) {
	sig, err := s.key.Sign(b)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// Verify checks that sig is member from's signature of payload on subject.
// It returns the drop reason, or "" to accept.
func (s *Signing) Verify(from, subject string, payload []byte, sig string) string {
	if sig == "" {
		return ReasonUnsigned
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != 64 {
		return ReasonBadSignature
	}
	p, ok := s.peers[from]
	if !ok || p.Verify(signedBytes(subject, payload), raw) != nil {
		return ReasonBadSignature
	}
	return ""
}

func (s *Signing) win(from string) *window {
	w := s.wins[from]
	if w == nil {
		w = &window{}
		s.wins[from] = w
	}
	return w
}

// Admit decides whether a verified message of member from numbered (ep, n)
// is fresh. It returns the drop reason ("" to accept) and whether from must
// be challenged now to prove its epoch.
func (s *Signing) Admit(from string, ep, n uint64) (reason string, challenge bool) {
	if ep == 0 || n == 0 {
		return ReasonReplayed, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	if ep&NewStyleEpoch == 0 {
		// An older build's numbering: the newest epoch seen, growing
		// counters, as that build itself checks.
		if w.proved || (w.active && (ep < w.epoch || (ep == w.epoch && n <= w.n))) {
			return ReasonReplayed, false
		}
		w.epoch, w.n, w.active = ep, n, true
		return "", false
	}
	if w.active && ep == w.epoch {
		if n <= w.n {
			return ReasonReplayed, false
		}
		w.n = n
		return "", false
	}
	return ReasonUnverified, s.dueChallenge(w)
}

// dueChallenge reports whether w's sender may be challenged now, and if so
// notes the time.
func (s *Signing) dueChallenge(w *window) bool {
	now := s.now()
	if w.challenged && now-w.lastChallenge < ChallengeInterval {
		return false
	}
	w.challenged, w.lastChallenge = true, now
	return true
}

// Challenge returns a new nonce to challenge member to with, remembered
// until it is answered or void.
func (s *Signing) Challenge(to string) uint64 {
	v := randomNonce()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addNonce(s.win(to), v)
	return v
}

// ChallengeAll returns one nonce to challenge every other member with (the
// broadcast at start).
func (s *Signing) ChallengeAll() uint64 {
	v := randomNonce()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.peers {
		if id != s.self {
			w := s.win(id)
			s.addNonce(w, v)
			w.challenged, w.lastChallenge = true, s.now()
		}
	}
	return v
}

func (s *Signing) addNonce(w *window, v uint64) {
	now := s.now()
	keep := w.nonces[:0]
	for _, n := range w.nonces {
		if now-n.at < nonceLifetime {
			keep = append(keep, n)
		}
	}
	if len(keep) >= 4 {
		keep = keep[1:]
	}
	w.nonces = append(keep, nonce{v: v, at: now})
}

// Proof handles a verified proof from member from, numbered (ep, n) and
// echoing echo. A proof that answers a live challenge of ours makes ep the
// accepted epoch of from; anything else is dropped with the reason returned.
func (s *Signing) Proof(from string, ep, n, echo uint64) string {
	if ep&NewStyleEpoch == 0 || n == 0 {
		return ReasonReplayed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	now := s.now()
	for i, c := range w.nonces {
		if c.v != echo || now-c.at >= nonceLifetime {
			continue
		}
		w.nonces = append(w.nonces[:i], w.nonces[i+1:]...)
		if w.active && ep == w.epoch {
			w.n = max(w.n, n)
		} else {
			w.epoch, w.n = ep, n
		}
		w.active, w.proved = true, true
		return ""
	}
	return ReasonReplayed
}

// Unproven returns the members (self excluded) whose current epoch has not
// been proved in this run and that are not known to number the older way,
// and that may be challenged now (see dueChallenge).
func (s *Signing) Unproven() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.peers {
		if id == s.self {
			continue
		}
		w := s.win(id)
		if w.active {
			continue
		}
		if s.dueChallenge(w) {
			out = append(out, id)
		}
	}
	return out
}

// MayAnswer reports whether a challenge of member from may be answered now
// (at most one proof every proofInterval), and if so notes the time.
func (s *Signing) MayAnswer(from string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	now := s.now()
	if w.answered && now-w.lastProof < proofInterval {
		return false
	}
	w.answered, w.lastProof = true, now
	return true
}

func randomNonce() uint64 {
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
	return NewStyleEpoch | count<<32 | randomNonce()&0xffffffff
}
