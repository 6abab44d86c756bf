package safety

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Fault is one kind of fault the checker injects.
type Fault uint32

// The fault kinds. AllFaults enables every one.
const (
	FaultDrop      Fault = 1 << iota // messages lost
	FaultDuplicate                   // messages delivered twice
	FaultReorder                     // messages delivered out of order
	FaultDelay                       // messages held for long, beyond the lease
	FaultCrash                       // crash (state lost but what was persisted) and restart
	FaultFreeze                      // a process frozen (SIGSTOP) and resumed
	FaultPartition                   // links cut one way or both, partitions, heals
	FaultAdvisory                    // connections closed, advisories delivered late or to some members only
	FaultRoute                       // routes closed (an offline site's clustered servers), one-sided after long cuts
	FaultResign                      // resign and transfer at random moments
	FaultSkew                        // members' clocks run at different rates, within the configured margin

	AllFaults = FaultDrop | FaultDuplicate | FaultReorder | FaultDelay | FaultCrash | FaultFreeze |
		FaultPartition | FaultAdvisory | FaultRoute | FaultResign | FaultSkew
)

var faultNames = []string{"drop", "duplicate", "reorder", "delay", "crash", "freeze", "partition",
	"advisory", "route", "resign", "skew"}

func (f Fault) String() string {
	var out []string
	for i, n := range faultNames {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// MaxSkew is the largest clock rate difference the checker gives a member
// (either way). The core's margin, LeaseTicks + HeartbeatTicks <
// ElectionTicks, tolerates a lease that runs at most (D-1)/LeaseTicks times
// as long as a voter's D: 29/19 with BaseConfig, so the members' rates may
// differ by about 20% before that margin is spent; real clocks differ by
// parts per million.
const MaxSkew = 0.05

// RunConfig is one randomized run: a fresh site driven by a seeded
// adversary for a number of steps.
type RunConfig struct {
	N         int
	Algorithm string
	Faults    Fault
	Seed      uint64
	// Steps is the run's budget of events (every delivery, tick and fault
	// counts one).
	Steps int64
	// Liveness is the bound, in ticks, within which the site must agree on
	// one leader once the faults stop; 0 picks DefaultLiveness.
	Liveness int
	// Witnesses lets the seed make some sites witness sites: a third of
	// them get witnesses, from one up to (N-1)/2 (see witnessesOf). Off,
	// a seed gives the run it gave before witnesses existed.
	Witnesses bool
	// Swarm lets the seed turn fault kinds off for the whole run (see
	// SwarmFaults): Faults is then the most a run may use. Off, a seed
	// gives the run it gave before.
	Swarm bool
	// Timing lets the seed give a third of the sites other timings than
	// BaseConfig's, any an agent's config accepts (see timingOf). Off, a
	// seed gives the run it gave before.
	Timing bool
	// Mixed lets a timing run's seed give its members different D and
	// answer timeouts, as in a timing change made one gateway at a time
	// (see timingOf). Off, a seed gives the run it gave before.
	Mixed bool
	// Drift lets half of a mixed site's seeds give each member a lease of
	// its own, checked against its own D only, as each gateway's config is:
	// a lease may then be longer than another member's D allows (see
	// election.Message.Promise). Off, a seed gives the run it gave before.
	Drift bool
	// Replay lets a third of the duplicate faults send again a message
	// delivered long before (one of the last ReplayWindow delivered), not
	// one still in flight: a late duplicate, or a repeat that a sender's
	// buffer held while the world moved on. Off, a seed gives the run it
	// gave before.
	Replay bool
}

// Timing is a site's timing in ticks, as timingOf draws it; zero fields
// keep BaseConfig's (and the checker's answer timeout and hold-down).
// Longer and Answers, when set, give each member (by id) a D of
// ElectionTicks plus Longer[id] and an answer timeout of Answers[id]: a site
// in the middle of a timing change made as deploy/arm64/README.md says (D
// grown on some gateways before any lease), every lease below every D.
// Leases, when set, gives each member a lease of its own, below its own D
// only: a timing change made in any order.
type Timing struct {
	ElectionTicks, LeaseTicks, AnswerTicks, RingHopTicks, HoldDownTicks, Quorum int
	Longer, Answers, Leases                                                     map[string]int
}

// timingOf draws a timing from r for a site of n members, among those an
// agent accepts (agent.Config's rules at TicksPerHeartbeat = 10): D of 3, 4,
// 5 or 8 heartbeat periods; a lease from just over H to the longest that
// keeps L + H below D; an answer timeout of one tick up to D; a Ring hop
// timeout left to its default or up to the answer timeout; a hold-down of
// up to 15 H; for a third of the sites a quorum above a majority, up to
// every member; and with mixed, for a third of them a site mid-change,
// whose members' D and answer timeouts differ (Timing.Longer), and with
// drift, for half of those, leases that differ too, each below its own
// member's D only (Timing.Leases). The
// checker's runs otherwise all have D = 3H, the longest lease and a
// majority, and a rule that holds only there (a margin, a wait that fits
// inside another) would go unseen.
func timingOf(r *rand.Rand, n int, mixed, drift bool) Timing {
	const h = 10
	d := h * []int{3, 3, 4, 5, 8}[r.IntN(5)]
	t := Timing{ElectionTicks: d}
	t.LeaseTicks = h + 1 + r.IntN(d-2*h-1) // h+1 .. d-h-1
	t.AnswerTicks = 1 + r.IntN(d)
	if r.IntN(2) == 0 {
		t.RingHopTicks = 1 + r.IntN(t.AnswerTicks)
	}
	t.HoldDownTicks = 1 + r.IntN(15*h)
	if maj := election.Majority(n); maj < n && r.IntN(3) == 0 {
		t.Quorum = maj + 1 + r.IntN(n-maj)
	}
	if mixed && r.IntN(3) == 0 {
		t.Longer, t.Answers = map[string]int{}, map[string]int{}
		for i := range n {
			id, longer := fmt.Sprintf("n%d", i+1), 0
			if r.IntN(2) == 0 {
				longer = h * (1 + r.IntN(5))
			}
			t.Longer[id], t.Answers[id] = longer, 1+r.IntN(d+longer)
		}
		if drift && r.IntN(2) == 0 {
			// One member's D and lease were raised, alone (the highest
			// rank, the usual leader, half the time); every member's
			// lease is its config's longest, or any its config accepts.
			long := fmt.Sprintf("n%d", n)
			if r.IntN(2) == 0 {
				long = fmt.Sprintf("n%d", 1+r.IntN(n))
			}
			if t.Longer[long] == 0 {
				t.Longer[long] = h * (1 + r.IntN(5))
			}
			t.Leases = map[string]int{}
			for i := range n {
				id := fmt.Sprintf("n%d", i+1)
				most := d + t.Longer[id] - h - 1
				t.Leases[id] = most
				if id != long && r.IntN(2) == 0 {
					t.Leases[id] = h + 1 + r.IntN(most-h)
				}
			}
		}
	}
	return t
}

// maxElection is the longest D of the site.
func (t Timing) maxElection() int {
	longest := 0
	for _, l := range t.Longer {
		longest = max(longest, l)
	}
	return t.ElectionTicks + longest
}

// liveness is the bound for a site with timing t: DefaultLiveness scaled
// to its D and answer timeout (the waits DefaultLiveness adds up are a few
// D and a few answer timeouts).
func (t Timing) liveness() int {
	answer := t.AnswerTicks
	for _, a := range t.Answers {
		answer = max(answer, a)
	}
	return max(DefaultLiveness, 13*t.maxElection()+6*answer)
}

func (t Timing) apply(cfg *election.Config) {
	cfg.ElectionTicks, cfg.LeaseTicks, cfg.AnswerTicks = t.ElectionTicks, t.LeaseTicks, t.AnswerTicks
	cfg.RingHopTicks, cfg.HoldDownTicks, cfg.Quorum = t.RingHopTicks, t.HoldDownTicks, t.Quorum
	if a, ok := t.Answers[cfg.ID]; ok {
		cfg.ElectionTicks += t.Longer[cfg.ID]
		cfg.AnswerTicks = a
		cfg.RingHopTicks = min(cfg.RingHopTicks, a)
	}
	if l, ok := t.Leases[cfg.ID]; ok {
		cfg.LeaseTicks = l
	}
}

// SwarmFaults returns the fault kinds a swarm run of the seed uses: each
// kind of faults kept or left out by a coin of the seed, at least one kept.
//
// Every fault kind on in every run makes some interleavings rare: a long
// chain of crashes and restarts is cut short by a partition, a drop or a
// resign that the same event table draws far more often. Leaving random
// kinds out for a whole run ("swarm testing", Groce et al., ISSTA 2012)
// lets the others run long chains; the checker alternates swarm runs with
// runs of every kind, so that no mix goes untried.
func SwarmFaults(seed uint64, faults Fault) Fault {
	r := rand.New(rand.NewPCG(seed, 3))
	var kinds []Fault
	for i := range faultNames {
		if f := Fault(1) << i; faults&f != 0 {
			kinds = append(kinds, f)
		}
	}
	if len(kinds) == 0 {
		return 0
	}
	var out Fault
	for _, f := range kinds {
		if r.IntN(2) == 0 {
			out |= f
		}
	}
	if out == 0 {
		out = kinds[r.IntN(len(kinds))]
	}
	return out
}

// faults returns the fault kinds rc's run uses.
func (rc RunConfig) faults() Fault {
	if rc.Swarm {
		return SwarmFaults(rc.Seed, rc.Faults)
	}
	return rc.Faults
}

// witnessesOf returns the witnesses the seed gives a site of n members: none
// for two seeds in three, else 1..(n-1)/2 members chosen at random (n = 3:
// a two-gateway site's witness; n = 5: up to two). At least one member is
// never a witness; the quiet phase keeps one such member undrained.
func witnessesOf(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 2))
	if r.IntN(3) != 0 || n < 3 {
		return nil
	}
	k := 1 + r.IntN((n-1)/2)
	var out []string
	for _, i := range r.Perm(n)[:k] {
		out = append(out, fmt.Sprintf("n%d", i+1))
	}
	return out
}

