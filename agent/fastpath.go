package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/election"
)

// The fast failover path: the NATS server knows at once when a client's
// connection closes, and says so on its system account
// ($SYS.ACCOUNT.<account>.DISCONNECT, naming the connection). Members that
// hear that their leader's connection closed elect without waiting k missed
// heartbeats. Why this cannot give two leaders is in docs/DESIGN-NOTES.md:
// in short, a leader whose own connection closes stops leading at once, the
// report must name the connection the leader announced in its heartbeats,
// and a leader elected on such a report waits a short fence before it acts.

// DisconnectSubject is where nats-server publishes client disconnect
// advisories, for every account.
const DisconnectSubject = "$SYS.ACCOUNT.*.DISCONNECT"

// ConnName is the NATS connection name of member id of group; advisories are
// matched on it.
func ConnName(group, id string) string { return "edge-agent/" + group + "/" + id }

// PresenceConnName is the NATS connection name of member id's presence
// connection (see WithPresence).
func PresenceConnName(group, id string) string { return ConnName(group, id) + presenceSuffix }

const presenceSuffix = "/presence"

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

// goneReport is a member's connection reported closed.
type goneReport struct {
	id, conn string
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
func parseAdvisory(data []byte, group string) (goneReport, bool) {
	if len(data) > 64<<10 {
		return goneReport{}, false
	}
	var adv disconnectAdvisory
	if err := json.Unmarshal(data, &adv); err != nil || adv.Type != "io.nats.server.advisory.v1.client_disconnect" ||
		adv.Reason != clientClosedReason {
		return goneReport{}, false
	}
	id, ok := strings.CutPrefix(adv.Client.Name, ConnName(group, ""))
	id = strings.TrimSuffix(id, presenceSuffix)
	if !ok || id == "" || adv.Server.ID == "" || adv.Client.ID == 0 {
		return goneReport{}, false
	}
	return goneReport{id: id, conn: fmt.Sprintf("%s/%d", adv.Server.ID, adv.Client.ID)}, true
}

// WithAdvisories lets the agent learn of members' disconnects from sys, a
// NATS connection in the server's system account (the caller owns it).
// Without it the agent detects failures by missed heartbeats alone.
func WithAdvisories(sys *nats.Conn) Option {
	return func(a *Agent) error {
		if sys == nil {
			return fmt.Errorf("agent: WithAdvisories: nil connection")
		}
		a.bus.sys = sys
		return nil
	}
}

// WithPresence gives the agent a presence connection: a second connection
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
func WithPresence(nc *nats.Conn) Option {
	return func(a *Agent) error {
		if nc == nil {
			return fmt.Errorf("agent: WithPresence: nil connection")
		}
		a.bus.pres.nc = nc
		return nil
	}
}

// presence is the agent's presence connection and what its heartbeats
// announced of it.
type presence struct {
	nc *nats.Conn
	// announced is the presence connection that a heartbeat announced, and
	// the term of that heartbeat: while this agent leads that term, it acts
	// only while that very connection is up.
	announced atomic.Pointer[announcement]
}

type announcement struct {
	term uint64
	conn string
}

// announceConn returns the connection identity a heartbeat of term
// carries; it runs in the loop, for each heartbeat sent. The presence
// connection is announced when it is up; otherwise the election
// connection, so that a presence connection that cannot connect costs the
// fast path its robustness, not the site its leader. Once a leadership (a
// term) announced its presence connection it keeps announcing that one
// (the leader steps down when it drops), so the members never switch back
// to a connection that the leader no longer guards.
func (a *Agent) announceConn(term uint64) string {
	if p := a.bus.pres.announced.Load(); p != nil && p.term == term {
		return p.conn
	}
	if id := connIdentity(a.bus.pres.nc); id != "" {
		a.bus.pres.announced.Store(&announcement{term: term, conn: id})
		return id
	}
	a.bus.pres.announced.Store(nil)
	return connIdentity(a.bus.nc)
}

// busUp reports whether the connections the members may act on are up: the
// election connection, and the presence connection if a heartbeat of the
// current term announced it (the very connection it announced, not one
// that replaced it).
func (a *Agent) busUp() bool {
	if a.bus.nc != nil && !a.bus.nc.IsConnected() {
		return false
	}
	if p := a.bus.pres.announced.Load(); p != nil && p.term == a.lease.term.Load() {
		return connIdentity(a.bus.pres.nc) == p.conn
	}
	return true
}

// startFastPath starts what feeds the loop fast-path reports besides the
// advisories: the presence connection's drops and the route poller. It
// returns the undo, which waits for them to stop.
func (a *Agent) startFastPath() func() {
	undo := a.watchPresence()
	stop := a.pollRoutes()
	return func() { stop(); undo() }
}

// routePoll is how often the route poller looks at the number of routes:
// H/20, 5 ms at the benchmark's H = 100 ms, 50 ms at the default H = 1 s.
// The loop used to compare the routed servers every tick (H/10), which put
// up to a tick of delay, at every member that must notice, on the path of a
// crash failover. Counting routes is a lock and a map walk; the wakeup costs
// more than the count (at a fixed 2 ms the poller alone took about 1% of a
// core, at 5 ms about 1.2% of an idle agent at H = 1 s, where it had used
// 0.36% in all), so the period follows H: half a tick, against the D it
// shortens. It wakes the loop only when the count falls. The loop itself
// no longer wakes every tick for the routes: it sleeps until its next due
// tick like any other agent, and compares the routed servers on each wake
// (at least every H) as the net under the poller.
func routePoll(h time.Duration) time.Duration { return max(2*time.Millisecond, h/20) }

// routeCounter is what the route poller needs beyond RouteWatcher; the
// embedded server has it.
type routeCounter interface{ NumRoutes() int }

// pollRoutes wakes the loop (through the gone channel) as soon as the
// embedded server has fewer routes than before. It returns the stop.
func (a *Agent) pollRoutes() func() {
	rc, ok := a.fast.routes.(routeCounter)
	if !ok || a.fast.noFast {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(routePoll(a.cfg.Heartbeat))
		defer t.Stop()
		last := rc.NumRoutes()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n := rc.NumRoutes()
			if n < last {
				select {
				case a.in.gone <- goneReport{}:
				default: // the loop is busy; its next tick looks anyway
				}
			}
			last = n
		}
	}()
	return func() { close(done); <-stopped }
}

