package agent

import "github.com/edge-agent/edge-agent/election"

// stampingTransport is the bus side of sending: it fills in the wire-only
// fields of the core's messages, which the core knows nothing of, so that
// the loop hands the core's Ready to the bus as it is. Algorithm names the
// sender's algorithm on every message (the receivers refuse a member of
// another algorithm, algorithmGuard); Conn, on a heartbeat, names the
// connection the leader's members match disconnect reports with
// (announceConn), when the fast path is on.
type stampingTransport struct {
	Transport
	algorithm string
	announce  func(term uint64) string // nil: announce no connection
}

// Send stamps m and sends it.
func (t stampingTransport) Send(m election.Message) error {
	if m.Type == election.MsgHeartbeat && t.announce != nil {
		m.Conn = t.announce(m.Term)
	}
	m.Algorithm = t.algorithm
	return t.Transport.Send(m)
}

// stamped returns the agent's transport behind the stamping of wire-only
// fields.
func (a *Agent) stamped(t Transport) Transport {
	s := stampingTransport{Transport: t, algorithm: a.cfg.Algorithm}
	if !a.fast.noFast {
		s.announce = a.announceConn
	}
	return s
}
