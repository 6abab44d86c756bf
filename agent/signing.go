package agent

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
)

// Signing signs a member's election messages with its nkey and checks those
// of the others against their pinned public keys. It also numbers outgoing
// messages (epoch, counter): the epoch grows at every start of the agent
// (persisted), the counter within it, so that a receiver can refuse a
// captured message played back later.
type Signing struct {
	self  string
	key   nkeys.KeyPair
	peers map[string]nkeys.KeyPair
	epoch uint64
	count atomic.Uint64

	mu   sync.Mutex
	last map[string][2]uint64 // sender -> newest (epoch, counter) accepted
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
// pinned public keys of every member (self included). epoch must grow at
// every start of the agent (see NextEpoch).
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
	s := &Signing{self: self, key: kp, peers: map[string]nkeys.KeyPair{}, epoch: epoch, last: map[string][2]uint64{}}
	for id, k := range keys {
		p, err := nkeys.FromPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("member_keys: %s: %w", id, err)
		}
		s.peers[id] = p
	}
	return s, nil
}

// next returns the (epoch, counter) of the next outgoing message.
func (s *Signing) next() (uint64, uint64) { return s.epoch, s.count.Add(1) }

func signedBytes(subject string, payload []byte) []byte {
	b := make([]byte, 0, len(subject)+1+len(payload))
	b = append(b, subject...)
	b = append(b, '\n')
	return append(b, payload...)
}

// sign returns the header value signing payload on subject.
func (s *Signing) sign(subject string, payload []byte) (string, error) {
	sig, err := s.key.Sign(signedBytes(subject, payload))
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

// fresh refuses a replay: a verified message from member from numbered
// (ep, n) must come after the newest one accepted from it. Only verified
// messages reach it, so a forgery cannot advance a sender's counter.
func (s *Signing) fresh(from string, ep, n uint64) string {
	if ep == 0 || n == 0 {
		return ReasonReplayed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[from]
	if ep < last[0] || (ep == last[0] && n <= last[1]) {
		return ReasonReplayed
	}
	s.last[from] = [2]uint64{ep, n}
	return ""
}

// NextEpoch increments and returns the epoch counter kept in dir/epoch,
// durably (temp file, fsync, rename, fsync dir) before it is used.
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
	next := cur + 1
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
	return next, nil
}

// signing builds the agent's signer when the config asks for one, with a new
// epoch for this run.
func (a *Agent) signing() (*Signing, error) {
	if a.cfg.SigningSeedFile == "" {
		return nil, nil
	}
	seed, err := os.ReadFile(a.cfg.SigningSeedFile)
	if err != nil {
		return nil, fmt.Errorf("agent: signing_seed: %w", err)
	}
	epoch, err := NextEpoch(a.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s, err := NewSigning(a.cfg.ID, bytes.TrimSpace(seed), a.cfg.MemberKeys, epoch)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.log.Info("signing election messages", "epoch", epoch, "members", len(a.cfg.MemberKeys))
	return s, nil
}
