package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-agent/edge-agent/agent/ratelimit"
	"github.com/edge-agent/edge-agent/election"
)

// ErrNotLeader is returned by Resign and Transfer on an agent that does not lead.
var ErrNotLeader = election.ErrNotLeader

// ErrHandoverNotAnnounced is returned by Resign and Transfer when this
// agent stopped leading but did not announce the handover, because its
// leader's work (OnStartedLeading, the duty) had not returned within the
// release wait (WithReleaseWait): the members elect a successor once they
// miss its heartbeats, D after the last one, and not the nominee in
// particular.
var ErrHandoverNotAnnounced = errors.New("agent: stopped leading but did not announce the handover: the leader's work was still running at the end of the release wait; the members elect a successor once they miss the heartbeats")

// ErrNotRunning is returned by calls that need the agent's loop when Run has
// not started or has returned.
var ErrNotRunning = errors.New("agent: not running")

// Callbacks tell a program embedding the agent about leadership. They are
// called in the order the transitions happened, one at a time, from a
// goroutine of the agent (never from its election loop), so a slow callback
// delays later callbacks but never the election.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine when this agent becomes
	// leader. ctx is cancelled the moment leadership is lost (before
	// OnStoppedLeading), and at the latest when the lease runs out. A
	// leadership whose ctx ended with the lease is over even if the lease
	// is then renewed (acknowledgements read late): the agent hands over
	// rather than lead on without its work.
	OnStartedLeading func(ctx context.Context, term uint64)
	// OnStoppedLeading is called after leadership was lost.
	OnStoppedLeading func()
	// OnNewLeader is called whenever the known leader changes; id is ""
	// while no leader is known.
	OnNewLeader func(id string, term uint64)
}

// Store persists the term and vote. Save must be durable when it returns. A
// store may leave the rest of a save's work to a Settle method, which the
// agent calls once the messages that depend on the save are sent (see
// FileStore.Settle).
type Store interface {
	Load() election.HardState
	Save(election.HardState) error
	Close() error
}

// Option configures an Agent.
type Option func(*Agent) error

// WithStore replaces the state directory with s (tests).
func WithStore(s Store) Option { return func(a *Agent) error { a.store = s; return nil } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(a *Agent) error { a.log = l; return nil } }

// WithRegistry registers the agent's metrics on reg instead of a registry of
// its own. Go and process collectors are only added to the agent's own registry.
func WithRegistry(reg *prometheus.Registry) Option {
	return func(a *Agent) error { a.out.reg = reg; a.out.ownReg = false; return nil }
}

// WithCallbacks sets the leadership callbacks.
func WithCallbacks(cb Callbacks) Option { return func(a *Agent) error { a.out.cb = cb; return nil } }

// WithDutyHook makes the agent call f each time its leader duty (WithDuty)
// starts running (true) or is gone (false), after edge_election_duty_running
// changed. f runs on the duty's goroutine and must not block; edge-agent
// pushes the metrics to the Pushgateway then, so that the push does not
// wait for the next interval to show the duty that a leader change started.
func WithDutyHook(f func(running bool)) Option {
	return func(a *Agent) error { a.out.dutyHook = f; return nil }
}

// WithSparseMetrics leaves out the labelled series that have not been
// incremented yet (they exist at zero from the start otherwise): for a
// process that runs many agents on one registry (package witness).
func WithSparseMetrics() Option { return func(a *Agent) error { a.out.sparse = true; return nil } }

// WithVersion sets the version reported in status and in
// edge_election_build_info.
func WithVersion(v string) Option { return func(a *Agent) error { a.out.version = v; return nil } }

// Agent runs one member of an election group. Create it with New, then call
// Run. Its query methods are safe for concurrent use.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	node   election.Node
	store  Store
	in     inputs // where the loop's inputs come from
	lease  leaseView
	core   loopState
	status statusSnapshot
	out    outputs
	work   leaderWork
	fast   fastPath
	maint  maintenance // drained flag, duplicate-id quarantine (drain.go)
}

// inputs are where the loop's inputs come from: the bus (every external
// input), the agent's own API (handovers) and the clock.
type inputs struct {
	bus     Bus
	factory BusFactory   // builds bus in New
	reqs    chan request // handovers asked for (Resign, Transfer)
	wake    func()       // DrivenBy: called when an input or a request waits
	// queued is the bus's channel while the loop runs. A lease found run
	// out is judged only after the inputs that had arrived by then
	// (before of them, counted when judging began) are stepped: see
	// judgeLater.
	queued  <-chan Input
	judging bool
	before  int
	judgeBy time.Duration // the verdict waits at most a tick
}

// leaseView is the lease and role, readable without the loop. Durations
// are on the monotonic clock, from start.
type leaseView struct {
	start       time.Time // monotonic base for the lease
	leading     atomic.Bool
	leaseEnd    atomic.Int64 // nanoseconds since start
	leaseLen    atomic.Int64 // the lease held now (wallLease), nanoseconds; 0 before the first
	term        atomic.Uint64
	leaderID    atomic.Value // string
	lastLoopRun atomic.Int64 // nanoseconds since start
	actAfter    atomic.Int64 // a fenced new leader acts from this time on
	running     atomic.Bool
}

// loopState is owned by the loop.
type loopState struct {
	sentAt      map[uint64]time.Duration
	role        election.Role
	leader      string
	lastHS      election.HardState
	termJumpLog *ratelimit.Limiter
	startTerm   uint64 // the persisted term at start (MaxTermJump)
	algGuard    *algorithmGuard
	nonces      map[string]uint64 // signed handover requests of this term (freshRequest)
	withheld    bool              // a RESIGN was withheld since handOver began (see release)
	cause       string            // why the handover under way was asked for (logwords.go)
	resignTo    string            // the nominee of the RESIGN in the Ready being reported
	failLog     *repeatLog        // failed elections, summarised (logwords.go)
}

// statusSnapshot is the core's status as of the loop's last Ready.
type statusSnapshot struct {
	mu       sync.Mutex
	snapshot election.Status
	// short lists, while leading, the members whose promise shortens the
	// lease, as last logged (loop goroutine only).
	short []string
}

// outputs are where the agent reports: metrics registry, callbacks,
// journal, watchers.
type outputs struct {
	reg      *prometheus.Registry
	ownReg   bool
	cb       Callbacks
	version  string
	notify   *notifier
	journal  *journal
	watchers watchers
	history  leaderHistory      // the last leader changes, for status
	dutyHook func(running bool) // WithDutyHook
	sparse   bool               // WithSparseMetrics
	fam      *MetricFamilies    // WithMetricFamilies, or the registry's own
}

