package agent

import (
	"errors"
	"strings"
	"time"

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

// ConnName is the NATS connection name of member id of group; advisories are
// matched on it.
func ConnName(group, id string) string { return "edge-agent/" + group + "/" + id }

// PresenceConnName is the NATS connection name of member id's presence
// connection (see bus.Presence).
func PresenceConnName(group, id string) string { return ConnName(group, id) + PresenceSuffix }

// PresenceSuffix ends the name of a presence connection.
const PresenceSuffix = "/presence"

// WithoutFastFailover turns the fast path off: advisories are ignored and a
// leader that loses its connection keeps its lease until it runs out.
func WithoutFastFailover() Option {
	return func(a *Agent) error { a.fast.noFast = true; return nil }
}

// WithNoLeaderWork declares that nothing acts on this agent's leadership
// but through IsLeader, read at the moment of acting: no OnStartedLeading,
// no duty, no process of its own that carries on. Then nothing of this
// leader acts once the server saw its connection closed, whether its
// process died (the kernel closes the socket after the last thread exited)
// or its client closed the connection itself (IsLeader turned false
// before), so its heartbeats say so (election.Message.NoFence, protocol 6)
// and a member that acts on the server's report of that close leads
// without the fast path's fence (docs/DESIGN-NOTES.md, Fast failover, 6).
// An operator who raised the fence above its default (Config.Fence, one
// tick) keeps it: the leader then says nothing, and a member with a raised
// fence waits it out whatever its leader says. New refuses this option with
// an OnStartedLeading callback or a duty. OnNewLeader and Watch are
// notifications, not leader work: what they drive is not covered. Over a
// websocket the NATS bus drops the claim: nats.go sends the close frame
// before it marks the connection closed.
func WithNoLeaderWork() Option {
	return func(a *Agent) error { a.fast.noWork = true; return nil }
}

// claimNoFence decides, once every option is in, whether this agent's
// heartbeats say NoFence.
func (a *Agent) claimNoFence() error {
	if !a.fast.noWork {
		return nil
	}
	if a.out.cb.OnStartedLeading != nil || a.work.duty != nil {
		return errors.New("agent: WithNoLeaderWork with leader work (an OnStartedLeading callback or a duty)")
	}
	a.fast.noFence = !a.fast.noFast && !a.fenceRaised()
	return nil
}

// fenceRaised reports whether fast_failover_fence was set above its
// default, one tick (point 4's middleboxes): such a fence is kept whatever
// a leader says.
func (a *Agent) fenceRaised() bool { return a.cfg.Fence > a.cfg.Tick() }

// noteNoFence keeps, from heartbeat m, whether its sender says that nothing
// of it acts once the server saw the connection m names closed. Kept by
// connection: a report of another one (an earlier or later connection of
// the same member) starts a fence as before.
func (a *Agent) noteNoFence(m election.Message) {
	if m.NoFence && m.Conn != "" {
		a.fast.unfenced[m.From] = m.Conn
	} else {
		delete(a.fast.unfenced, m.From)
	}
}

// onMemberGone applies a report that member id's bus connection conn
// closed.
func (a *Agent) onMemberGone(id, conn string) {
	if a.fast.noFast || id == a.cfg.ID {
		return
	}
	if a.node.LeaderGone(id, conn) {
		fence := a.actedOnReport(id, conn)
		a.m.fastSuspicions.Inc()
		a.log.Info("leader's connection closed: electing now", "leader", id, "fence", fence)
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

// actedOnReport notes that this agent released leader id on a report that
// its connection (or the route to its server) closed: a leader elected
// within D from now waits the fence before it acts. It keeps id and this
// agent's persisted term, which the core's answer to the report has not
// changed yet (it is saved in the loop's next Ready): the term it backed id
// in, or a later one it moved to since.
//
// No fence starts when the report is of the connection that id's
// heartbeats said NoFence of (and this agent's own fence is not raised
// above its default): nothing of that leader acts once the server saw it
// closed. A fence still running from an earlier report is kept. It
// returns the fence this report started (0: none).
func (a *Agent) actedOnReport(id, conn string) time.Duration {
	if conn != "" && a.fast.unfenced[id] == conn && !a.fenceRaised() {
		return 0
	}
	a.fast.fastAt = a.mono()
	a.fast.fenceConn = conn
	a.fast.goneID, a.fast.goneTerm = id, a.core.lastHS.Term
	return a.cfg.Fence
}

// resigned lifts the fence when m is the RESIGN of the leader the last
// report released this agent from, of the term kept with the report. The fence
// covers a leader that may still act for a moment after its connection
// closed; a leader sends its RESIGN only once it stopped leading and its
// work returned (release withholds it otherwise), so after that RESIGN the
// successor may act at once, as after any planned handover, which has no
// fence. This is the common case of a SIGTERM: the leader hands over and
// exits, and the server's report of its closed connection often reaches a
// member before the RESIGN sent just before it (the two travel on different
// connections). Only that term's RESIGN of that leader: an earlier one is
// no word about the leadership reported. (If this agent had moved to a later
// term than the one it backed the leader in, the leader's RESIGN does not
// match and the fence stays: a tick lost, never safety.)
func (a *Agent) resigned(m election.Message) {
	if a.fast.fastAt == 0 || m.From != a.fast.goneID || m.Term != a.fast.goneTerm {
		return
	}
	a.fast.fastAt = 0
	a.log.Debug("the reported leader resigned: no fence", "leader", m.From, "term", m.Term)
}

// fenceUntil returns until when a leader elected now must wait before it
// acts, on the monotonic clock (0: no fence): the later of its own fence, if
// it acted on a report within D (none once the reported leader's RESIGN
// lifted it), and the fences its voters said they were in. A voter's fence
// about the very connection whose report this agent acted on is left out:
// this agent's own fence began after that same close, which is all a fence
// is measured from (a voter's would add only how much later its report came
// and the transit of its answer). Not once a RESIGN lifted its own fence,
// though: the RESIGN matched this agent's term, which may be older than the
// leadership its voters saw end (TestStaleResignKeepsTheVotersFence). Any
// other is waited out: the report this agent acted on may be of another
// event than its voters' (a closed route that left the leader leading on the
// others, then the leader's own connection closing;
// TestOwnEarlierReportKeepsTheVotersFence).
func (a *Agent) fenceUntil() time.Duration {
	until := a.ownFence()
	for conn, t := range a.fast.heard {
		if conn != "" && conn == a.fast.fenceConn && a.fast.fastAt != 0 {
			continue
		}
		until = max(until, t)
	}
	return until
}

// ownFence returns until when this agent's own fence runs: the fence after
// it acted on a report, within D of it (0: none).
func (a *Agent) ownFence() time.Duration {
	if a.fast.fastAt == 0 || a.mono()-a.fast.fastAt > a.cfg.SuspectAfter() {
		return 0
	}
	return a.fast.fastAt + a.cfg.Fence
}

// fenceLeft is the Fence (and FenceConn) that m, sent at now, says: what is
// left of this agent's own fence, on an acknowledgement or a granted vote
// (the answers that count for a leadership). A member released by a report
// may give its vote at once, to a candidate that did not see the report
// itself (it had not heard the old leader, or its own copy of the report is
// late): without this, that candidate would lead at once, while the old
// leader may still act for a moment after its connection closed.
func (a *Agent) fenceLeft(m election.Message, now time.Duration) (int64, string) {
	if m.Type != election.MsgAck && (m.Type != election.MsgVote || !m.Granted) {
		return 0, ""
	}
	left := a.ownFence() - now
	if left <= 0 {
		return 0, ""
	}
	return int64(left), a.fast.fenceConn
}

// maxHeard bounds the fences kept by connection; beyond it they merge into
// the entry of no connection, which is always waited out.
const maxHeard = 8

// heardFenceOf notes the fence an answer says its sender is in: a
// leadership it helps give waits until the fence ends, counted from its
// arrival (later than the sender's own end, never earlier). A fence longer
// than this agent's lease is cut to it: every fence is shorter than its
// member's lease, and a forged one must not keep a leader idle for long.
// Honoured with the fast path off here too: the sender had it on.
func (a *Agent) heardFenceOf(m election.Message) {
	if m.Fence <= 0 {
		return
	}
	now := a.mono()
	until := now + min(time.Duration(m.Fence), a.cfg.Lease)
	if a.fast.heard == nil {
		a.fast.heard = map[string]time.Duration{}
	}
	for conn, t := range a.fast.heard {
		if t <= now {
			delete(a.fast.heard, conn)
		}
	}
	conn := m.FenceConn
	if _, ok := a.fast.heard[conn]; !ok && len(a.fast.heard) >= maxHeard {
		conn = ""
	}
	a.fast.heard[conn] = max(a.fast.heard[conn], until)
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
//   - a follower whose server loses its route to its leader's own server
//     (named ServerName(group, leader)) is released from that leader and
//     elects at once (after a pre-vote). Only that route: the server the
//     leader's connection happens to be on may be another member's, whose
//     routes the leader's agent does not watch, so it would go on counting
//     the follower's acknowledgements;
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

// onRoutesClosed applies a report of routes closed: it tells the core
// about every member at the other end of one.
func (a *Agent) onRoutesClosed(closed []RoutedServer, left int) {
	if a.fast.noFast {
		return
	}
	lost := map[string]bool{} // members at the other end of a closed route
	unnamed := false
	for _, s := range closed {
		if id, ok := strings.CutPrefix(s.Name, ServerName(a.cfg.Group, "")); ok && a.isMember(id) {
			lost[id] = true
		} else {
			unnamed = true
		}
	}
	for id := range lost {
		if id == a.cfg.ID {
			continue
		}
		if a.node.RouteLost(id) && a.core.role != election.Leader && id == a.core.leader {
			fence := a.actedOnReport(id, "")
			a.m.fastSuspicions.Inc()
			a.log.Info("route to the leader's server closed: electing now", "leader", id, "fence", fence)
		}
	}
	if unnamed && a.core.role == election.Leader && left+1 < a.cfg.Quorum {
		a.log.Warn("routes to a quorum of gateways lost: stepping down", "routes", left, "quorum", a.cfg.Quorum)
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

// routePoll is how often WatchRoutes counts the routes: H/20, 5 ms at the
// benchmark's H = 100 ms, 50 ms at the default H = 1 s. Counting routes is a
// lock and a map walk; the wakeup costs more than the count (at a fixed 2 ms
// the poller alone took about 1% of a core, at 5 ms about 1.2% of an idle
// agent at H = 1 s, where it had used 0.36% in all), so the period follows
// H: half a tick, against the D it shortens.
func routePoll(h time.Duration) time.Duration { return max(2*time.Millisecond, h/20) }

// routeCounter is what WatchRoutes uses, when a RouteWatcher has it, to
// look at the routes cheaply between full comparisons; the embedded server
// has it.
type routeCounter interface{ NumRoutes() int }

// WatchRoutes reports to mb every route of w that closed: it polls w every
// routePoll(h), and compares the routed servers when their number changed,
// and at least every h (a route that closed while another opened keeps the
// number). A report the mailbox cannot take now is offered again at the
// next poll, with whatever closed since; onBad (when not nil) counts it.
// It returns the stop, which waits for the poller to end.
func WatchRoutes(w RouteWatcher, h time.Duration, mb *Mailbox, onBad func(string)) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	p := &routePoller{w: w, names: map[string]string{}}
	p.prev = p.servers()
	go func() {
		defer close(stopped)
		t := time.NewTicker(routePoll(h))
		defer t.Stop()
		rc, counts := w.(routeCounter)
		last, full := len(p.prev), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if counts {
				n := rc.NumRoutes()
				changed := n != last
				last = n
				if !changed && time.Since(full) < h {
					continue
				}
			}
			full = time.Now()
			now := p.servers()
			closed := p.closed(now)
			if len(closed) > 0 && !mb.Offer(Input{Kind: InputRoutesClosed, Closed: closed, Routes: len(now)}) {
				if onBad != nil {
					onBad("inbox_full")
				}
				continue // report them again with the next look
			}
			p.prev = now
		}
	}()
	return func() { close(done); <-stopped }
}

// routePoller is WatchRoutes' memory: the servers routed to at the last
// report and the names of every server routed to so far (a closed route is
// no longer listed).
type routePoller struct {
	w     RouteWatcher
	prev  map[string]bool
	names map[string]string
}

func (p *routePoller) servers() map[string]bool {
	now := p.w.RoutedServers()
	if n, ok := p.w.(RouteNamer); ok {
		for sid, name := range n.RoutedServerNames() {
			p.names[sid] = name
		}
	}
	return now
}

// closed returns the servers of the last report that now lacks.
func (p *routePoller) closed(now map[string]bool) []RoutedServer {
	var out []RoutedServer
	for sid := range p.prev {
		if !now[sid] {
			out = append(out, RoutedServer{ID: sid, Name: p.names[sid]})
		}
	}
	return out
}
