package sign

import (
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent/wire"
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
		return wire.ReasonUnsigned
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != 64 {
		return wire.ReasonBadSignature
	}
	p, ok := s.peers[from]
	if !ok || p.Verify(signedBytes(subject, payload), raw) != nil {
		return wire.ReasonBadSignature
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
		return wire.ReasonReplayed, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	if ep&wire.NewStyleEpoch == 0 {
		// An older build's numbering: the newest epoch seen, growing
		// counters, as that build itself checks.
		if w.proved || (w.active && (ep < w.epoch || (ep == w.epoch && n <= w.n))) {
			return wire.ReasonReplayed, false
		}
		w.epoch, w.n, w.active = ep, n, true
		return "", false
	}
	if w.active && ep == w.epoch {
		if n <= w.n {
			return wire.ReasonReplayed, false
		}
		w.n = n
		return "", false
	}
	return wire.ReasonUnverified, s.dueChallenge(w)
}

// dueChallenge reports whether w's sender may be challenged now, and if so
// notes the time.
func (s *Signing) dueChallenge(w *window) bool {
	now := s.now()
	if w.challenged && now-w.lastChallenge < wire.ChallengeInterval {
		return false
	}
	w.challenged, w.lastChallenge = true, now
	return true
}

// Challenge returns a new nonce to challenge member to with, remembered
// until it is answered or void.
func (s *Signing) Challenge(to string) uint64 {
	v := wire.RandomNonce()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addNonce(s.win(to), v)
	return v
}

// ChallengeAll returns one nonce to challenge every other member with (the
// broadcast at start).
func (s *Signing) ChallengeAll() uint64 {
	v := wire.RandomNonce()
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
		if now-n.at < wire.NonceLifetime {
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
	if ep&wire.NewStyleEpoch == 0 || n == 0 {
		return wire.ReasonReplayed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	now := s.now()
	for i, c := range w.nonces {
		if c.v != echo || now-c.at >= wire.NonceLifetime {
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
	return wire.ReasonReplayed
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
// (at most one proof every wire.ProofInterval), and if so notes the time.
func (s *Signing) MayAnswer(from string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	now := s.now()
	if w.answered && now-w.lastProof < wire.ProofInterval {
		return false
	}
	w.answered, w.lastProof = true, now
	return true
}