// DefaultLiveness is the bound used when RunConfig.Liveness is 0: members
// that acknowledged a leader just before the faults stopped wait D (30)
// before they vote; a member whose elections failed may back off up to 40
// ticks; a pre-vote that fails is retried after D; an election round waits
// at most a few answer timeouts (10 each) and a Ring round one hop timeout
// per member; a member that just restarted waits D.
const DefaultLiveness = 400

// Outcome is what a run found.
type Outcome struct {
	Steps     int64
	Quiet     int // quiet periods that ended with one leader
	Violation string
	Liveness  string
	// Worst is the longest wait, in ticks, for one leader after faults stopped.
	Worst int
	// Choices is how many of the adversary's choices the run used: a
	// failing run needs no more to fail again.
	Choices int
	// Phases holds where each chaos phase starts in the choices.
	Phases []int
}

// Failed reports whether the run found a problem.
func (o Outcome) Failed() bool { return o.Violation != "" || o.Liveness != "" }

// chooser is the adversary's source of choices. Recorded, a run can be
// replayed exactly; replayed from an edited list, it can be shrunk.
type chooser struct {
	rng    *rand.Rand // nil: a replay
	rec    []uint32
	replay []uint32
	pos    int
	done   bool // a replay ran out of choices
}

func (c *chooser) next() uint32 {
	if c.rng == nil { // a replay, of as many choices as were kept (maybe none)
		if c.pos >= len(c.replay) {
			c.done = true
			return 0
		}
		v := c.replay[c.pos]
		c.pos++
		return v
	}
	v := c.rng.Uint32()
	c.rec = append(c.rec, v)
	return v
}

