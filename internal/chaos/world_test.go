package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// The scenarios start real agent processes and take minutes, so they run
// only when CHAOS is set (make chaos-short in CI, make chaos for the full
// counts). The proxy's own tests always run.
func requireChaos(t *testing.T) {
	t.Helper()
	if os.Getenv("CHAOS") == "" {
		t.Skip("chaos scenario: set CHAOS=1 to run it (make chaos-short, make chaos)")
	}
}

// envDuration reads a duration from the environment, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration", name, v)
	}
	return d
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "edge-agent-chaos-bin-")
		if buildErr == nil {
			binPath, buildErr = harness.BuildBinary(binDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// timing is the agents' election timing, as flags and as the derived
// durations the checks use.
type timing struct {
	H      time.Duration // heartbeat
	K      int           // heartbeat misses
	Lease  time.Duration // 0: the agent's default, D - H - 2 ticks
	Answer time.Duration // 0: the agent's default, H
}

// D is k*H, the silence after which a member suspects its leader.
func (tm timing) D() time.Duration { return time.Duration(tm.K) * tm.H }

// L is the lease as the agent computes it.
func (tm timing) L() time.Duration {
	if tm.Lease > 0 {
		return tm.Lease
	}
	return tm.D() - tm.H - 2*tm.H/agent.TicksPerHeartbeat
}

func (tm timing) args() []string {
	a := []string{"--heartbeat", tm.H.String(), "--heartbeat-misses", strconv.Itoa(tm.K)}
	if tm.Lease > 0 {
		a = append(a, "--lease", tm.Lease.String())
	}
	if tm.Answer > 0 {
		a = append(a, "--answer-timeout", tm.Answer.String())
	}
	return a
}

func (tm timing) String() string {
	s := fmt.Sprintf("H=%s k=%d D=%s L=%s", tm.H, tm.K, tm.D(), tm.L())
	if tm.Answer > 0 {
		s += " answer=" + tm.Answer.String()
	}
	return s
}

// defaultTiming is what the partition, SIGSTOP, SIGKILL and restart
// scenarios run with: the timing of the demo and the failover benchmark
// (H=100ms, k=3), so that figures compare. CHAOS_HEARTBEAT and CHAOS_MISSES
// override it.
func defaultTiming(t *testing.T) timing {
	return timing{H: envDuration(t, "CHAOS_HEARTBEAT", 100*time.Millisecond), K: harness.EnvCount(t, "CHAOS_MISSES", 3)}
}

// world is one site under test: five agent processes gw1..gw5 (priorities
// 1..5, so gw5 leads when all are up), each behind its own NATS-mode fault
// proxy; gw1-gw3 on server A, gw4-gw5 on server B, A and B clustered through
// the route proxy of the Bus.
type world struct {
	t       *testing.T
	tm      timing
	dir     string
	bus     *Bus
	mesh    *Mesh // the 2+1 site's servers instead of bus (newWitnessWorld)
	proxies map[string]*Proxy
	site    *harness.Site
	ids     []string
	rng     *rand.Rand
	seed    uint64
	log     *os.File
	stalls  *stallWatch
}

const agents = 5

// serverOf is where each agent connects: a 3|2 split of the bus.
func (w *world) serverOf(id string) *Server {
	if id == "gw4" || id == "gw5" {
		return w.bus.B
	}
	return w.bus.A
}

// sideA are the agents on server A.
var sideA = map[string]bool{"gw1": true, "gw2": true, "gw3": true}

// worldOpts are the choices a scenario makes about its site.
type worldOpts struct {
	// fast gives the servers a system account and the agents its
	// credentials, so that they act on the servers' disconnect advisories
	// (the fast failover path). Without it the agents run with the defaults
	// an operator of an external bus gets without system credentials.
	fast bool
	// args are extra flags for every agent.
	args []string
}

func newWorld(t *testing.T, tm timing, o worldOpts) *world {
	t.Helper()
	bin := agentBinary(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	dir, err := os.MkdirTemp("", "edge-agent-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, tm: tm, dir: dir, proxies: map[string]*Proxy{}, seed: seed,
		rng: rand.New(rand.NewPCG(seed, seed+1)), stalls: newStallWatch()}
	t.Logf("seed %d (CHAOS_SEED reproduces the fault schedule, not the timing), %s, logs and journals in %s", seed, tm, dir)
	w.log, err = os.Create(filepath.Join(dir, "agents.log"))
	if err != nil {
		t.Fatal(err)
	}
	w.bus, err = NewBus(seed, o.fast)
	if err != nil {
		t.Fatal(err)
	}
	args := append(tm.args(), o.args...)
	if o.fast {
		args = append(args, "--nats-system-user", SystemUser, "--nats-system-password", SystemPassword)
	}
	// CHAOS_AGENT_ARGS adds flags to every agent, e.g. "--log-level debug".
	args = append(args, strings.Fields(os.Getenv("CHAOS_AGENT_ARGS"))...)
	w.site = harness.NewSite(bin, "", dir, agents, args...)
	w.site.Journals = true
	w.site.Log = w.log
	urls := map[string]string{}
	w.site.MemberArgs = func(id string) []string { return []string{"--nats-url", urls[id]} }
	w.ids = w.site.IDs()
	for i, id := range w.ids {
		p, err := NewProxy(ProxyConfig{Name: id, Target: w.serverOf(id).ClientAddr(), Mode: NATS, Seed: seed + uint64(i) + 2})
		if err != nil {
			t.Fatal(err)
		}
		w.proxies[id] = p
		urls[id] = p.URL()
	}
	t.Cleanup(w.close)
	if err := w.site.StartAll(); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) close() {
	w.stalls.close()
	w.site.Stop()
	for _, p := range w.proxies {
		p.Close()
	}
	if w.bus != nil {
		w.bus.Close()
	}
	if w.mesh != nil {
		w.mesh.Close()
	}
	w.log.Close()
	if w.t.Failed() || os.Getenv("CHAOS_KEEP") != "" {
		w.t.Logf("agents' logs and journals kept in %s", w.dir)
		return
	}
	os.RemoveAll(w.dir)
}

// healAll lifts every fault on every proxy and the route.
func (w *world) healAll() {
	if w.bus != nil {
		w.bus.Route.Heal()
	}
	if w.mesh != nil {
		w.mesh.Heal()
	}
	for _, p := range w.proxies {
		p.Heal()
	}
}

// agree waits until every running agent reports the same leader, which
// reports itself leader, and returns it with the time it took.
func (w *world) agree(ids []string, exclude string, minTerm uint64, timeout time.Duration) (harness.Agreement, error) {
	return w.site.WaitAgreement(ids, exclude, minTerm, 5*time.Millisecond, timeout)
}

// agreeConnected waits until the agents connected to the bus (by their
// /status), at least a quorum of them, all report the same leader and that
// leader reports itself leader. Agents still waiting to reconnect (their NATS
// client backs off up to 5 s, ±50%) are left out: they cannot hear anyone.
// It polls every 5 ms (poll.Every): the recovery figures are taken from the
// agreement's At.
func (w *world) agreeConnected(timeout time.Duration) (harness.Agreement, error) {
	var a harness.Agreement
	err := poll.Every(5*time.Millisecond, timeout, "agreement among connected agents", func() (bool, string) {
		var ok bool
		var why string
		a, ok, why = w.connectedAgreement()
		return ok, why
	})
	if err != nil {
		return harness.Agreement{}, err
	}
	return a, nil
}

// allConnected waits until every agent says its bus connection is up. An
// agent whose link a fault cut reconnects only after its client's reconnect
// wait (hundreds of milliseconds), and until then it may still name the
// leader it backed, so agreement alone does not show that it is back.
func (w *world) allConnected(timeout time.Duration) error {
	return poll.Every(5*time.Millisecond, timeout, "every agent connected", func() (bool, string) {
		for _, id := range w.ids {
			st, err := w.status(id)
			if err != nil {
				return false, id + ": " + err.Error()
			}
			if !st.NATSConnected {
				return false, id + " is not connected"
			}
		}
		return true, ""
	})
}

func (w *world) connectedAgreement() (harness.Agreement, bool, string) {
	var a harness.Agreement
	connected := 0
	for _, id := range w.ids {
		st, err := w.status(id)
		if err != nil {
			return a, false, id + ": " + err.Error()
		}
		if !st.NATSConnected {
			continue
		}
		connected++
		if st.Leader == "" || (a.Leader != "" && st.Leader != a.Leader) {
			return a, false, fmt.Sprintf("%s reports leader %q, others %q", id, st.Leader, a.Leader)
		}
		if st.ID == st.Leader && st.Role != "leader" {
			return a, false, id + " named itself but is " + st.Role
		}
		a.Leader = st.Leader
		a.Term = max(a.Term, st.Term)
	}
	if connected < len(w.ids)/2+1 {
		return a, false, fmt.Sprintf("only %d agents connected", connected)
	}
	a.At = time.Now()
	return a, true, ""
}

// status reads one agent's /status.
func (w *world) status(id string) (agent.StatusReport, error) {
	p := w.site.Proc(id)
	if p == nil {
		return agent.StatusReport{}, fmt.Errorf("%s not running", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.Status(ctx)
}

// alive fails the test if an agent process exited on its own: an agent
// never leaves the election unless it is told to or cannot persist.
func (w *world) alive() {
	w.t.Helper()
	for _, id := range w.site.Running() {
		if done, err := w.site.Proc(id).Exited(); done {
			w.t.Fatalf("agent %s exited on its own: %v (log: %s)", id, err, w.log.Name())
		}
	}
}

// firstLog returns the time of the first agent log line at or after from
// with message msg and field key equal to value.
func (w *world) firstLog(from time.Time, msg, key, value string) (time.Time, bool) {
	w.t.Helper()
	b, err := os.ReadFile(w.log.Name())
	if err != nil {
		w.t.Fatal(err)
	}
	var first time.Time
	for _, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(rest), &rec) != nil || rec["msg"] != msg || rec[key] != value {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"]))
		if err != nil || ts.Before(from) {
			continue
		}
		if first.IsZero() || ts.Before(first) {
			first = ts
		}
	}
	return first, !first.IsZero()
}

// journals merges the journals of every agent and checks them.
func (w *world) journals() (*journalcheck.Report, []agent.JournalEntry) {
	w.t.Helper()
	es, err := journalcheck.ReadFiles(w.site.JournalPaths()...)
	if err != nil {
		w.t.Fatal(err)
	}
	return journalcheck.Check(es, time.Now()), es
}

// requireSafe fails the test on any overlap, double vote, split term or
// term regression, listing them.
func requireSafe(t *testing.T, rep *journalcheck.Report) {
	t.Helper()
	if !rep.OK() {
		t.Errorf("SAFETY VIOLATION: %s\noverlaps: %v\ndouble votes: %v\nsplit terms: %v\nterm regressions: %v",
			rep, rep.Overlaps, rep.DoubleVotes, rep.SplitTerms, rep.TermRegressions)
	}
}

// leaseAt returns the lease interval that contains time at, if any.
func leaseAt(rep *journalcheck.Report, at time.Time) (journalcheck.Interval, bool) {
	ns := at.UnixNano()
	for _, iv := range rep.Intervals {
		if iv.Start <= ns && ns < iv.End {
			return iv, true
		}
	}
	return journalcheck.Interval{}, false
}

// stopAfter returns the first "stop" journal entry of id in term after at.
func stopAfter(es []agent.JournalEntry, id string, term uint64, at time.Time) (agent.JournalEntry, bool) {
	var best agent.JournalEntry
	found := false
	for _, e := range es {
		if e.ID == id && e.Event == "stop" && e.Term == term && e.T >= at.UnixNano() && (!found || e.T < best.T) {
			best, found = e, true
		}
	}
	return best, found
}

// pick returns a random element of xs.
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// between returns a random duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}