// watchPresence makes a drop of the presence connection reach the loop as
// one of the election connection does. It returns the undo.
func (a *Agent) watchPresence() func() {
	nc := a.bus.pres.nc
	if nc == nil || a.fast.noFast {
		return func() {}
	}
	prevDisc, prevClosed := nc.DisconnectErrHandler(), nc.ClosedHandler()
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		a.wakeOnDisconnect()
		a.log.Warn("NATS presence connection lost", "err", err)
		if prevDisc != nil {
			prevDisc(c, err)
		}
	})
	nc.SetClosedHandler(func(c *nats.Conn) {
		a.wakeOnDisconnect()
		if prevClosed != nil {
			prevClosed(c)
		}
	})
	return func() {
		nc.SetDisconnectErrHandler(prevDisc)
		nc.SetClosedHandler(prevClosed)
	}
}

// WithoutFastFailover turns the fast path off: advisories are ignored and a
// leader that loses its connection keeps its lease until it runs out.
func WithoutFastFailover() Option {
	return func(a *Agent) error { a.fast.noFast = true; return nil }
}

// subscribeAdvisories feeds disconnect advisories of the group to the loop.
func (a *Agent) subscribeAdvisories() (func(), error) {
	sub, err := a.bus.sys.Subscribe(DisconnectSubject, func(m *nats.Msg) {
		r, ok := parseAdvisory(m.Data, a.cfg.Group)
		if !ok || r.id == a.cfg.ID {
			return
		}
		select {
		case a.in.gone <- r:
		default:
			a.m.badMessage("inbox_full")
		}
	})
	if err != nil {
		return nil, fmt.Errorf("agent: subscribe to %s: %w", DisconnectSubject, err)
	}
	if err := a.bus.sys.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("agent: subscribe to %s: %w", DisconnectSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// onGone applies a report from the loop. A report without a member is the
// route poller's: routes closed, look at them now.
func (a *Agent) onGone(r goneReport) {
	if a.fast.noFast {
		return
	}
	if r.id == "" {
		a.checkRoutes()
		return
	}
	if a.node.LeaderGone(r.id, r.conn) {
		a.fast.fastAt = a.mono()
		a.m.fastSuspicions.Inc()
		a.log.Info("leader's connection closed: electing now", "leader", r.id)
	}
}

// onOwnDisconnect runs in the loop when this agent's connection dropped. A
// leader steps down at once, and a candidate stops standing: the server may
// already have told the others, whose backing of what this member sent on
// that connection (heartbeats, a COORDINATOR) the report releases, so no
// acknowledgement or vote still on its way may count.
func (a *Agent) onOwnDisconnect() {
	if a.fast.noFast || a.core.role == election.Follower {
		return
	}
	if a.core.role == election.Leader {
		a.stopLeading("lost connection to NATS")
	}
	a.node.StepDown(election.ReasonConnectionLost)
}

// fence returns until when a leader elected on a disconnect report must wait
// before it acts, on the monotonic clock (0: no fence).
func (a *Agent) fenceUntil() time.Duration {
	if a.fast.fastAt == 0 || a.mono()-a.fast.fastAt > a.cfg.SuspectAfter() {
		return 0
	}
	return a.fast.fastAt + a.cfg.Fence
}

// RouteWatcher is the agent's view of its own embedded, clustered NATS
// server: its id and the servers it has a route to. At an offline site every
// gateway's agent runs its own server, so a route closing is a gateway (or
// its process) going away, or the link between two gateways failing.
type RouteWatcher interface {
	ServerID() string
	RoutedServers() map[string]bool
}

// RouteNamer is implemented by a RouteWatcher that knows the names of the
// servers it routes to (server id -> name). An agent whose server is named
// ServerName(group, id), as every agent's of the site, is then found by its
// server's name.
type RouteNamer interface {
	RoutedServerNames() map[string]string
}

// ServerName is the name of member id's embedded server in group: the
// agents of a site map their routes to members by it.
func ServerName(group, id string) string { return group + "-" + id }

// WithRouteWatch lets the agent use route closures of its embedded server as
// failure reports (the fast path of a clustered offline site). Both ends of
// a route see it close at the same moment, and each tells its core
// (election.Node.RouteLost) about the member at the other end:
//
//   - a follower whose server loses its route to the server its leader is
//     connected to (as the leader's heartbeats announce) is released from
//     that leader and elects at once (after a pre-vote);
//   - a leader stops counting the acknowledgements of every member whose
//     server it lost its route to (w must name servers: RouteNamer, with
//     ServerName), and stops leading at once if its lease needed them;
//     with servers it cannot name, it stops leading when routes to a
//     quorum are gone.
//
// Each gateway runs one member, so a route stands for one member.
func WithRouteWatch(w RouteWatcher) Option {
	return func(a *Agent) error { a.fast.routes = w; return nil }
}

// checkRoutes runs on the loop's wakes: it reports every route closed since
// the last check to the core.
func (a *Agent) checkRoutes() {
	if a.fast.routes == nil || a.fast.noFast {
		return
	}
	now := a.fast.routes.RoutedServers()
	prev := a.fast.routed
	a.fast.routed = now
	var names map[string]string
	if n, ok := a.fast.routes.(RouteNamer); ok {
		names = n.RoutedServerNames()
		for sid, name := range names {
			a.fast.serverNames[sid] = name // remembered: a closed route is no longer listed
		}
	}
	lost := map[string]bool{} // members at the other end of a closed route
	unnamed := false
	for sid := range prev {
		if now[sid] {
			continue
		}
		if id, ok := strings.CutPrefix(a.fast.serverNames[sid], ServerName(a.cfg.Group, "")); ok && a.isMember(id) {
			lost[id] = true
		} else {
			unnamed = true
		}
		if conn := a.fast.leaderConn[a.core.leader]; a.core.leader != "" && strings.HasPrefix(conn, sid+"/") {
			lost[a.core.leader] = true // the leader's own connection is on that server
		}
	}
	for id := range lost {
		if id == a.cfg.ID {
			continue
		}
		if a.node.RouteLost(id) && a.core.role != election.Leader && id == a.core.leader {
			a.fast.fastAt = a.mono()
			a.m.fastSuspicions.Inc()
			a.log.Info("route to the leader's server closed: electing now", "leader", id)
		}
	}
	if unnamed && a.core.role == election.Leader && len(now)+1 < a.cfg.Quorum {
		a.log.Warn("routes to a quorum of gateways lost: stepping down", "routes", len(now), "quorum", a.cfg.Quorum)
		a.stopLeading("lost routes to a quorum")
		a.node.StepDown(election.ReasonRouteLost)
	}
}

// isMember reports whether id is a member of the group.
func (a *Agent) isMember(id string) bool {
	for _, m := range a.cfg.Members {
		if m.ID == id {
			return true
		}
	}
	return false
}