func (c *chooser) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(c.next() % uint32(n))
}

type violation struct{ msg string }

// Run performs one randomized run.
func Run(rc RunConfig) Outcome {
	c := &chooser{rng: rand.New(rand.NewPCG(rc.Seed, rc.Seed^0x9e3779b97f4a7c15))}
	return run(rc, c, nil)
}

// run drives a site with choices from c. With trace set, every event is
// written to it.
func run(rc RunConfig, c *chooser, trace func(string)) (out Outcome) {
	if rc.Liveness == 0 {
		rc.Liveness = DefaultLiveness
	}
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(violation)
			if !ok {
				panic(r)
			}
			out.Violation = v.msg
		}
		out.Choices = len(c.rec) + c.pos
	}()
	faults := rc.faults()
	has := func(f Fault) bool { return faults&f != 0 }
	// The site's settings come from the seed alone, not from the choices,
	// so that a shrunk run keeps them.
	site := rand.New(rand.NewPCG(rc.Seed, 1))
	var skew []float64
	if has(FaultSkew) {
		for i := 0; i < rc.N; i++ {
			skew = append(skew, MaxSkew*float64(site.IntN(2001)-1000)/1000)
		}
	}
	pre := election.Preemption(site.IntN(3))
	answer := 5 + site.IntN(16) // 5..20 ticks
	routes := has(FaultRoute) && site.IntN(2) == 0
	// Drawn after the settings above, so that a run without it is the run
	// its seed gave before.
	var timing *Timing
	if rc.Timing && site.IntN(3) == 0 {
		t := timingOf(site, rc.N, rc.Mixed, rc.Drift)
		timing = &t
		rc.Liveness = max(rc.Liveness, t.liveness())
	}
	var witnesses []string
	if rc.Witnesses {
		witnesses = witnessesOf(rc.Seed, rc.N)
	}
	w := New(Options{
		N: rc.N, Algorithm: rc.Algorithm, Skew: skew, Routes: routes, Witnesses: witnesses, Trace: trace,
		Tweak: func(cfg *election.Config) {
			cfg.Preemption = pre
			cfg.AnswerTicks = answer
			cfg.HoldDownTicks = 40
			if timing != nil {
				timing.apply(cfg)
			}
		},
		Fail: func(msg string) { panic(violation{msg}) },
	})
	if trace != nil {
		tm := "base"
		if timing != nil {
			tm = fmt.Sprintf("%+v", *timing)
		}
		trace(fmt.Sprintf("site: n=%d %s faults=%s preemption=%d answer=%d routes=%v skew=%v witnesses=%v timing=%s", rc.N, rc.Algorithm, faults, pre, answer, routes, skew, witnesses, tm))
	}
	a := &adversary{w: w, c: c, has: has, routes: routes, trace: trace, replay: rc.Replay}
	for w.Steps < rc.Steps && !c.done {
		out.Phases = append(out.Phases, len(c.rec)+c.pos)
		k := 200 + c.intn(3000)
		c.next() // phases take four choices, as events do
		c.next()
		c.next()
		a.chaos(k)
		if c.done {
			break
		}
		took, ok := a.quiet(rc.Liveness)
		if c.done {
			break
		}
		if !ok {
			out.Liveness = fmt.Sprintf("no single leader %d ticks after the faults stopped: %s", rc.Liveness, w.Describe())
			break
		}
		out.Quiet++
		out.Worst = max(out.Worst, took)
	}
	out.Steps = w.Steps
	return out
}

