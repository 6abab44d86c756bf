package bus

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
)

// The fast failover path, as the bus sees it: the NATS server knows at once
// when a client's connection closes, and says so on its system account
// ($SYS.ACCOUNT.<account>.DISCONNECT, naming the connection). The bus
// reports those of the group's members to the loop, and the loop's members
// that hear their leader's connection closed elect without waiting k missed
// heartbeats. Why this cannot give two leaders is in docs/DESIGN-NOTES.md.

// DisconnectSubject is where nats-server publishes client disconnect
// advisories, for every account.
const DisconnectSubject = "$SYS.ACCOUNT.*.DISCONNECT"

// connIdentity names this agent's current bus connection: the server's id
// and the client id the server gave it.
func connIdentity(nc *nats.Conn) string {
	if nc == nil || !nc.IsConnected() {
		return ""
	}
	cid, err := nc.GetClientID()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%d", nc.ConnectedServerId(), cid)
}

// disconnectAdvisory is the part of nats-server's client disconnect advisory
// that edge-agent reads.
type disconnectAdvisory struct {
	Type   string `json:"type"`
	Server struct {
		ID string `json:"id"`
	} `json:"server"`
	Client struct {
		ID   uint64 `json:"id"`
		Name string `json:"name"`
	} `json:"client"`
	Reason string `json:"reason"`
}

// clientClosedReason is the advisory reason nats-server gives when it read
// the end of the stream from the client: the client's own host closed the
// socket, because the process exited (a crash included) or closed it
// itself. Every other reason (a reset, a read or write error, a stale or
// slow connection, a server shutdown) may leave a live client that has not
// noticed yet, so only this one is acted on: a middlebox that resets the
// server's side of a connection while the gateway keeps sending cannot
// make the others elect while the old leader still holds its lease.
const clientClosedReason = "Client Closed"

// parseAdvisory extracts the member and connection from a disconnect
// advisory of group. ok is false for anything else.
func parseAdvisory(data []byte, group string) (id, conn string, ok bool) {
	if len(data) > 64<<10 {
		return "", "", false
	}
	var adv disconnectAdvisory
	if err := json.Unmarshal(data, &adv); err != nil || adv.Type != "io.nats.server.advisory.v1.client_disconnect" ||
		adv.Reason != clientClosedReason {
		return "", "", false
	}
	id, ok = strings.CutPrefix(adv.Client.Name, agent.ConnName(group, ""))
	id = strings.TrimSuffix(id, agent.PresenceSuffix)
	if !ok || id == "" || adv.Server.ID == "" || adv.Client.ID == 0 {
		return "", "", false
	}
	return id, fmt.Sprintf("%s/%d", adv.Server.ID, adv.Client.ID), true
}

// Advisories lets the agent learn of members' disconnects from sys, a
// NATS connection in the server's system account (the caller owns it).
// Without it the agent detects failures by missed heartbeats alone.
func Advisories(sys *nats.Conn) Option {
	return func(b *Bus) error {
		if sys == nil {
			return fmt.Errorf("bus: Advisories: nil connection")
		}
		b.sys = sys
		return nil
	}
}

// Presence gives the agent a presence connection: a second connection
// to the bus in the agent's own account that subscribes to nothing and
// publishes nothing (the caller owns it; name it PresenceConnName). While
// the agent leads, its heartbeats announce this connection instead of the
// election connection, so the members act on the advisory about it.
//
// Why: a process killed with unread data in a socket's receive buffer makes
// its kernel answer with a reset instead of a FIN, and the server then
// reports "Read Error", which the members ignore (a reset can also come
// from a middlebox while the process lives). The election connection of a
// leader always has acknowledgements in flight towards it; the presence
// connection receives nothing but the PONGs to its own PINGs, read at once,
// so its close is a FIN ("Client Closed") when the process dies.
//
// A leader steps down at once when either connection drops, and IsLeader
// is false while the connection it announced is down; see
// docs/DESIGN-NOTES.md.
func Presence(nc *nats.Conn) Option {
	return func(b *Bus) error {
		if nc == nil {
			return fmt.Errorf("bus: Presence: nil connection")
		}
		b.pres.nc = nc
		return nil
	}
}

