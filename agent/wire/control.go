package wire

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Control messages (requests on the control subjects, the agents' replies
// and the events they publish) are signed like election messages when the
// group signs (member_keys): the ed25519 signature of ControlSignedBytes in
// SignatureHeader, the signer's public key in KeyHeader, and a numbering
// "EPOCH.N" (hexadecimal epoch, decimal counter) in NumHeader. The signature
// covers the subject and the reply subject, so a captured request or answer
// cannot be sent anywhere else, and the numbering lets a reader refuse an
// event played back later (edge-agent watch).
const (
	KeyHeader = "Edge-Key"
	NumHeader = "Edge-Num"
)

// controlDomain starts the signed bytes of every control message, so that a
// control signature can never pass for an election message's.
const controlDomain = "edge-ctl/1"

// ControlSignedBytes returns what a control message's signature covers.
func ControlSignedBytes(subject, reply, key, num string, payload []byte) []byte {
	b := make([]byte, 0, len(controlDomain)+len(subject)+len(reply)+len(key)+len(num)+5+len(payload))
	for _, s := range []string{controlDomain, subject, reply, key, num} {
		b = append(b, s...)
		b = append(b, '\n')
	}
	return append(b, payload...)
}

// Numbering is a signed message's (epoch, counter).
type Numbering struct {
	Epoch, N uint64
}

// String formats n as NumHeader carries it.
func (n Numbering) String() string {
	return strconv.FormatUint(n.Epoch, 16) + "." + strconv.FormatUint(n.N, 10)
}

// ParseNumbering parses a NumHeader value.
func ParseNumbering(s string) (Numbering, error) {
	e, c, ok := strings.Cut(s, ".")
	if !ok {
		return Numbering{}, fmt.Errorf("numbering %q is not EPOCH.N", s)
	}
	ep, err1 := strconv.ParseUint(e, 16, 64)
	n, err2 := strconv.ParseUint(c, 10, 64)
	if err1 != nil || err2 != nil || ep == 0 || n == 0 {
		return Numbering{}, fmt.Errorf("numbering %q is not EPOCH.N", s)
	}
	return Numbering{Epoch: ep, N: n}, nil
}

// NewRequestNumbering returns a numbering source for a program that sends
// control requests: a random epoch and a counter.
func NewRequestNumbering() func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ep := binary.BigEndian.Uint64(b[:]) | 1
	n := uint64(0)
	return func() string {
		n++
		return Numbering{Epoch: ep, N: n}.String()
	}
}