type adversary struct {
	w      *World
	c      *chooser
	has    func(Fault) bool
	routes bool
	replay bool // RunConfig.Replay
	trace  func(string)
}

// chaos runs k events with faults. Every event reads exactly four choices
// (its kind and three arguments), so that removing one event from a recorded
// run leaves the meaning of the others as it was: that is what makes
// shrinking work.
func (a *adversary) chaos(k int) {
	w, c := a.w, a.c
	ids := w.IDs()
	for i := 0; i < k && !c.done; i++ {
		r, x, y, z := c.intn(1000), int(c.next()), int(c.next()), int(c.next())
		if c.done {
			return
		}
		pick := func(v int) string { return ids[v%len(ids)] }
		pickMsg := func(v int) *Msg { return w.Flight[v%len(w.Flight)] }
		switch {
		case r < 380:
			w.Advance(int64(1 + x%TickUnits))
		case r < 780:
			a.deliverOne(x, y)
		case r < 800:
			if a.has(FaultDrop) && len(w.Flight) > 0 {
				w.Drop(pickMsg(x))
			}
		case r < 815:
			switch {
			case !a.has(FaultDuplicate):
			case a.replay && z%3 == 0:
				w.Replay(y)
			case len(w.Flight) > 0:
				w.Deliver(pickMsg(x), true)
			}
		case r < 825:
			if a.has(FaultCrash) {
				w.Crash(pick(x))
			}
		case r < 845:
			if a.has(FaultCrash) {
				w.Restart(pick(x))
			}
		case r < 853:
			if a.has(FaultFreeze) {
				w.Freeze(pick(x))
			}
		case r < 870:
			if a.has(FaultFreeze) {
				w.Thaw(pick(x))
			}
		case r < 885:
			if a.has(FaultPartition) && pick(x) != pick(y) {
				w.Cut(pick(x), pick(y))
				if z%2 == 0 {
					w.Cut(pick(y), pick(x))
				}
			}
		case r < 900:
			if a.has(FaultPartition) {
				w.HealLink(pick(x), pick(y))
			}
		case r < 904:
			if a.has(FaultPartition) {
				// Bit i of x puts member i on one side.
				for i, p := range ids {
					for j, q := range ids {
						if (x>>i)&1 == 1 && (x>>j)&1 == 0 {
							w.Cut(p, q)
							w.Cut(q, p)
						}
					}
				}
			}
		case r < 912:
			if a.has(FaultPartition) {
				w.Heal()
			}
		case r < 935:
			if a.has(FaultAdvisory) && len(w.Advisories) > 0 {
				w.Report(pick(y), w.Advisories[x%len(w.Advisories)])
			}
		case r < 940:
			if a.has(FaultAdvisory) && len(w.Advisories) > 0 {
				j := x % len(w.Advisories)
				w.Advisories = append(w.Advisories[:j], w.Advisories[j+1:]...)
			}
		case r < 948:
			if a.has(FaultAdvisory) {
				w.Disconnect(pick(x))
			}
		case r < 958:
			if a.routes && pick(x) != pick(y) {
				p, q := pick(x), pick(y)
				// A live route closes at both ends at once when both
				// servers run; it closes from one side only after its
				// pings failed for long: the ends were silent to each
				// other (cut both ways, or one of them frozen) for more
				// than D.
				long := float64(w.SilentFor(p, q)) > float64(w.Config(p).ElectionTicks*TickUnits)*(1+2*MaxSkew)
				// Some messages had crossed the route already and wait
				// in their receiver's queue (bit i of z/2 keeps the i-th).
				k := 0
				queued := func(*Msg) bool { k++; return (z/2)>>(k%30)&1 == 1 }
				switch {
				case long && !w.Frozen(p) && z%2 == 0:
					w.RouteDown(p, q, true, queued)
				case !w.Frozen(p) && !w.Frozen(q):
					w.RouteDown(p, q, false, queued)
				}
			}
		case r < 975:
			if a.routes && pick(x) != pick(y) && w.Up(pick(x)) && w.Up(pick(y)) {
				w.RouteUp(pick(x), pick(y))
			}
		case r < 980:
			if a.routes && pick(x) != pick(y) {
				w.ReportRoute(pick(x), pick(y))
			}
		case r < 995:
			if a.has(FaultResign) {
				if z%4 == 0 {
					// Drain or undrain a member (the leader at times).
					id := pick(x)
					w.Drain(id, !w.Drained(id))
				} else {
					a.resign(x, y, z)
				}
			}
		default:
			if a.has(FaultDelay) {
				// The network pauses: time passes with nothing delivered.
				w.Advance(int64(x % (40 * TickUnits)))
			}
		}
	}
}