// leaderWork is what runs while this agent leads (leaderwork.go, duty.go).
type leaderWork struct {
	duty        *Duty
	releaseWait time.Duration
	leadCancel  context.CancelFunc
	leadCtx     context.Context // loop-owned: this leadership's; the lease guard may end it (handOverLapsed)
	leadDone    chan struct{}   // loop-owned: closed once this leadership's work returned
	leadPlanned *atomic.Bool    // loop-owned: set when this leadership ends by a planned handover
	vip         vipState        // the duty's virtual IPs (vip.go)
	dutyState   dutyState       // for status
}

// fastPath is the fast failover's state (fastpath.go).
type fastPath struct {
	noFast bool
	routes RouteWatcher // given to the bus, which reports closed routes
	// noWork is WithNoLeaderWork; noFence, that this agent's heartbeats
	// say NoFence (claimNoFence).
	noWork, noFence bool
	// unfenced maps a member to the connection its last heartbeat
	// announced with NoFence: a report of that connection's close starts
	// no fence here (actedOnReport).
	unfenced map[string]string
	fastAt   time.Duration // when this agent last acted on a disconnect report (0 once a RESIGN lifted its fence)
	// The leader that report released this agent from, and this agent's
	// term then: that leader's RESIGN of that term lifts the fence
	// (actedOnReport, resigned).
	goneID   string
	goneTerm uint64
	// fenceConn is the closed connection whose report set fastAt ("" for
	// a closed route); kept when a RESIGN lifts the fence.
	fenceConn string
	// heard holds until when the answers this agent received said their
	// senders' fences run (Message.Fence), by the closed connection each
	// is about (Message.FenceConn): a leadership that such answers give
	// waits them out too (fenceUntil).
	heard map[string]time.Duration
}

type request struct {
	nominee string
	term    uint64 // a handover of this term's leadership only (0: whatever leads now)
	drain   *bool  // Drain: drain (true) or undrain, instead of a handover
	reply   chan error
}

// New validates cfg and builds an agent. It opens the state directory (and
// takes its lock) unless WithStore is given.
func New(cfg Config, opts ...Option) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent: config: %w", err)
	}
	a := &Agent{
		cfg: cfg,
		log: slog.Default(),
		in:  inputs{reqs: make(chan request)},
		core: loopState{
			sentAt: map[uint64]time.Duration{},
			// One warning about refused term jumps per minute (ten at once).
			termJumpLog: ratelimit.NewLimiter(1.0/60, 10, 1),
			nonces:      map[string]uint64{},
			failLog:     newRepeatLog(FailedElectionLogEvery),
		},
		out:  outputs{ownReg: true},
		fast: fastPath{noFast: cfg.DisableFastFailover, unfenced: map[string]string{}},
	}
	a.lease.start = time.Now()
	a.lease.leaderID.Store("")
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	if err := a.claimNoFence(); err != nil {
		return nil, err
	}
	a.log = a.log.With("id", cfg.ID, "group", cfg.Group)
	a.initMetrics()
	if a.store == nil {
		s, err := OpenFileStore(cfg.StateDir)
		if err != nil {
			return nil, err
		}
		a.store = s
	}
	hs := a.store.Load()
	a.core.lastHS = hs
	a.core.startTerm = hs.Term
	a.lease.term.Store(hs.Term)
	a.m.term.Set(float64(hs.Term))
	startWait, err := a.keepPromise()
	if err != nil {
		a.store.Close()
		return nil, err
	}
	node, err := newNode(cfg, hs, startWait)
	if err != nil {
		a.store.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.node = node
	if err := a.initMaintenance(); err != nil {
		a.store.Close()
		return nil, err
	}
	if a.maint.drained.Load() {
		a.node.Drain(true) // before anything runs: a drained agent does not stand even once
	}
	a.status.snapshot = a.node.Status()
	if a.in.factory == nil {
		a.in.factory = func(BusContext) (Bus, error) { return noBus{}, nil }
	}
	b, err := a.in.factory(BusContext{Config: a.cfg, Log: a.log, Routes: a.fast.routes, Fast: !a.fast.noFast, Version: a.out.version})
	if err != nil {
		a.store.Close()
		return nil, err
	}
	a.in.bus = b
	if err := a.attachDuty(); err != nil {
		_ = b.Close()
		a.store.Close()
		return nil, err
	}
	a.warnAtStart(hs.Term)
	return a, nil
}

// warnAtStart logs what an operator should know about this member's setup
// before it runs: island mode, and a term at its bound.
func (a *Agent) warnAtStart(term uint64) {
	if a.cfg.IslandMode {
		a.log.Warn("island mode (quorum: none): a network partition can elect two leaders")
	}
	if term >= election.MaxTerm-1024 {
		a.log.Error("the term is at its bound: this member can stand in few or no more elections; with every agent of the group stopped, reset every member's term (edge-agent reset-term, docs/SECURITY.md)",
			"term", term, "max_term", election.MaxTerm)
	}
}

// initMetrics registers the agent's series: in its families
// (WithMetricFamilies), or else in families of its registry (WithRegistry)
// or of a registry of its own.
func (a *Agent) initMetrics() {
	if a.out.reg == nil {
		a.out.reg = prometheus.NewRegistry()
	}
	if a.out.fam == nil {
		a.out.fam = NewMetricFamilies(a.out.reg)
	}
	a.m = newMetrics(a.out.fam, a.out.reg, a.out.ownReg, a.out.sparse, a.cfg.Group, a.out.version)
	a.core.algGuard = newAlgorithmGuard(a.cfg.Algorithm, a.series())
}

// newNode builds the election core of cfg's algorithm, in ticks of
// cfg.Tick(), from the persisted state hs; it grants no vote and does not
// stand for startWait (at least D) after it starts.
func newNode(cfg Config, hs election.HardState, startWait time.Duration) (election.Node, error) {
	tick := cfg.Tick()
	ecfg := election.Config{
		ID:             cfg.ID,
		Members:        cfg.Members,
		Quorum:         cfg.Quorum,
		HeartbeatTicks: TicksPerHeartbeat,
		ElectionTicks:  int(cfg.SuspectAfter() / tick),
		LeaseTicks:     cfg.LeaseTicks(),
		AnswerTicks:    int((cfg.AnswerTimeout + tick - 1) / tick),
		HoldDownTicks:  int(cfg.HoldDown / tick),
		Backoff:        newTickBackoff(cfg.Heartbeat, tick, cfg.SuspectAfter()),
		HardState:      hs,
		Witnesses:      cfg.Witnesses,
		StartWaitTicks: int((startWait + tick - 1) / tick),
	}
	switch cfg.Preemption {
	case PreemptNever:
		ecfg.Preemption = election.PreemptNever
	case PreemptImmediate:
		ecfg.Preemption = election.PreemptImmediate
	default:
		ecfg.Preemption = election.PreemptHoldDown
	}
	switch cfg.Algorithm {
	case AlgorithmBully:
		return election.NewBully(ecfg)
	case AlgorithmRing:
		return election.NewRing(ecfg)
	}
	return nil, fmt.Errorf("algorithm %q is not available", cfg.Algorithm)
}

