package agent

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// metrics are the agent's Prometheus series, all under edge_election_ on a
// registry of the agent's own.
type metrics struct {
	isLeader      prometheus.Gauge
	term          prometheus.Gauge
	leaderInfo    gaugeVec
	leaderChanges prometheus.Counter
	elections     counterVec
	stepDowns     counterVec
	messages      counterVec
	// byMessage holds messages' series by type and direction (in, out)
	// once looked up: every message is counted, from the loop and from
	// the bus's goroutines.
	byMessage      [16][2]atomic.Pointer[prometheus.Counter]
	bad            counterVec
	badByReason    map[string]prometheus.Counter // the pre-declared reasons, looked up without hashing labels
	quorumLive     prometheus.Gauge
	quorumOK       prometheus.Gauge
	shortLease     prometheus.Gauge
	natsConnected  prometheus.Gauge
	persistErrors  prometheus.Counter
	persistSeconds prometheus.Histogram
	fastSuspicions prometheus.Counter

	controlRequests  counterVec
	electionDuration observerVec
	dutyRestarts     prometheus.Counter
	dutyRunning      prometheus.Gauge
	protocol         gaugeVec
	buildInfo        gaugeVec

	// electionStart is when this agent last stood for election (proclaimed)
	// and electionOpen whether it still stands; only the agent's loop uses
	// them.
	electionStart time.Duration
	electionOpen  bool
}

// electionBuckets span the election durations of H = 10ms to H = 1m
// (an election takes about one answer timeout, H by default).
var electionBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// persistBuckets span a durable save of the term and vote: about a
// millisecond on a quiet SSD, tens of milliseconds when the file system's
// journal commit waits for other writers, seconds on a failing card.
var persistBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1}

// badReasons are pre-declared so that every series exists at zero from the
// start (an alert on a rate needs the series before the first increment).
var badReasons = []string{
	"malformed", "oversize", "unknown_version", "unknown_type", "wrong_group",
	"not_member", "subject_mismatch", "bad_field", "not_for_me", "inbox_full",
	"stale_term", "rejected", "unsigned", "bad_signature", "replayed", "algorithm_mismatch",
	"unverified", "rate_limited", "term_jump",
}

