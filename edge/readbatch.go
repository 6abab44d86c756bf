package edge

import (
	"net"
	"time"

	"github.com/nats-io/nats.go"
)

// A witness serving many groups receives a message every millisecond or
// so (at 1,000 groups and H = 1 s: each leader's heartbeat and both
// gateways' protocol announcements), each on its own. Read at once, every
// one wakes the NATS client's reader, the group's goroutines and the
// client's flusher, and on a small machine those wake-ups cost more than
// the messages' handling: bench/witnessfloor measures the traffic alone,
// with no election work, at 17-21% of a core read at once and 8% read in
// batches of 5 ms. Read in batches, one wake-up serves every message that
// arrived meanwhile, and the replies leave in one write.
//
// The price is latency: a message waits up to the batch in the socket, so
// a vote or an acknowledgement leaves up to that much later. Arrival times
// only ever move later, which makes a member back a leader (or refuse to
// vote) a little longer, never shorter, so it is a network delay like any
// other for the election's safety. docs/DESIGN-NOTES.md ("One witness
// process for many groups", reads in batches) has the figures.

// pacedDialer dials connections that read at most once every d
// (pacedConn). d must be positive.
type pacedDialer struct {
	d       time.Duration
	timeout time.Duration
}

func (p pacedDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: p.timeout}).Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return &pacedConn{Conn: c, d: p.d}, nil
}

// ReadBatch returns the NATS options that read the connection in batches
// of d (none for d <= 0): what `edge-agent witness --read-batch` connects
// with. TLS, when the server requires it, runs over the paced connection as
// over any other. It sets the client's dialer (nats.SetCustomDialer),
// which dials with the client's default timeout.
func ReadBatch(d time.Duration) []nats.Option {
	if d <= 0 {
		return nil
	}
	return []nats.Option{nats.SetCustomDialer(pacedDialer{d: d, timeout: nats.GetDefaultOptions().Timeout})}
}

// pacedConn is a connection whose reads start at least d apart: what
// arrives meanwhile waits in the kernel's socket buffer and is read in one
// go. A read that filled the caller's buffer is followed by the next at
// once, so a backlog is drained without waiting. Reads are made by one
// goroutine (the NATS client's reader); writes are not paced.
type pacedConn struct {
	net.Conn
	d    time.Duration
	last time.Time // when the last read returned; zero: none yet
	full bool      // it filled the caller's buffer
}

func (c *pacedConn) Read(b []byte) (int, error) {
	if !c.last.IsZero() && !c.full {
		if w := c.d - time.Since(c.last); w > 0 {
			time.Sleep(w)
		}
	}
	n, err := c.Conn.Read(b)
	c.last, c.full = time.Now(), n == len(b)
	return n, err
}