// Registry returns the registry holding the agent's metrics.
func (a *Agent) Registry() *prometheus.Registry { return a.out.reg }

// Config returns the validated configuration.
func (a *Agent) Config() Config { return a.cfg }

func (a *Agent) mono() time.Duration { return time.Since(a.lease.start) }

// IsLeader reports whether this agent leads with a valid lease, checked on
// the monotonic clock at the time of the call: a process that was paused
// past its lease answers false the moment it wakes, before its loop runs.
func (a *Agent) IsLeader() bool {
	if !a.lease.leading.Load() {
		return false
	}
	now := int64(a.mono())
	if now >= a.lease.leaseEnd.Load() || now < a.lease.actAfter.Load() {
		return false
	}
	// With the fast path on, the others may elect the moment the server
	// reports this connection closed: stop acting as soon as it is down.
	return a.fast.noFast || a.in.bus.Up(a.lease.term.Load())
}

// LeaseRemaining is how long the lease still runs (0 if not leading).
func (a *Agent) LeaseRemaining() time.Duration {
	if !a.lease.leading.Load() {
		return 0
	}
	return max(0, time.Duration(a.lease.leaseEnd.Load())-a.mono())
}

// Leader returns the id of the known leader, or "".
func (a *Agent) Leader() string {
	if a.lease.leading.Load() && !a.IsLeader() {
		return "" // our own lease ran out: we no longer know of a leader
	}
	return a.lease.leaderID.Load().(string)
}

// Term returns the current term, the leader's fencing token.
func (a *Agent) Term() uint64 { return a.lease.term.Load() }

// Healthy reports whether the election loop ran recently (within 3 heartbeats).
func (a *Agent) Healthy() bool {
	return a.lease.running.Load() && a.mono()-time.Duration(a.lease.lastLoopRun.Load()) < 3*a.cfg.Heartbeat
}

// Ready reports whether the agent has joined its group: its loop runs, its
// transport is connected and it knows a leader.
func (a *Agent) Ready() bool {
	return a.Healthy() && a.in.bus.Connected() && a.Leader() != ""
}

// Resign makes the leader step down and hand over to the next member in rank.
func (a *Agent) Resign(ctx context.Context) error { return a.handover(ctx, "") }

// Transfer makes the leader hand over to member id.
func (a *Agent) Transfer(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("agent: transfer: empty member id")
	}
	return a.handover(ctx, id)
}

func (a *Agent) handover(ctx context.Context, nominee string) error {
	return a.ask(ctx, request{nominee: nominee})
}