// newMetrics registers the agent's series on reg. Every edge_election_
// series carries the election group as a label (group), as the pushed
// series do through the Pushgateway's grouping key: a Prometheus that
// scrapes the gateways directly can then count leaders and duties per
// group. The Pusher leaves the label out of what it pushes, since the
// grouping key adds it back (edge.NewPusher). The Go and process series,
// which say nothing about a group, stay without it. version is the build's
// version for edge_election_build_info ("unknown" when empty).
//
// With sparse, a labelled series exists only from its first increment: a
// witness process serving a thousand groups (package witness) would
// otherwise hold a hundred zero series for each.
func newMetrics(fam *MetricFamilies, runtimeReg prometheus.Registerer, withRuntime, sparse bool, group, version string) *metrics {
	f := groupSeries{fam, group}
	m := &metrics{
		isLeader: f.gauge(prometheus.GaugeOpts{Name: "edge_election_is_leader",
			Help: "1 while this agent leads its group with a valid lease, else 0."}),
		term: f.gauge(prometheus.GaugeOpts{Name: "edge_election_term",
			Help: "Current election term (the leader's fencing token)."}),
		leaderInfo: f.gaugeVec(prometheus.GaugeOpts{Name: "edge_election_leader",
			Help: "1 for the member this agent currently follows or is."}, []string{"leader"}...),
		leaderChanges: f.counter(prometheus.CounterOpts{Name: "edge_election_leader_changes_total",
			Help: "Times the known leader changed (including to none)."}),
		elections: f.counterVec(prometheus.CounterOpts{Name: "edge_election_elections_total",
			Help: "Elections this agent stood in, by result."}, []string{"result"}...),
		stepDowns: f.counterVec(prometheus.CounterOpts{Name: "edge_election_step_downs_total",
			Help: "Times this agent stopped leading, by reason."}, []string{"reason"}...),
		messages: f.counterVec(prometheus.CounterOpts{Name: "edge_election_messages_total",
			Help: "Election messages by type and direction (in, out)."}, []string{"type", "direction"}...),
		bad: f.counterVec(prometheus.CounterOpts{Name: "edge_election_bad_messages_total",
			Help: "Inbound messages dropped without effect, by reason."}, []string{"reason"}...),
		quorumLive: f.gauge(prometheus.GaugeOpts{Name: "edge_election_quorum_live",
			Help: "Members this agent believes alive, itself included."}),
		quorumOK: f.gauge(prometheus.GaugeOpts{Name: "edge_election_quorum_ok",
			Help: "1 when the live members are at least a quorum."}),
		shortLease: f.gauge(prometheus.GaugeOpts{Name: "edge_election_lease_shortened_by",
			Help: "On a leader, the members whose promised D is too short for its lease, which they then shorten: the gateways' timings differ."}),
		natsConnected: f.gauge(prometheus.GaugeOpts{Name: "edge_election_nats_connected",
			Help: "1 while the NATS connection is up."}),
		persistErrors: f.counter(prometheus.CounterOpts{Name: "edge_election_persist_errors_total",
			Help: "Failures to persist the term and vote (the agent stops on one)."}),
		persistSeconds: f.histogram(prometheus.HistogramOpts{Name: "edge_election_persist_duration_seconds",
			Help:    "Time to persist a changed term and vote durably (write, fsync); nothing of an election step leaves before it.",
			Buckets: persistBuckets}),
		fastSuspicions: f.counter(prometheus.CounterOpts{Name: "edge_election_fast_suspicions_total",
			Help: "Elections started at once because the server reported the leader's connection closed."}),
		electionDuration: f.histogramVec(prometheus.HistogramOpts{Name: "edge_election_election_duration_seconds",
			Help:    "Time from this agent standing for election (proclaiming) until it won or failed, by result.",
			Buckets: electionBuckets}, []string{"result"}...),
		controlRequests: f.counterVec(prometheus.CounterOpts{Name: "edge_election_control_requests_total",
			Help: "Control requests (status, resign, transfer) by verb and result: ok, or why they were refused."}, []string{"verb", "result"}...),
		dutyRestarts: f.counter(prometheus.CounterOpts{Name: "edge_election_duty_restarts_total",
			Help: "Times the leader duty command was started again while this agent kept leading."}),
		dutyRunning: f.gauge(prometheus.GaugeOpts{Name: "edge_election_duty_running",
			Help: "1 while this agent's leader duty command runs."}),
		buildInfo: f.gaugeVec(prometheus.GaugeOpts{Name: "edge_election_build_info",
			Help: "Always 1: the agent's version and the highest protocol version it speaks (docs/PROTOCOL.md), as labels."}, []string{"version", "protocol"}...),
	}
	if version == "" {
		version = "unknown"
	}
	m.buildInfo.WithLabelValues(version, strconv.Itoa(wire.ProtocolMax)).Set(1)
	m.protocol = f.gaugeVec(prometheus.GaugeOpts{Name: "edge_election_protocol_version",
		Help: "Protocol version: scope=build, the highest this build speaks; scope=site, the highest every member speaks (lower while a member runs an older build or is down)."}, []string{"scope"}...)
	m.protocol.WithLabelValues("build").Set(wire.ProtocolMax)
	m.protocol.WithLabelValues("site").Set(wire.ProtocolMax)
	if withRuntime {
		runtimeReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if !sparse {
		m.declare()
	}
	return m
}

// declare makes every labelled counter exist at zero from the first
// scrape, so that rate() and absent() rules work before the first
// increment (a one-member group sends no election message at all).
func (m *metrics) declare() {
	for _, t := range messageTypes() {
		for _, d := range []string{"in", "out"} {
			m.messages.WithLabelValues(t, d)
		}
	}
	for _, r := range stepDownReasons() {
		m.stepDowns.WithLabelValues(r)
	}
	for _, r := range []string{"won", "failed"} {
		m.elections.WithLabelValues(r)
		m.electionDuration.WithLabelValues(r)
	}
	m.badByReason = make(map[string]prometheus.Counter, len(badReasons))
	for _, r := range badReasons {
		m.badByReason[r] = m.bad.WithLabelValues(r)
	}
	for _, v := range []string{"status", "resign", "transfer", "drain", "undrain"} {
		for _, r := range []string{"ok", "unsigned", "bad_signature", "unknown_key", "stale", "rate_limited", "bad_request"} {
			m.controlRequests.WithLabelValues(v, r)
		}
	}
}

// series makes the agent's series in its families, labelled with its group.
func (a *Agent) series() groupSeries { return groupSeries{a.out.fam, a.cfg.Group} }

// messageTypes returns the wire name of every election message type, in
// the election package's order: the values of messages_total's type label.
func messageTypes() []string {
	var out []string
	for t := election.MsgHeartbeat; ; t++ {
		name := t.String()
		if _, ok := election.ParseMsgType(name); !ok {
			return out
		}
		out = append(out, name)
	}
}

// stepDownReasons returns the values of step_downs_total's reason label:
// the labels of every reason the election package names, "other" included.
func stepDownReasons() []string {
	seen := map[string]bool{}
	var out []string
	for r := election.ReasonNone + 1; !strings.HasPrefix(r.String(), "Reason("); r++ {
		if l := r.Label(); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func (m *metrics) message(t election.MsgType, direction string) {
	d := -1
	switch direction {
	case "in":
		d = 0
	case "out":
		d = 1
	}
	if d < 0 || int(t) >= len(m.byMessage) {
		m.messages.WithLabelValues(t.String(), direction).Inc()
		return
	}
	slot := &m.byMessage[t][d]
	if c := slot.Load(); c != nil {
		(*c).Inc()
		return
	}
	c := m.messages.WithLabelValues(t.String(), direction)
	slot.Store(&c)
	c.Inc()
}

// badMessage counts a dropped message. It runs for every message of a
// flood, so the usual reasons skip the label hashing.
func (m *metrics) badMessage(reason string) {
	if c, ok := m.badByReason[reason]; ok {
		c.Inc()
		return
	}
	m.bad.WithLabelValues(reason).Inc()
}

func (m *metrics) control(verb, result string) { m.controlRequests.WithLabelValues(verb, result).Inc() }

func (m *metrics) setLeader(old, leader string) {
	if old != "" {
		m.leaderInfo.DeleteLabelValues(old)
	}
	if leader != "" {
		m.leaderInfo.WithLabelValues(leader).Set(1)
	}
}

func boolGauge(g prometheus.Gauge, b bool) {
	if b {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

// electionStarted notes that this agent stood for election at now (on the
// agent's monotonic clock). A candidacy still open is closed as failed: it
// was given up for the new one.
func (m *metrics) electionStarted(now time.Duration) {
	m.electionEnded("failed", now)
	m.electionStart, m.electionOpen = now, true
}

// electionEnded observes the duration of the open candidacy, if any.
func (m *metrics) electionEnded(result string, now time.Duration) {
	if !m.electionOpen {
		return
	}
	m.electionDuration.WithLabelValues(result).Observe((now - m.electionStart).Seconds())
	m.electionOpen = false
}
