package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// challenged (at most every challengeInterval). Every agent challenges the
// whole group when it starts, and every member answers and challenges back,
// so both sides of a restart are proved within a round trip, long before a
// restarted member may vote (it waits D first). A dead member cannot answer:
// its captured messages are refused whenever they are played back, by
// receivers that restarted since as much as by those that did not, and a
// member that was flashed anew (epoch back to 1) is proved like any other
// restart.
//
// Epochs of this numbering have their top bit set (newStyleEpoch), then the
// start counter kept in the state directory (31 bits, so that older agents,
// which accept only growing epochs, keep accepting them), then 32 random
// bits. An agent of an older build numbers with the start counter alone and
// answers no challenge: its epochs are accepted as the older build did (the
// newest epoch seen in this run, growing counters), until it has proved a
// new-style epoch in this run, after which its older numbering is refused.

// newStyleEpoch marks an epoch whose sender answers challenges.
const newStyleEpoch = 1 << 63

// maxEpochCount is the largest start counter an epoch carries.
const maxEpochCount = 1<<31 - 1

// Challenge timing: a member is challenged at most every
// challengeInterval and answers a member's challenges at most every
// proofInterval; a challenge left unanswered for nonceLifetime is void.
const (
	challengeInterval = 100 * time.Millisecond
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

// ParseMemberKeys parses "id=PUBKEY,id=PUBKEY" (nkey user public keys).
func ParseMemberKeys(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, key, ok := strings.Cut(part, "=")
		if !ok || id == "" || key == "" {
			return nil, fmt.Errorf("%q is not ID=PUBLIC_KEY", part)
		}
		out[id] = key
	}
	return out, nil
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

// PublicKey returns this member's public key.
func (s *Signing) PublicKey() string { return s.pub }

// next returns the (epoch, counter) of the next outgoing message.
func (s *Signing) next() (uint64, uint64) { return s.epoch, s.count.Add(1) }

func (s *Signing) now() time.Duration { return time.Since(s.start) }

func signedBytes(subject string, payload []byte) []byte {
	b := make([]byte, 0, len(subject)+1+len(payload))
	b = append(b, subject...)
	b = append(b, '\n')
	return append(b, payload...)
}

// sign returns the header value signing payload on subject.
func (s *Signing) sign(subject string, payload []byte) (string, error) {
	return s.signBytes(signedBytes(subject, payload))
}

func (s *Signing) signBytes(b []byte) (string, error) {
	sig, err := s.key.Sign(b)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// verify checks that sig is member from's signature of payload on subject.
// It returns the drop reason, or "" to accept.
func (s *Signing) verify(from, subject string, payload []byte, sig string) string {
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

// admit decides whether a verified message of member from numbered (ep, n)
// is fresh. It returns the drop reason ("" to accept) and whether from must
// be challenged now to prove its epoch.
func (s *Signing) admit(from string, ep, n uint64) (reason string, challenge bool) {
	if ep == 0 || n == 0 {
		return ReasonReplayed, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win(from)
	if ep&newStyleEpoch == 0 {
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
	if w.challenged && now-w.lastChallenge < challengeInterval {
		return false
	}
	w.challenged, w.lastChallenge = true, now
	return true
}

// challenge returns a new nonce to challenge member to with, remembered
// until it is answered or void.
func (s *Signing) challenge(to string) uint64 {
	v := randomNonce()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addNonce(s.win(to), v)
	return v
}

// challengeAll returns one nonce to challenge every other member with (the
// broadcast at start).
func (s *Signing) challengeAll() uint64 {
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

// proof handles a verified proof from member from, numbered (ep, n) and
// echoing echo. A proof that answers a live challenge of ours makes ep the
// accepted epoch of from; anything else is dropped with the reason returned.
func (s *Signing) proof(from string, ep, n, echo uint64) string {
	if ep&newStyleEpoch == 0 || n == 0 {
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

// unproven returns the members (self excluded) whose current epoch has not
// been proved in this run and that are not known to number the older way,
// and that may be challenged now (see dueChallenge).
func (s *Signing) unproven() []string {
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

// mayAnswer reports whether a challenge of member from may be answered now
// (at most one proof every proofInterval), and if so notes the time.
func (s *Signing) mayAnswer(from string) bool {
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
			panic("agent: crypto/rand: " + err.Error()) // the Go runtime never returns an error here
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// NextEpoch draws this run's epoch for the member whose state directory is
// dir: the start counter kept in dir/epoch is incremented durably (temp file,
// fsync, rename, fsync dir) before it is used, and the epoch is
// newStyleEpoch | counter<<32 | 32 random bits. The counter saturates at
// 2^31-1 instead of wrapping.
func NextEpoch(dir string) (uint64, error) {
	path := filepath.Join(dir, "epoch")
	var cur uint64
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		cur, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("agent: %s is damaged: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return 0, fmt.Errorf("agent: read %s: %w", path, err)
	}
	next := min(cur, maxEpochCount-1) + 1
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("agent: write %s: %w", tmp, err)
	}
	if _, err = f.WriteString(strconv.FormatUint(next, 10) + "\n"); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("agent: persist epoch: %w", err)
	}
	return newStyleEpoch | next<<32 | randomNonce()&0xffffffff, nil
}

// signing builds the agent's signer when the config asks for one, with a new
// epoch for this run.
func (a *Agent) signing() (*Signing, error) {
	if a.cfg.SigningSeedFile == "" {
		return nil, nil
	}
	if a.signer != nil {
		return a.signer, nil
	}
	seed, err := readSecretFile("signing_seed", a.cfg.SigningSeedFile)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	epoch, err := NextEpoch(a.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s, err := NewSigning(a.cfg.ID, bytes.TrimSpace(seed), a.cfg.MemberKeys, epoch)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.log.Info("signing election messages", "epoch", fmt.Sprintf("%016x", epoch), "members", len(a.cfg.MemberKeys))
	a.signer = s
	return s, nil
}

// CheckSecretFile reports a file holding a secret (a seed, a private key, a
// creds file) that others may read or write: such a file is refused, naming
// key, the setting that names it.
func CheckSecretFile(key, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if m := fi.Mode().Perm(); m&0o006 != 0 {
		return fmt.Errorf("%s: %s is readable or writable by others (mode %04o): it holds a secret; chmod o-rwx %s", key, path, m, path)
	}
	return nil
}

// readSecretFile reads a secret file after CheckSecretFile.
func readSecretFile(key, path string) ([]byte, error) {
	if err := CheckSecretFile(key, path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}