// ask hands r to the loop and waits for its answer (or ctx).
func (a *Agent) ask(ctx context.Context, r request) error {
	if !a.lease.running.Load() {
		return ErrNotRunning
	}
	r.reply = make(chan error, 1)
	select {
	case a.in.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.in.wake != nil {
		a.in.wake()
	}
	select {
	case err := <-r.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs the election until ctx is cancelled. On cancellation a leader
// first hands over (the successor proclaims at once), then Run returns nil.
// Run returns an error if the state cannot be persisted: an agent that cannot
// store its term must not take part.
func (a *Agent) Run(ctx context.Context) error {
	if a.in.wake != nil {
		return errors.New("agent: built to be driven by a host (DrivenBy): use Drive")
	}
	s, err := a.start()
	if err != nil {
		return err
	}
	defer s.close()
	return s.loop(ctx)
}

// start does what the loop needs before its first input: it opens the bus
// and the outputs and logs the start. The stepper's close undoes it.
func (a *Agent) start() (*stepper, error) {
	if !a.lease.running.CompareAndSwap(false, true) {
		return nil, errors.New("agent: Run or Drive called twice")
	}
	// Not a named result: a return of nil, err would nil it before the
	// deferred undo below reads it (a bus that failed to open panicked).
	s := &stepper{a: a}
	s.push(func() { a.lease.running.Store(false) })
	s.push(func() {
		if t := a.maint.promiseTimer; t != nil {
			t.Stop()
		}
		_ = a.store.Close()
	})
	started := false
	defer func() {
		// On an error, and on a panic (as Run's deferred calls did),
		// undo what was done.
		if !started {
			s.close()
		}
	}()
	inputs, err := a.in.bus.Open(BusHooks{
		OnBad: a.m.badMessage, OnMessage: a.m.message, OnControl: a.m.control,
		Status: a.Status, WatchFunc: a.WatchFunc, OnProtocol: a.onProtocol, Wake: a.in.wake,
	})
	if err != nil {
		return nil, err
	}
	s.push(func() { _ = a.in.bus.Close() })
	a.out.notify = newNotifier()
	s.push(a.out.notify.close)
	s.push(a.out.watchers.close)
	if a.work.duty != nil {
		s.push(a.work.duty.Prepare()) // the guard of its first run, started now
	}

	a.log.Info("agent started", "algorithm", a.cfg.Algorithm, "members", len(a.cfg.Members),
		"quorum", a.cfg.Quorum, "heartbeat", a.cfg.Heartbeat, "suspect_after", a.cfg.SuspectAfter(),
		"lease", a.cfg.Lease, "term", a.core.lastHS.Term)
	s.clock = newTickClock(a.mono(), a.cfg.Tick())
	s.due = a.mono() + a.cfg.Tick()
	a.lease.lastLoopRun.Store(int64(a.mono()))
	a.in.queued = inputs
	started = true
	return s, nil
}

// errBusClosed ends the loop when the bus closed its channel on its own.
var errBusClosed = errors.New("agent: bus closed")

// stepper is the election loop's state between its steps: the core's tick
// clock, the inputs, and when the loop has work without an input. Run
// steps it on a goroutine of its own (loop); a host that drives many
// agents steps it from its own goroutines (Driven).
type stepper struct {
	a     *Agent
	clock *tickClock
	due   time.Duration // on the agent's monotonic clock
	undo  []func()      // close runs them, last first
}

func (s *stepper) push(f func()) { s.undo = append(s.undo, f) }

// close undoes start.
func (s *stepper) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// loop is the election loop: it waits for an input (from the bus, or a
// handover asked for through the API) or for the core's next deadline,
// steps the core, and applies its Ready (process), until ctx ends.
func (s *stepper) loop(ctx context.Context) error {
	a := s.a
	timer := time.NewTimer(max(s.due-a.mono(), 0))
	defer timer.Stop()
	for {
		if err := s.arrived(); err != nil {
			return err
		}
		var err error
		select {
		case <-ctx.Done():
			return s.shutdown()
		case <-timer.C:
			err = s.timer()
		case in, ok := <-a.in.queued:
			if !ok {
				return errBusClosed
			}
			err = s.input(in)
		case r := <-a.in.reqs:
			err = s.request(r)
		}
		if err != nil {
			return s.failed(err)
		}
		timer.Reset(max(s.next()-a.mono(), 0)) // since Go 1.23 a Reset timer delivers no stale tick
	}
}

// arrived applies the inputs that had already arrived when the loop came
// round, each as of when it arrived: a loop that ran late (a loaded machine
// holds a process for tens of milliseconds) must count an acknowledgement
// waiting for it before its timers, or the lease it renews, conclude that
// none came. Only those: the timer, a handover request and shutdown come
// next, however many inputs arrive meanwhile.
func (s *stepper) arrived() error {
	for n := len(s.a.in.queued); n > 0; n-- {
		in, ok := <-s.a.in.queued
		if !ok {
			return errBusClosed
		}
		if err := s.input(in); err != nil {
			return s.failed(err)
		}
	}
	return nil
}

// failed stops leading after a failure to persist, and returns err.
func (s *stepper) failed(err error) error {
	if err != errBusClosed {
		s.a.stopLeading("persist failed")
	}
	return err
}

func (s *stepper) input(in Input) error { return s.a.inputAt(s.clock, in) }

// timer is the loop's deadline passing: the core catches up its ticks.
func (s *stepper) timer() error {
	s.clock.catchUp(s.a.node, s.a.mono())
	return s.a.process()
}

// request serves a handover or drain asked for through the API.
func (s *stepper) request(r request) error {
	a := s.a
	s.clock.catchUp(a.node, a.mono())
	var rerr, err error
	switch {
	case r.drain != nil:
		rerr, err = a.setDrained(*r.drain)
	case r.term != 0 && r.term != a.Term():
		rerr = ErrNotLeader // that leadership is over: this one is left alone
	default:
		rerr, err = a.handOver(r.nominee)
	}
	r.reply <- rerr
	return err
}

// inputAt applies in as of when it arrived: the core's clock is caught up
// to its arrival, not to now, so that the core decides on it what a loop
// that had run at once would have decided (a member backs a leader from
// when its heartbeat came; an acknowledgement that came before the lease
// it renews ran out renews it). The later ticks follow before the loop
// sleeps again.
func (a *Agent) inputAt(clock *tickClock, in Input) error {
	if a.in.before > 0 {
		a.in.before--
	}
	at := a.mono()
	if !in.At.IsZero() {
		at = min(at, in.At.Sub(a.lease.start))
	}
	clock.catchUp(a.node, at)
	return a.onInput(in)
}

// onInput applies one input of the bus: input -> Step -> Ready -> persist
// -> send -> report.
func (a *Agent) onInput(in Input) error {
	switch in.Kind {
	case InputMessage:
		if in.Msg == nil || !a.step(*in.Msg) {
			return nil
		}
	case InputMemberGone:
		a.onMemberGone(in.Member, in.Conn)
	case InputRoutesClosed:
		a.onRoutesClosed(in.Closed, in.Routes)
	case InputDisconnected:
		a.onOwnDisconnect()
	case InputControl:
		if in.Control == nil {
			return nil
		}
		return a.onControl(in.Control)
	case InputDuplicate:
		a.onDuplicate(in.Conn)
	default:
		return nil
	}
	return a.process()
}

// handOver makes the core hand leadership over to nominee ("": the next in
// rank) and applies the result at once. herr is the core's answer (not
// leading, no such member); err a failure to persist.
func (a *Agent) handOver(nominee string) (herr, err error) {
	a.core.cause = causeResign
	if nominee != "" {
		a.core.cause = causeTransfer
	}
	defer func() { a.core.cause = "" }()
	herr = a.node.Resign(nominee)
	a.core.withheld = false
	if err = a.process(); err == nil {
		a.flush()
	}
	if herr == nil && a.core.withheld {
		herr = ErrHandoverNotAnnounced
	}
	return herr, err
}

// handOverLapsed hands leadership on when the lease guard ended this
// leadership's work (the lease ran out as this leader's clock saw it: its
// loop was held past the end) and the loop then found the lease renewed
// after all, by acknowledgements that had waited in its mailbox. The work
// is gone: the callbacks' context is over and the duty was killed at its
// deadline, which is not started again in the term. Rather than lead on
// without it, the leader hands over, as the duty supervisor does when it
// killed the command at the deadline of a lease that was then renewed.
// An agent without leader work (no OnStartedLeading, no duty) lost nothing
// and leads on.
func (a *Agent) handOverLapsed() error {
	a.log.Warn("the lease ran out before the loop renewed it and the leader's work was stopped: handing over", "term", a.Term())
	a.core.cause = causeLapsed
	defer func() { a.core.cause = "" }()
	if err := a.node.Resign(""); err != nil {
		// The core led in the Ready just applied, so it cannot refuse;
		// if it did, processing again would come back here.
		a.log.Error("cannot hand over", "err", err)
		return nil
	}
	err := a.process()
	if err == nil {
		a.flush()
	}
	return err
}

// step gives m to the core, unless the agent refuses it first (a member
// of another algorithm, a term jump); it reports whether the core saw m.
func (a *Agent) step(m election.Message) bool {
	if first, gerr := a.core.algGuard.check(m, time.Now()); gerr != nil {
		a.m.badMessage("algorithm_mismatch")
		if first {
			a.log.Error("refusing a member that runs another election algorithm", "err", gerr)
		}
		return false
	}
	if reason := a.checkTerm(m); reason != "" {
		a.m.badMessage(reason)
		return false
	}
	if m.Type == election.MsgHeartbeat {
		a.noteNoFence(m)
	}
	if m.Type == election.MsgResign {
		a.resigned(m)
	}
	a.heardFenceOf(m)
	a.traceMessage("in", m)
	if serr := a.node.Step(m); serr != nil {
		a.countRejected(serr)
	}
	return true
}

// next returns, and keeps as due, the next moment the loop has work without
// an input: the core's next deadline, the end of the wall-clock lease; and
// at least every H, so that the watchdog sees a live loop. An idle follower
// wakes for heartbeats only, instead of every tick: on a gateway most of an
// idle agent's CPU was the tick's wakeups.
func (s *stepper) next() time.Duration {
	a := s.a
	now := a.mono()
	due := min(s.clock.at(a.node.NextTick()), now+a.cfg.Heartbeat)
	if a.lease.leading.Load() {
		due = min(due, time.Duration(a.lease.leaseEnd.Load()))
	}
	s.due = due
	return due
}

// tickClock maps the monotonic clock to the core's ticks: tick n falls at
// start + n*d. The loop sleeps between events and catches up on the ticks
// it slept through before it handles anything, so the core sees the same
// sequence of ticks as with a ticker, each one no later than before the
// next event.
type tickClock struct {
	start time.Duration
	d     time.Duration
	done  int64 // ticks given to the core
}

func newTickClock(start, d time.Duration) *tickClock { return &tickClock{start: start, d: d} }

// maxCatchUp bounds the ticks replayed at once after a long pause (a
// frozen process, a suspended VM): beyond it the core's clock simply lags,
// which only ever makes it wait longer, never act earlier.
const maxCatchUp = 10_000

func (c *tickClock) catchUp(n election.Node, now time.Duration) {
	due := int64((now - c.start) / c.d)
	if due-c.done > maxCatchUp {
		c.done = due - maxCatchUp
	}
	for ; c.done < due; c.done++ {
		n.Tick()
	}
}

// at returns when the k-th tick from now falls due.
func (c *tickClock) at(k int) time.Duration {
	return c.start + time.Duration(c.done+int64(k))*c.d
}

// MaxTermJump bounds how fast the term of an agent can grow: to at most
// the term it started with, plus MaxTermJump, plus MaxTermJump per
// heartbeat period it has run; a message of a higher term is refused
// (ReasonTermJump) before the core sees it. An honest group raises its term
// by one per election, far below the bound, and a member that fell behind
// (flashed anew, or off while the group held millions of elections) is
// within it at once; but a compromised member key can raise the group's
// terms no faster than MaxTermJump per period, so election.MaxTerm is out of
// its reach for 2^38 periods (87 years at the shortest heartbeat, 10 ms).
//
// The bound grows with time rather than limiting the distance from the
// agent's own term, so that honest members that such a member pushed apart
// still accept each other's terms: a distance bound (refuse a term more
// than MaxTermJump above one's own) let one member push another
// MaxTermJump ahead twice and leave the two refusing each other for good.
// What remains is documented in docs/SECURITY.md: a member that restarted
// while such an attack was under way accepts the terms the others were
// pushed to only once its own allowance has grown to them.
const MaxTermJump = 1 << 24

// ReasonTermJump is the bad_messages_total reason of a message whose term
// is above the agent's term allowance (see MaxTermJump).
const ReasonTermJump = "term_jump"

// termAllowance returns the highest term this agent accepts now.
func (a *Agent) termAllowance() uint64 {
	periods := uint64(a.mono() / a.cfg.Heartbeat)
	room := election.MaxTerm - min(a.core.startTerm, election.MaxTerm)
	if periods+1 >= room/MaxTermJump {
		return election.MaxTerm
	}
	return a.core.startTerm + (periods+1)*MaxTermJump
}

// checkTerm refuses a message whose term is above the agent's allowance
// (see MaxTermJump), before the core sees it; it returns the drop reason
// or "".
func (a *Agent) checkTerm(m election.Message) string {
	if m.Term <= a.lease.term.Load() {
		return ""
	}
	limit := a.termAllowance()
	if m.Term <= limit {
		return ""
	}
	if a.core.termJumpLog.Allow("term_jump", a.mono()) {
		a.log.Warn("refusing a term implausibly far above ours", "from", m.From, "type", m.Type.String(),
			"term", m.Term, "own_term", a.lease.term.Load(), "allowed", limit)
	}
	return ReasonTermJump
}

// traceMessage logs an election message at debug level: the exchange of an
// election, read from every member's log, is how a slow one is explained.
// The steady heartbeats and acknowledgements are left out. "out" is logged
// as the message is handed to the bus, which holds back a type the site's
// protocol version does not have yet (wire.Speaks).
func (a *Agent) traceMessage(dir string, m election.Message) {
	if !m.Type.IsElectionTraffic() || !a.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	a.log.Debug("election message "+dir, "type", m.Type.String(), "from", m.From, "to", m.To, "term", m.Term,
		"seq", m.Seq, "granted", m.Granted, "nominee", m.Nominee, "candidate", m.Candidate)
}

func (a *Agent) countRejected(err error) {
	switch {
	case errors.Is(err, election.ErrStaleTerm):
		a.m.badMessage("stale_term")
	case errors.Is(err, election.ErrNotMember):
		a.m.badMessage("not_member")
	case errors.Is(err, election.ErrWrongTarget):
		a.m.badMessage("not_for_me")
	default:
		a.m.badMessage("rejected")
	}
	a.log.Debug("message rejected", "err", err)
}

// shutdown hands leadership over (if held) and stops. It returns the term
// whose handover it announced (0: none, or the RESIGN was withheld).
func (a *Agent) shutdown() (uint64, error) {
	var announced uint64
	if a.core.role == election.Leader {
		a.log.Info("shutting down: handing over leadership")
		a.core.cause = causeShutdown
		term := a.Term()
		a.core.withheld = false
		if err := a.node.Resign(""); err == nil {
			if err := a.process(); err != nil {
				return 0, err
			}
			a.flush()
			if !a.core.withheld {
				announced = term
			}
		}
	}
	a.stopLeading("shutdown")
	return announced, nil
}

// shutdown stops the loop: the leader hands over, and once it announced
// the handover it keeps its connections open until its successor leads
// (awaitSuccessor).
func (s *stepper) shutdown() error {
	a := s.a
	term, err := a.shutdown()
	if err == nil && term != 0 && a.core.resignTo != "" && a.in.bus.FastPath() {
		s.awaitSuccessor(term)
	}
	a.log.Info("agent stopped", "term", a.Term())
	return err
}

// awaitSuccessor waits until a heartbeat of a later term than resigned
// arrives from another member (its successor leads), at most one tick.
// Only then may the bus close.
//
// Closing at once raced the RESIGN: the server reports the closed
// connection on the system account's connection, the RESIGN travels on the
// election connection, and a member that read the report first acted on it
// as on a crash, with the fast path's fence (docs/DESIGN-NOTES.md, Fast
// failover, 6): 6 of 60 SIGTERM handovers in a benchmark, four of its five
// slowest. A report changes nothing at a member that took the RESIGN
// first (it no longer backs this member), which takes about a millisecond;
// the successor's heartbeat shows that a quorum did. The bound is a tick,
// not more: a member that missed the RESIGN (a lost message) keeps
// refusing the nominee until the report releases it.
//
// There is none to wait for when the RESIGN named no nominee (no member
// had acknowledged this leader lately). A bus whose election connection is
// down has nothing to keep open: the wait ends (a host that stops its
// agents as crashes, closing their connections first, does not wait). API
// requests made meanwhile get ErrNotRunning. The core is not stepped
// meanwhile: the agent is leaving, and a member that resigned must neither
// stand nor vote again before it goes. The inputs are read and dropped, as
// they would be once it had gone.
func (s *stepper) awaitSuccessor(resigned uint64) {
	a := s.a
	if !a.in.bus.Connected() {
		return // nothing left open to keep
	}
	t := time.NewTimer(a.cfg.Tick())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.log.Debug("no successor led within a tick of the handover; closing anyway")
			return
		case r := <-a.in.reqs:
			r.reply <- ErrNotRunning // the agent is stopping: no handover or drain now
		case in, ok := <-a.in.queued:
			if !ok || (in.Kind == InputDisconnected && !a.in.bus.Connected()) {
				return
			}
			if m := in.Msg; in.Kind == InputMessage && m != nil && m.Type == election.MsgHeartbeat &&
				m.Term > resigned && m.From != a.cfg.ID {
				a.log.Debug("successor leads; closing", "leader", m.From, "term", m.Term)
				return
			}
		}
	}
}

func (a *Agent) flush() { a.in.bus.Flush(a.cfg.Heartbeat) }

// process applies the core's Ready: persist, then send, then report.
func (a *Agent) process() error {
	now := a.mono()
	a.lease.lastLoopRun.Store(int64(now))
	a.liftQuarantine()
	rd := a.node.Ready()
	if err := a.persistAndSend(rd); err != nil {
		return err
	}
	a.lease.term.Store(rd.Term)
	a.m.term.Set(float64(rd.Term))
	a.core.resignTo = resignNominee(rd.Messages)
	for _, ev := range rd.Events {
		a.report(ev)
	}
	if rd.Role == election.Follower {
		a.m.electionEnded("failed", now) // a candidacy given up for a higher term
	}
	// The snapshot first: a caller that sees IsLeader turn true must not
	// then read a status from before the election.
	// The loop is the snapshot's only writer: it refills it in place and
	// reads it unlocked; readers copy its members under the lock.
	a.status.mu.Lock()
	a.node.StatusInto(&a.status.snapshot)
	st := a.status.snapshot
	a.status.mu.Unlock()
	a.noteShortPromises(st)
	if rd.Role == election.Leader {
		if !a.renewLease(rd, now) {
			if a.judgeLater() {
				return nil
			}
			a.in.judging = false
			// The wall-clock lease ran out before the core noticed (it
			// counts ticks, and a paused process misses ticks): stop
			// acting now, and make the core step down too.
			a.stopLeading("lease expired")
			a.core.role = rd.Role
			a.node.StepDown(election.ReasonLeaseExpired)
			return a.process()
		}
		a.in.judging, a.in.before = false, 0
		if a.core.role != election.Leader {
			a.startLeading(rd.Term)
		} else if a.work.leadDone != nil && a.work.leadCtx.Err() != nil {
			return a.handOverLapsed()
		}
	} else if a.core.role == election.Leader {
		a.stopLeading("lost leadership")
	}
	if rd.Role != election.Leader {
		a.in.judging, a.in.before = false, 0
	}
	a.core.role = rd.Role
	a.reportLeader(rd)
	a.m.quorumLive.Set(float64(st.Live))
	boolGauge(a.m.quorumOK, st.Live >= st.Quorum)
	boolGauge(a.m.natsConnected, a.in.bus.Connected())
	boolGauge(a.m.isLeader, a.IsLeader())
	return nil
}

// persistAndSend persists rd's term and vote and sends its messages, in
// that order unless rd says the messages may go first; leadership that rd
// ends stops before anything leaves.
func (a *Agent) persistAndSend(rd election.Ready) error {
	if rd.SendFirst {
		// A candidate's own request for votes: it leaves now and the
		// persist of its vote for itself runs while the request travels
		// (see election.Ready.SendFirst). The loop steps nothing before
		// the persist has ended, so no vote is counted before then.
		a.sendReady(rd, false)
	}
	if err := a.persist(rd); err != nil {
		return err
	}
	withhold := false // the RESIGN of a handover whose work did not stop
	if a.core.role == election.Leader && rd.Role != election.Leader {
		// Leadership ends before anything of this Ready leaves: a message
		// that follows from it (a RESIGN, a COORDINATOR for a new term) may
		// make a member vote for someone else.
		if hasResign(rd.Messages) {
			withhold = !a.release("handing over") // see release
		} else {
			a.stopLeading("lost leadership")
		}
	}
	a.core.withheld = a.core.withheld || withhold
	if !rd.SendFirst {
		a.sendReady(rd, withhold)
	}
	return a.settle(rd)
}

// persist stores the term and vote of rd, if they changed, before anything
// of rd leaves.
func (a *Agent) persist(rd election.Ready) error {
	if !rd.HardStateChanged || rd.HardState == a.core.lastHS {
		return nil
	}
	start := a.mono()
	if err := a.store.Save(rd.HardState); err != nil {
		a.m.persistErrors.Inc()
		a.log.Error("cannot persist term and vote; leaving the election", "err", err)
		return fmt.Errorf("agent: persist state: %w", err)
	}
	took := a.mono() - start
	a.m.persistSeconds.Observe(took.Seconds())
	a.log.Debug("term and vote persisted", "term", rd.HardState.Term, "voted_for", rd.HardState.VotedFor, "took", took)
	a.core.lastHS = rd.HardState
	a.out.journal.write(JournalEntry{Event: "state", Term: rd.HardState.Term, VotedFor: rd.HardState.VotedFor})
	return nil
}

// settler is a Store whose Save returns once the state is durable but
// leaves part of its work (FileStore: the second copy) for Settle, which the
// agent calls once the messages that depend on the save are sent: that work
// then overlaps their flight and the receivers' own persists.
type settler interface{ Settle() error }

// settle completes the save of rd's term and vote, if the store left part
// of it for later (see settler).
func (a *Agent) settle(rd election.Ready) error {
	st, ok := a.store.(settler)
	if !ok || !rd.HardStateChanged {
		return nil
	}
	if err := st.Settle(); err != nil {
		a.m.persistErrors.Inc()
		a.log.Error("cannot persist term and vote; leaving the election", "err", err)
		return fmt.Errorf("agent: persist state: %w", err)
	}
	return nil
}

// sendReady sends rd's messages (less a withheld RESIGN, see release),
// dating heartbeats and COORDINATORs for the lease.
func (a *Agent) sendReady(rd election.Ready, withhold bool) {
	// Date heartbeats after the fsync, just before they leave: a slow disk
	// must not eat into the lease they start.
	sendAt := a.mono()
	for _, m := range rd.Messages {
		if withhold && m.Type == election.MsgResign {
			continue
		}
		if a.maint.quarantined.Load() && !keepDuringQuarantine(m) {
			continue // another process speaks with this id: no vote, no acknowledgement
		}
		if m.Type == election.MsgHeartbeat || m.Type == election.MsgCoordinator {
			// Dated by its first send: a repeated COORDINATOR (a lossy link)
			// must not move the lease its votes start later than the
			// voters' own clocks allow.
			if _, ok := a.core.sentAt[m.Seq]; !ok {
				a.core.sentAt[m.Seq] = sendAt
			}
		}
		m.Fence, m.FenceConn = a.fenceLeft(m, sendAt)
		m.NoFence = m.Type == election.MsgHeartbeat && a.fast.noFence
		a.traceMessage("out", m)
		if err := a.in.bus.Send(m); err != nil {
			a.log.Debug("send failed", "type", m.Type, "err", err)
		}
	}
}

// judgeLater reports whether the verdict on a lease found run out waits:
// the inputs that had arrived when it was first found so are stepped
// first (the loop takes queued inputs before anything else), and an
// acknowledgement among them may renew it, however late the loop ran.
// The lease derives from the send time of the heartbeat a quorum
// acknowledged, not from when the loop reads the acknowledgement, so one
// read late still proves it. Meanwhile IsLeader already says no (the lease
// end has passed). The wait is bounded: only what had arrived by then,
// and for at most a tick, after which the leader stops acting whatever is
// left.
func (a *Agent) judgeLater() bool {
	if !a.in.judging {
		a.in.judging, a.in.before, a.in.judgeBy = true, len(a.in.queued), a.mono()+a.cfg.Tick()
	}
	return a.in.before > 0 && a.mono() < a.in.judgeBy
}

// renewLease sets the lease of a leader's Ready rd: it runs from the send
// time of the newest heartbeat a quorum acknowledged. It reports false when
// that lease has already run out.
func (a *Agent) renewLease(rd election.Ready, now time.Duration) bool {
	// The lease may also fall back to an older heartbeat (a member's
	// acknowledgements stopped counting): a seq whose send time is
	// forgotten dates no lease at all.
	var end time.Duration
	if at, ok := a.core.sentAt[rd.LeaseSeq]; ok {
		l := wallLease(a.cfg, rd.LeaseTicks)
		end = at + l
		a.lease.leaseLen.Store(int64(l))
	}
	if a.lease.leading.Load() && int64(end) > a.lease.leaseEnd.Load() {
		a.out.journal.write(JournalEntry{Event: "renew", Term: rd.Term, Until: a.wallUntil(end)})
	}
	a.lease.leaseEnd.Store(int64(end))
	for s, at := range a.core.sentAt {
		if s != rd.LeaseSeq && now-at >= a.cfg.Lease {
			delete(a.core.sentAt, s) // too old to date a lease
		}
	}
	if int64(a.mono()) >= a.lease.leaseEnd.Load() {
		a.log.Debug("wall-clock lease expired", "lease_seq", rd.LeaseSeq, "lease_end", time.Duration(a.lease.leaseEnd.Load()), "now", now, "sent", len(a.core.sentAt))
		return false
	}
	return true
}

// noteShortPromises warns, while this member leads, of each member whose
// promised D became too short for this member's lease (and so shortens
// it): the lease is safe, but shorter than configured, and the gateways'
// timings differ, which only a change under way should explain.
func (a *Agent) noteShortPromises(st election.Status) {
	var short []string
	for _, m := range st.Members {
		if m.ShortensLease && st.Role == election.Leader {
			short = append(short, m.ID)
			if !slices.Contains(a.status.short, m.ID) {
				a.log.Warn("a member's D is too short for this leader's lease; its acknowledgements back a shorter lease",
					"member", m.ID, "promised_d", time.Duration(m.Promise)*a.cfg.Tick(), "lease", a.cfg.Lease, "heartbeat", a.cfg.Heartbeat,
					"hint", "give every gateway the same heartbeat and heartbeat_misses (deploy/arm64/README.md, changing the timings of a running site)")
			}
		}
	}
	a.status.short = short
	a.m.shortLease.Set(float64(len(short)))
}

// wallLease is the wall-clock lease for a core lease of ticks: the
// configured lease, or, when a member's promise shortened the core's lease
// (election.Ready.LeaseTicks below Config.LeaseTicks), one tick less than
// the core's, as Config.LeaseTicks is one tick more than the configured
// lease: the agent never says it leads past what its core counts.
func wallLease(c Config, ticks int) time.Duration {
	return min(c.Lease, time.Duration(ticks-1)*c.Tick())
}

// reportLeader tells callbacks, watchers, metrics and the log about a new
// leader in rd.
func (a *Agent) reportLeader(rd election.Ready) {
	if rd.Leader == a.core.leader {
		return
	}
	old := a.core.leader
	a.core.leader = rd.Leader
	a.lease.leaderID.Store(rd.Leader)
	a.m.leaderChanges.Inc()
	a.m.setLeader(old, rd.Leader)
	a.log.Info("leader changed", "leader", rd.Leader, "previous", old, "term", rd.Term)
	a.out.history.add(LeaderChangeRecord{Time: time.Now().UTC(), Term: rd.Term, Leader: rd.Leader, Previous: old,
		Reason: changeReason(a.cfg.ID, old, rd.Leader, rd.Events)})
	if rd.Leader != "" {
		a.core.failLog.reset() // the next outage's first failure is logged at once
	}
	if a.out.cb.OnNewLeader != nil {
		id, term := rd.Leader, rd.Term
		a.out.notify.push(func() { a.out.cb.OnNewLeader(id, term) })
	}
	a.out.watchers.publish(a.leaderChange(old, rd.Leader, rd.Term))
}

func (a *Agent) report(ev election.Event) {
	switch ev.Kind {
	case election.EventElectionStarted:
		a.m.electionStarted(a.mono())
		a.log.Info("standing for election", "term", ev.Term)
	case election.EventElectionWon:
		a.m.electionEnded("won", a.mono())
		a.m.elections.WithLabelValues("won").Inc()
		a.log.Info("elected leader", "term", ev.Term)
	case election.EventElectionFailed:
		a.m.electionEnded("failed", a.mono())
		a.m.elections.WithLabelValues("failed").Inc()
		if ok, n := a.core.failLog.allow(ev.Reason.String(), a.mono()); !ok {
			a.log.Debug("election failed", "term", ev.Term, "reason", ev.Reason.String())
		} else if n > 0 {
			a.log.Info("election failed", "term", ev.Term, "reason", ev.Reason.String(), "suppressed", n)
		} else {
			a.log.Info("election failed", "term", ev.Term, "reason", ev.Reason.String())
		}
	case election.EventSteppedDown:
		label := ev.Reason.Label()
		if a.core.cause == causeLapsed {
			label = election.ReasonLeaseExpired.Label() // a handover, but because the lease ran out
		}
		a.m.stepDowns.WithLabelValues(label).Inc()
		if isHandover(ev.Reason) {
			a.log.Info("stepped down", "term", ev.Term, "reason", handoverWords(ev.Reason, a.core.resignTo, a.core.cause), "peer", a.core.resignTo)
		} else {
			a.log.Warn("stepped down", "term", ev.Term, "reason", ev.Reason.String(), "peer", ev.Peer)
		}
	case election.EventStaleTerm:
		a.m.badMessage("stale_term") // answered with the current term
	case election.EventVoteRefused:
		a.log.Debug("vote refused", "to", ev.Peer, "reason", ev.Reason.String(), "term", ev.Term)
	}
}

func (a *Agent) startLeading(term uint64) {
	a.lease.actAfter.Store(int64(a.fenceUntil()))
	a.lease.leading.Store(true)
	a.m.isLeader.Set(1)
	a.out.journal.write(JournalEntry{Event: "lead", Term: term, Until: a.wallUntil(time.Duration(a.lease.leaseEnd.Load()))})
	ctx, cancel := context.WithCancel(context.Background())
	a.work.leadCtx, a.work.leadCancel = ctx, cancel
	go a.leaseGuard(ctx, cancel)
	a.work.leadDone = a.startLeaderWork(ctx, term)
}

// leaseGuard cancels the leading context when the lease runs out, even if
// the election loop is stuck and cannot notice: what runs under the context
// never outlives the lease.
func (a *Agent) leaseGuard(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		rem := time.Duration(a.lease.leaseEnd.Load()) - a.mono()
		if rem <= 0 || !a.lease.leading.Load() {
			cancel()
			return
		}
		t.Reset(rem)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stopLeading ends leadership on this side at once: IsLeader turns false and
// the leading context is cancelled before anything else happens.
func (a *Agent) stopLeading(why string) {
	if !a.lease.leading.Swap(false) {
		return
	}
	a.lease.leaseEnd.Store(0)
	a.m.isLeader.Set(0)
	if a.work.leadCancel != nil {
		a.work.leadCancel()
		a.work.leadCancel = nil
	}
	a.out.journal.write(JournalEntry{Event: "stop", Term: a.Term(), Reason: why})
	a.log.Info("stopped leading", "reason", why, "term", a.Term())
	if a.out.cb.OnStoppedLeading != nil {
		a.out.notify.push(a.out.cb.OnStoppedLeading)
	}
}

// Status reports the agent's view, with the lease checked at call time.
func (a *Agent) Status() StatusReport {
	a.status.mu.Lock()
	st := a.status.snapshot
	st.Members = slices.Clone(st.Members) // the loop refills the snapshot in place
	a.status.mu.Unlock()
	role := st.Role.String()
	leading := a.IsLeader()
	switch {
	case leading:
		role = election.Leader.String()
	case st.Role == election.Leader:
		role = election.Follower.String()
	}
	r := StatusReport{
		ID: a.cfg.ID, Group: a.cfg.Group, Algorithm: a.cfg.Algorithm,
		Role: role, Leader: a.Leader(), Term: a.Term(),
		Quorum:           QuorumReport{Size: st.Quorum, Live: st.Live, OK: st.Live >= st.Quorum},
		IslandMode:       a.cfg.IslandMode,
		LeaseRemainingMS: a.LeaseRemaining().Milliseconds(),
		NATSConnected:    a.in.bus.Connected(),
		Version:          a.out.version,
		Time:             time.Now().UTC(),
	}
	r.AlgorithmMismatch = a.core.algGuard.mismatches(time.Now())
	r.LeaderChanges = a.out.history.list()
	r.Duty = a.work.dutyState.report(a.work.duty != nil)
	a.maintenanceStatus(&r)
	tick := a.cfg.Tick()
	for _, m := range st.Members {
		mr := MemberReport{ID: m.ID, Priority: m.Priority, Alive: m.Alive, LastSeenMS: -1, Drained: m.Drained, Witness: m.Witness}
		if m.TicksSinceSeen >= 0 {
			mr.LastSeenMS = (time.Duration(m.TicksSinceSeen) * tick).Milliseconds()
		}
		if m.Promise > 0 && st.Role == election.Leader {
			mr.PromiseMS, mr.ShortensLease = (time.Duration(m.Promise) * tick).Milliseconds(), m.ShortensLease
		}
		r.Members = append(r.Members, mr)
	}
	r.VIP = a.vipReport()
	a.protocolReport(&r)
	return r
}

// notifier runs callbacks one at a time, in order, off the election loop,
// on a goroutine that runs only while callbacks wait: a witness process
// serving a thousand groups would otherwise park one per group.
type notifier struct {
	mu      sync.Mutex
	idle    *sync.Cond // signalled when the goroutine stops
	queue   []func()
	running bool
	closed  bool
}

func newNotifier() *notifier {
	n := &notifier{}
	n.idle = sync.NewCond(&n.mu)
	return n
}

// push queues f; after close it is dropped.
func (n *notifier) push(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.queue = append(n.queue, f)
	if !n.running {
		n.running = true
		go n.drain()
	}
}

func (n *notifier) drain() {
	for {
		n.mu.Lock()
		if len(n.queue) == 0 {
			n.running = false
			n.idle.Broadcast()
			n.mu.Unlock()
			return
		}
		f := n.queue[0]
		n.queue[0] = nil
		n.queue = n.queue[1:]
		n.mu.Unlock()
		f()
	}
}

// close runs what is queued, then stops.
func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for n.running {
		n.idle.Wait()
	}
}
