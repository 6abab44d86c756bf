package sign

import (
	"encoding/base64"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// Errors of VerifyControl.
var (
	ErrControlUnsigned     = errors.New("not signed")
	ErrControlBadSignature = errors.New("bad signature")
)

// SignControl sets msg's control signature headers for signer kp and
// numbering num ("" for none).
func SignControl(kp nkeys.KeyPair, msg *nats.Msg, num string) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return err
	}
	sig, err := kp.Sign(wire.ControlSignedBytes(msg.Subject, msg.Reply, pub, num, msg.Data))
	if err != nil {
		return err
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(wire.SignatureHeader, base64.RawURLEncoding.EncodeToString(sig))
	msg.Header.Set(wire.KeyHeader, pub)
	if num != "" {
		msg.Header.Set(wire.NumHeader, num)
	}
	return nil
}

// VerifyControl checks msg's control signature and returns the signer's
// public key and the message's numbering. It does not say whether the key
// is one the reader trusts: that is the caller's check.
func VerifyControl(msg *nats.Msg) (key string, num wire.Numbering, err error) {
	if msg.Header == nil || msg.Header.Get(wire.SignatureHeader) == "" {
		return "", num, ErrControlUnsigned
	}
	key = msg.Header.Get(wire.KeyHeader)
	raw, derr := base64.RawURLEncoding.DecodeString(msg.Header.Get(wire.SignatureHeader))
	if derr != nil || len(raw) != 64 || !nkeys.IsValidPublicUserKey(key) {
		return "", num, ErrControlBadSignature
	}
	kp, kerr := nkeys.FromPublicKey(key)
	if kerr != nil {
		return "", num, ErrControlBadSignature
	}
	n := msg.Header.Get(wire.NumHeader)
	if kp.Verify(wire.ControlSignedBytes(msg.Subject, msg.Reply, key, n, msg.Data), raw) != nil {
		return "", num, ErrControlBadSignature
	}
	if n != "" {
		if num, err = wire.ParseNumbering(n); err != nil {
			return "", num, ErrControlBadSignature
		}
	}
	return key, num, nil
}
