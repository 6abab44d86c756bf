package attack

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// Forger speaks for a member whose key was stolen: it signs election
// messages with that key, numbers them in an epoch of its own and answers
// the other members' challenges, so that every check a genuine message
// passes, its messages pass too. Only what the protocol itself refuses
// (stale or out-of-bound terms, votes it is not owed) stops them.
type Forger struct {
	nc  *nats.Conn
	id  string
	kp  nkeys.KeyPair
	ep  uint64
	sub *nats.Subscription

	mu sync.Mutex
	n  uint64
}

// Forger connects as member id (with its stolen key) to gateway at's server.
func (s *Site) Forger(id, at string) (*Forger, error) {
	nc, err := s.MemberClient(id, at)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	f := &Forger{nc: nc, id: id, kp: s.Pairs[id], ep: 1<<63 | binary.BigEndian.Uint64(b[:])>>1}
	// Answer every challenge addressed to the stolen identity.
	f.sub, err = nc.Subscribe(wire.DirectWildcard(Prefix, Group, id), func(m *nats.Msg) {
		var w struct {
			Type, From string
			Seq        uint64
		}
		if json.Unmarshal(m.Data, &w) != nil || w.Type != "challenge" || w.From == "" {
			return
		}
		_ = f.Send(w.From, map[string]any{"type": "proof", "term": 0, "seq": w.Seq})
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return f, nc.Flush()
}

// Close disconnects the forger.
func (f *Forger) Close() { f.nc.Close() }

// Send publishes a message of the stolen identity to member to (or to the
// whole group with to ""): fields are the wire message's (type, term, seq
// ...), to which the forger adds v, group, from, to and its numbering.
func (f *Forger) Send(to string, fields map[string]any) error {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	w := map[string]any{"v": 1, "group": Group, "from": f.id, "ep": f.ep, "n": n}
	for k, v := range fields {
		w[k] = v
	}
	subj := wire.BroadcastSubject(Prefix, Group, f.id)
	if to != "" {
		w["to"] = to
		subj = wire.DirectSubject(Prefix, Group, f.id, to)
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return f.publish(subj, data)
}

// SendRaw publishes data, signed, on the stolen identity's subject to
// member to (or broadcast).
func (f *Forger) SendRaw(to string, data []byte) error {
	subj := wire.BroadcastSubject(Prefix, Group, f.id)
	if to != "" {
		subj = wire.DirectSubject(Prefix, Group, f.id, to)
	}
	return f.publish(subj, data)
}

func (f *Forger) publish(subj string, data []byte) error {
	sig, err := f.kp.Sign(append([]byte(subj+"\n"), data...))
	if err != nil {
		return err
	}
	return f.nc.PublishMsg(&nats.Msg{Subject: subj, Data: data,
		Header: nats.Header{wire.SignatureHeader: []string{base64.RawURLEncoding.EncodeToString(sig)}}})
}

// Flush waits until the server has everything sent so far.
func (f *Forger) Flush() error { return f.nc.Flush() }