// deliverOne delivers a message: mostly the oldest (the network keeps
// order), with reordering and long holds when those faults are on.
func (a *adversary) deliverOne(x, y int) {
	w := a.w
	if len(w.Flight) == 0 {
		return
	}
	j := 0
	switch {
	case a.has(FaultDelay) && x%10 == 0:
		j = y % len(w.Flight)
	case a.has(FaultReorder):
		j = y % min(len(w.Flight), 4)
	}
	f := w.Flight[j]
	if w.Frozen(f.To) {
		return
	}
	w.Deliver(f, false)
}

func (a *adversary) resign(x, y, z int) {
	w := a.w
	ids := w.IDs()
	leader := ""
	for _, id := range ids {
		if w.Role(id) == election.Leader {
			leader = id
		}
	}
	if leader == "" || x%10 == 0 {
		leader = ids[y%len(ids)]
	}
	nominee := ""
	if z%10 < 6 {
		nominee = ids[(z/10)%len(ids)]
	}
	if nominee == leader {
		nominee = ""
	}
	_ = w.Resign(leader, nominee)
}

// quiet ends the faults: every member runs, every link and route is whole,
// held messages and pending reports arrive, and from then on messages are
// delivered in order within a tick. It returns how many ticks the site took
// to agree on one leader, and false if it did not within limit.
func (a *adversary) quiet(limit int) (int, bool) {
	w, c := a.w, a.c
	ids := w.IDs()
	if a.trace != nil {
		a.trace("--- quiet: every member runs, links and routes whole, reports delivered")
	}
	// Drained members stay drained, but with every member that may lead
	// (every one but the witnesses) drained no one may lead: the operator
	// undrains the highest of them. Undrained, a witness would still not
	// lead.
	all, top := true, ""
	for _, id := range ids {
		if !w.Witness(id) {
			all = all && w.Drained(id)
			top = id
		}
	}
	if all {
		w.Drain(top, false)
	}
	for _, id := range ids {
		w.Thaw(id)
		if !w.Up(id) {
			w.Restart(id)
		}
	}
	w.Heal()
	for _, x := range ids {
		for _, y := range ids {
			if x < y {
				w.RouteUp(x, y)
			}
		}
	}
	for _, adv := range w.Advisories {
		for _, id := range ids {
			w.Report(id, adv)
		}
	}
	w.Advisories = nil
	for t := 0; t <= limit*2; t++ {
		if c.done {
			return 0, true
		}
		if _, ok := w.Agreed(); ok {
			return t / 2, true
		}
		w.DeliverAll(nil)
		w.Advance(TickUnits / 2)
	}
	return limit, false
}