// presence is the agent's presence connection and what its heartbeats
// announced.
type presence struct {
	nc *nats.Conn
	// announced is the connection that the heartbeats of a term announced
	// (the presence connection, or the election connection when there was
	// none), and that term: while this agent leads that term, it acts only
	// while that very connection is up.
	announced atomic.Pointer[announcement]
}

type announcement struct {
	term     uint64
	conn     string
	presence bool // conn is the presence connection's, not the election connection's
}

// announceConn returns the connection identity a heartbeat of term
// carries; it runs in the loop, for each heartbeat sent. The presence
// connection is announced when it is up; otherwise the election
// connection, so that a presence connection that cannot connect costs the
// fast path its robustness, not the site its leader. A leadership (a term)
// keeps announcing the connection its first heartbeat announced: the
// members never switch to a connection that the leader no longer guards,
// or to a new election connection that replaced the announced one while
// the loop had not yet seen the drop (the members may have been told of
// the old one's close, and its heartbeats must stay the ones that report
// matched).
func (b *Bus) announceConn(term uint64) string {
	if p := b.pres.announced.Load(); p != nil && p.term == term {
		return p.conn
	}
	if id := connIdentity(b.pres.nc); id != "" {
		b.pres.announced.Store(&announcement{term: term, conn: id, presence: true})
		return id
	}
	id := connIdentity(b.nc)
	if id == "" {
		b.pres.announced.Store(nil)
		return ""
	}
	b.pres.announced.Store(&announcement{term: term, conn: id})
	return id
}

// announcedOverWebsocket reports whether the connection that term's
// heartbeats announce runs over a websocket (or is not known).
func (b *Bus) announcedOverWebsocket(term uint64) bool {
	p := b.pres.announced.Load()
	if p == nil || p.term != term {
		return true
	}
	nc := b.nc
	if p.presence {
		nc = b.pres.nc
	}
	u := nc.ConnectedUrl()
	return u == "" || strings.HasPrefix(u, "ws")
}

// Up implements agent.Bus: the election connection is up, and if a
// heartbeat of term announced a connection, that very connection is up (not
// one that replaced it: the server may have reported the announced one
// closed, and the members may be electing on that report).
func (b *Bus) Up(term uint64) bool {
	if !b.nc.IsConnected() {
		return false
	}
	p := b.pres.announced.Load()
	switch {
	case p == nil || p.term != term:
		return true
	case p.presence:
		return connIdentity(b.pres.nc) == p.conn
	default:
		return connIdentity(b.nc) == p.conn
	}
}

// watchPresence makes a drop of the presence connection reach the loop as
// one of the election connection does. It returns the undo.
func (b *Bus) watchPresence(mb *agent.Mailbox) func() {
	nc := b.pres.nc
	if nc == nil {
		return func() {}
	}
	prevDisc, prevClosed := nc.DisconnectErrHandler(), nc.ClosedHandler()
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		mb.Disconnected()
		b.c.Log.Warn("NATS presence connection lost", "err", err)
		if prevDisc != nil {
			prevDisc(c, err)
		}
	})
	nc.SetClosedHandler(func(c *nats.Conn) {
		mb.Disconnected()
		if prevClosed != nil {
			prevClosed(c)
		}
	})
	return func() {
		nc.SetDisconnectErrHandler(prevDisc)
		nc.SetClosedHandler(prevClosed)
	}
}

// subscribeAdvisories feeds disconnect advisories of the group to the loop.
func (b *Bus) subscribeAdvisories(h agent.BusHooks, mb *agent.Mailbox) (func(), error) {
	sub, err := b.sys.Subscribe(DisconnectSubject, func(m *nats.Msg) {
		id, conn, ok := parseAdvisory(m.Data, b.c.Config.Group)
		if !ok || id == b.c.Config.ID {
			return
		}
		if !mb.Offer(agent.Input{Kind: agent.InputMemberGone, Member: id, Conn: conn}) && h.OnBad != nil {
			h.OnBad("inbox_full")
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe to %s: %w", DisconnectSubject, err)
	}
	if err := b.sys.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: subscribe to %s: %w", DisconnectSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
