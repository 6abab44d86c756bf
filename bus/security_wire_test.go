package bus_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/election"
)

// signedTransports builds signing NATS transports for members a, b and c
// on server s, the way an agent does (a new epoch from a state directory).
func signedTransports(t *testing.T, cfg func(*bus.NATSTransportConfig)) (*server.Server, map[string]*bus.NATSTransport, map[string]*hookLog) {
	t.Helper()
	s := startNATSTestServer(t)
	keys, seeds := map[string]string{}, map[string][]byte{}
	for _, id := range natsTestMembers {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[id], _ = kp.PublicKey()
		seeds[id], _ = kp.Seed()
	}
	trs, logs := map[string]*bus.NATSTransport{}, map[string]*hookLog{}
	for _, id := range natsTestMembers {
		ep, err := agent.NextEpoch(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		sg, err := sign.NewSigning(id, seeds[id], keys, ep)
		if err != nil {
			t.Fatal(err)
		}
		h := newHookLog()
		c := bus.NATSTransportConfig{Group: "g", Self: id, Members: natsTestMembers, Hooks: h.hooks(), Signing: sg, Heartbeat: 100 * time.Millisecond}
		if cfg != nil {
			cfg(&c)
		}
		tr, err := bus.NewNATSTransport(connectNATSTest(t, s, bus.NATSOptions("test-"+id)...), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[id], logs[id] = tr, h
	}
	return s, trs, logs
}

// TestSignedTransportsProveEachOther: signing transports started one after
// another prove each other's epochs by challenge, without any traffic of
// the election, and then carry its messages.
func TestSignedTransportsProveEachOther(t *testing.T) {
	_, trs, logs := signedTransports(t, nil)
	hb := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1}
	deadline := time.Now().Add(natsTestWait)
	for {
		mustSend(t, trs["a"], hb)
		select {
		case m := <-trs["b"].Inbox():
			wantMsg(t, "b", m, hb)
			if bad := logs["b"].badCounts(); bad[wire.ReasonBadSignature]+bad[wire.ReasonReplayed] != 0 {
				t.Fatalf("b dropped %v", bad)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never accepted a's heartbeat: %v", logs["b"].badCounts())
		}
		hb.Seq++
	}
}

// TestOversizeIsDroppedBeforeTheSignature: a message over wire.MaxMessageSize is
// dropped (oversize) before its signature is checked, and a sender over its
// rate loses its own messages, not the others'.
func TestOversizeIsDroppedBeforeTheSignature(t *testing.T) {
	s, _, logs := signedTransports(t, func(c *bus.NATSTransportConfig) { c.SenderRate, c.SenderBurst = 1, 5 })
	// A client publishes on a's subjects directly: 1 MB with a signature
	// header, then 50 small garbage-signed messages.
	raw := connectNATSTest(t, s)
	sig := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	big := &nats.Msg{Subject: wire.BroadcastSubject(agent.DefaultSubjectPrefix, "g", "a"), Data: bytes.Repeat([]byte("x"), 1000_000),
		Header: nats.Header{wire.SignatureHeader: []string{sig}}}
	if err := raw.PublishMsg(big); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		_ = raw.PublishMsg(&nats.Msg{Subject: big.Subject, Data: []byte(`{}`), Header: big.Header})
	}
	_ = raw.Flush()
	deadline := time.Now().Add(natsTestWait)
	for {
		bad := logs["b"].badCounts()
		if bad[wire.ReasonOversize] == 1 && bad[wire.ReasonRateLimited] >= 40 && bad[wire.ReasonBadSignature] <= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b counted %v: want 1 oversize, the rest mostly rate_limited", bad)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEpochMessagesAreUnknownToOlderAgents: what an older agent does with a
// challenge or a proof is to decode it as an election message: it drops it
// as unknown_type, without any effect.
func TestEpochMessagesAreUnknownToOlderAgents(t *testing.T) {
	data := []byte(`{"v":1,"group":"g","type":"proof","from":"a","to":"b","term":0,"seq":12345,"ep":9223372041149743111,"n":4}`)
	_, err := wire.Decode(data, wire.DirectSubject(agent.DefaultSubjectPrefix, "g", "a", "b"),
		wire.DecodeContext{Prefix: agent.DefaultSubjectPrefix, Group: "g", Self: "b", Members: map[string]bool{"a": true, "b": true}})
	var be *wire.BadMessageError
	if !errors.As(err, &be) || be.Reason != wire.ReasonUnknownType {
		t.Fatalf("wire.Decode of a proof: %v, want unknown_type", err)
	}
}

// TestTermAboveTheBoundIsBadField: neither wire.Encode nor wire.Decode lets a term
// above election.MaxTerm through.
func TestTermAboveTheBoundIsBadField(t *testing.T) {
	m := election.Message{Type: election.MsgHeartbeat, From: "a", Term: election.MaxTerm + 1, Seq: 1}
	if _, err := wire.Encode("g", m); err == nil {
		t.Fatal("wire.Encode took a term above MaxTerm")
	}
	data := []byte(`{"v":1,"group":"g","type":"heartbeat","from":"a","term":18446744073709551615,"seq":1}`)
	_, err := wire.Decode(data, wire.BroadcastSubject(agent.DefaultSubjectPrefix, "g", "a"),
		wire.DecodeContext{Prefix: agent.DefaultSubjectPrefix, Group: "g", Self: "b", Members: map[string]bool{"a": true, "b": true}})
	var be *wire.BadMessageError
	if !errors.As(err, &be) || be.Reason != wire.ReasonBadField {
		t.Fatalf("wire.Decode of term 2^64-1: %v, want bad_field", err)
	}
}

// TestControlSignature: a control message verifies with its signer's key,
// and any change of subject, reply subject, numbering or payload breaks it.
func TestControlSignature(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	msg := func() *nats.Msg {
		m := &nats.Msg{Subject: "edge.election.g.ctl.resign", Reply: "_INBOX.x", Data: []byte(`{"leader":"gw3","term":7,"nonce":"n"}`)}
		if err := sign.SignControl(kp, m, wire.Numbering{Epoch: 5, N: 2}.String()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	key, num, err := sign.VerifyControl(msg())
	if err != nil || key != pub || num != (wire.Numbering{Epoch: 5, N: 2}) {
		t.Fatalf("sign.VerifyControl = %s %v %v", key, num, err)
	}
	for name, tamper := range map[string]func(*nats.Msg){
		"subject": func(m *nats.Msg) { m.Subject = "edge.election.g.ctl.transfer" },
		"reply":   func(m *nats.Msg) { m.Reply = "_INBOX.y" },
		"payload": func(m *nats.Msg) { m.Data = []byte(`{"leader":"gw3","term":8,"nonce":"n"}`) },
		"number":  func(m *nats.Msg) { m.Header.Set(wire.NumHeader, "5.3") },
		"key": func(m *nats.Msg) {
			other, _ := nkeys.CreateUser()
			p, _ := other.PublicKey()
			m.Header.Set(wire.KeyHeader, p)
		},
	} {
		m := msg()
		tamper(m)
		if _, _, err := sign.VerifyControl(m); !errors.Is(err, sign.ErrControlBadSignature) {
			t.Errorf("%s changed: %v, want a bad signature", name, err)
		}
	}
	if _, _, err := sign.VerifyControl(&nats.Msg{Subject: "s"}); !errors.Is(err, sign.ErrControlUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
}

// TestResetState: the way back for a group at the term bound sets any
// stored term (above the bound included) and clears the vote, but not while
// an agent holds the directory.
func TestResetState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"term":18446744073709551615,"voted_for":"gw1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.OpenFileStore(dir); !errors.Is(err, agent.ErrTermAtBound) {
		t.Fatalf("OpenFileStore of a term above the bound: %v", err)
	}
	old, err := agent.ResetState(dir, 0)
	if err != nil || old.Term != ^uint64(0) || old.VotedFor != "gw1" {
		t.Fatalf("ResetState = %+v, %v", old, err)
	}
	st, err := agent.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if hs := st.Load(); hs != (election.HardState{}) {
		t.Fatalf("after the reset: %+v", hs)
	}
	if _, err := agent.ResetState(dir, 5); err == nil {
		t.Fatal("ResetState while the directory is locked")
	}
}