// Replay runs rc again from the recorded choices, writing every event to
// trace; it returns what the replay found.
func replay(rc RunConfig, choices []uint32, trace func(string)) Outcome {
	c := &chooser{replay: choices}
	return run(rc, c, trace)
}

// Record runs rc and returns its outcome and the choices it made.
func Record(rc RunConfig) (Outcome, []uint32) {
	c := &chooser{rng: rand.New(rand.NewPCG(rc.Seed, rc.Seed^0x9e3779b97f4a7c15))}
	out := run(rc, c, nil)
	return out, c.rec
}

// Shrink looks for a shorter list of choices that still fails the way out
// did (a violation, or a liveness failure), removing chunks of choices and
// keeping every removal that still fails, for at most budget. It returns the
// shortest list found and its trace.
func Shrink(rc RunConfig, choices []uint32, out Outcome, budget time.Duration) ([]uint32, []string) {
	deadline := time.Now().Add(budget)
	fails := func(cs []uint32) bool {
		o := replay(rc, cs, nil)
		if out.Violation != "" {
			return o.Violation != ""
		}
		return o.Liveness != ""
	}
	cur := append([]uint32(nil), choices[:min(len(choices), out.Choices)]...)
	// Whole phases first, from the earliest: most of a long run is history
	// that the failure does not need.
	removed := 0
	for p := 0; p+1 < len(out.Phases) && time.Now().Before(deadline); p++ {
		from, n := out.Phases[p]-removed, out.Phases[p+1]-out.Phases[p]
		if from < 0 || from+n > len(cur) {
			break
		}
		cand := append(append([]uint32(nil), cur[:from]...), cur[from+n:]...)
		if fails(cand) {
			cur = cand
			removed += n
		}
	}
	for size := len(cur) / 2; size >= 1 && time.Now().Before(deadline); size /= 2 {
		if size > 4 {
			size -= size % 4 // whole events first
		}
		for i := 0; i+size <= len(cur) && time.Now().Before(deadline); {
			cand := append(append([]uint32(nil), cur[:i]...), cur[i+size:]...)
			if fails(cand) {
				cur = cand
				continue
			}
			i += size
		}
	}
	var lines []string
	replay(rc, cur, func(l string) { lines = append(lines, l) })
	return cur, lines
}
