// Command failover measures crash failover, silent-failure failover and
// graceful handover of real edge-agent processes on one real NATS server (or
// on clustered embedded servers, -cluster): it SIGKILLs (-mode kill), freezes
// with SIGSTOP (-mode freeze) or SIGTERMs (-mode term) the leader, or asks it
// over NATS to hand over to another member (-mode transfer, as `edge-agent
// transfer` does; the leader keeps running), then polls every agent's /status
// until all report the same new leader in a higher term. It prints p50/p99
// over the trials, by that polling and by the agents' own clocks: each agent
// publishes the moment it saw the new leader (agent.EventsSubject), so the
// second figure is free of the polling's delays (an HTTP round of /status
// requests, and a benchmark process that shares the machine's two cores with
// the agents). It checks the merged leadership journals for lease overlap,
// and with -json records the samples for `make bench`.
//
//	go run ./bench/failover -trials 30 -agents 5 -heartbeat 100ms -misses 3
//	go run ./bench/failover -fast -mode freeze -json out/freeze.json
//	go run ./bench/failover -mode transfer
//	go run ./bench/failover -agents 3 -witness -fast -mode kill
//
// With -witness the highest-ranked member (gwN of -agents N) is a witness
// (--witnesses gwN): it votes and acknowledges heartbeats but never leads, so
// -agents 3 -witness is a two-gateway site with a witness. The victim is the
// leader, always a gateway; a trial in which the witness leads fails the run.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// The modes: how the leader is taken away.
const (
	modeKill   = "kill"   // SIGKILL: a crash; the server sees the connection close
	modeTerm   = "term"   // SIGTERM: graceful handover
	modeFreeze = "freeze" // SIGSTOP: a silent failure; the connection stays open
	// transfer: a planned handover over NATS; the leader keeps running
	modeTransfer = "transfer"
)

type options struct {
	trials    int
	n         int
	hb        time.Duration
	misses    int
	mode      string
	poll      time.Duration
	verbose   bool
	fast      bool
	algorithm string
	jsonPath  string
	cluster   bool
	serverBin string
	settle    time.Duration
	logPath   string
	oldBin    string // members old run this binary (a site mid-upgrade)
	old       string
	witness   bool // the last member is a witness
}

// witnessID is the witness of a -witness run: the last, highest-ranked
// member, the one a member that did not know it never stands would wait for.
func witnessID(o options) string { return fmt.Sprintf("gw%d", o.n) }

func main() {
	var o options
	flag.IntVar(&o.trials, "trials", 30, "number of failovers to measure")
	flag.IntVar(&o.n, "agents", 5, "agents in the group")
	flag.DurationVar(&o.hb, "heartbeat", 100*time.Millisecond, "heartbeat period H")
	flag.IntVar(&o.misses, "misses", 3, "missed heartbeats k before suspicion")
	flag.StringVar(&o.mode, "mode", modeKill, "kill (SIGKILL, crash), freeze (SIGSTOP, a silent failure: the leader is frozen and its connection stays open, so only missed heartbeats reveal it; it is thawed after each trial), term (SIGTERM, graceful handover) or transfer (planned handover to another member)")
	flag.DurationVar(&o.poll, "poll", time.Millisecond, "status polling interval")
	flag.BoolVar(&o.verbose, "v", false, "print the agents' logs")
	flag.StringVar(&o.logPath, "log", "", "write the agents' debug logs to this file (to look into a slow trial afterwards)")
	flag.StringVar(&o.serverBin, "nats-server", "", "run the bus as this nats-server binary (e.g. Debian's /usr/bin/nats-server) instead of the embedded library")
	flag.BoolVar(&o.fast, "fast", false, "give the agents system-account access: crash failover on the server's disconnect advisories")
	flag.StringVar(&o.algorithm, "algorithm", "bully", "election algorithm of the agents (bully or ring)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the samples to this file (benchresult JSON, for make bench)")
	flag.DurationVar(&o.settle, "settle", -1, "how long after the last unfaulted election a trial may start (default 45 H + D, the backoff cap)")
	flag.StringVar(&o.oldBin, "old-bin", "", "an edge-agent binary of an earlier build (e.g. a released protocol version) that the members -old run instead of this tree's: a site mid-upgrade")
	flag.StringVar(&o.old, "old", "", "comma-separated member ids (gw1..gwN) that run -old-bin")
	flag.BoolVar(&o.witness, "witness", false, "the last member (gwN of -agents N) is a witness: it votes and acknowledges heartbeats but never leads; -agents 3 -witness is a two-gateway site with a witness")
	flag.BoolVar(&o.cluster, "cluster", false, "an offline site: every agent runs an embedded server, clustered with the others (with -fast the fast path is route closures; without it, heartbeats only)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// series describes the row this run measures, with the targets.
func series(o options) benchresult.Series {
	s := benchresult.Series{
		Figure: "failover", Algorithm: o.algorithm, Unit: "ms", Chart: true,
		Settings: fmt.Sprintf("%d agent processes, %s, H=%s, k=%d (D=%s), /status polled every %s; a trial starts with every member up for D and the last unfaulted election 45 H behind (the backoff cap)",
			o.n, map[bool]string{false: "1 nats-server", true: "each with its embedded nats-server, clustered"}[o.cluster],
			o.hb, o.misses, time.Duration(o.misses)*o.hb, o.poll),
	}
	if o.witness {
		s.Settings = fmt.Sprintf("%d gateways and a witness (%s, ranked highest; --witnesses), ", o.n-1, witnessID(o)) + s.Settings
		// Off the chart: the rows of a 3-gateway site are the comparison.
		s.Chart = false
	}
	heartbeatTargets := []benchresult.Target{{Stat: "p50", Max: 260}, {Stat: "p99", Max: 310}}
	switch {
	case o.mode == modeKill && o.fast:
		s.Name = "crash (SIGKILL), fast path: server advisories"
		s.Targets = []benchresult.Target{{Stat: "p50", Max: 25}, {Stat: "p99", Max: 50}}
	case o.mode == modeKill:
		s.Name = "crash (SIGKILL), heartbeats only"
		s.Targets = heartbeatTargets
	case o.mode == modeFreeze:
		s.Name = "silent failure (SIGSTOP), heartbeats"
		s.Targets = heartbeatTargets
	case o.mode == modeTerm:
		s.Figure = "handover"
		s.Name = "graceful handover (SIGTERM)"
		s.Targets = []benchresult.Target{{Stat: "p99", Max: 20}}
	case o.mode == modeTransfer:
		s.Figure = "handover"
		s.Name = "planned handover (transfer to a random member)"
		s.Targets = []benchresult.Target{{Stat: "p99", Max: 20}}
	}
	switch {
	case o.fast && o.cluster:
		s.Name = strings.Replace(s.Name, "server advisories", "route closures", 1)
		s.Settings += ", agents act on the closed route to the leader's server"
	case o.fast:
		s.Settings += ", agents subscribed to the server's disconnect advisories, leaders announcing their presence connection; no leader duty (no leader.* config), so a successor waits no fast-path fence on a site of protocol 6"
	default:
		s.Settings += ", fast failover off"
	}
	if o.witness {
		s.Name += fmt.Sprintf(", %d gateways + 1 witness", o.n-1)
	}
	return s
}

func run(o options) error {
	switch o.mode {
	case modeKill, modeTerm, modeFreeze, modeTransfer:
	default:
		return fmt.Errorf("-mode must be kill, freeze, term or transfer")
	}
	began := time.Now()
	out := series(o)
	record := func(s benchresult.Series) error {
		if o.jsonPath == "" {
			return nil
		}
		return benchresult.Write(o.jsonPath, benchresult.File{
			Program: "failoverbench", Started: began.UTC().Format(time.RFC3339),
			Seconds: time.Since(began).Seconds(), Series: []benchresult.Series{s},
		})
	}
	if o.witness && o.n < 2 {
		return fmt.Errorf("-witness needs -agents 2 or more: at least one member must not be a witness")
	}
	if err := benchresult.AlgorithmAvailable(o.algorithm); err != nil {
		fmt.Printf("algorithm %s: %v: recorded as pending\n", o.algorithm, err)
		out.Pending = fmt.Sprintf("this build cannot run it (%v)", err)
		return record(out)
	}
	dir, err := os.MkdirTemp("", "failoverbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := harness.BuildBinary(dir)
	if err != nil {
		return err
	}
	start := harness.StartNATS
	args := []string{"--algorithm", o.algorithm, "--heartbeat", o.hb.String(), "--heartbeat-misses", fmt.Sprint(o.misses),
		"--preemption", "never", "--log-level", "debug"}
	if o.witness {
		args = append(args, "--witnesses", witnessID(o))
	}
	path := "heartbeats only"
	bus := "one nats-server"
	var site *harness.Site
	var dead *deaths // the server's disconnect advisories (fast path, SIGKILL)
	switch {
	case o.cluster:
		bus = "embedded nats-servers clustered by routes"
		if o.fast {
			path = "fast path: route closures"
		} else {
			args = append(args, "--fast-failover=false")
		}
		if site, err = harness.NewClusterSite(bin, dir, o.n, args...); err != nil {
			return err
		}
	default:
		if o.fast {
			start = harness.StartNATSWithSystemAccount
			args = append(args, "--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword)
			path = "fast path: server disconnect advisories (presence connections)"
		} else {
			args = append(args, "--fast-failover=false")
		}
		var ns interface {
			ClientURL() string
			Shutdown()
		}
		if o.serverBin != "" {
			ns, err = harness.StartExternalNATS(o.serverBin, dir)
			bus = "one nats-server (" + o.serverBin + ")"
		} else {
			ns, err = start()
		}
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		site = harness.NewSite(bin, ns.ClientURL(), dir, o.n, args...)
		if o.fast && o.mode == modeKill {
			sys, err := nats.Connect(ns.ClientURL(), nats.Name("failoverbench-advisories"),
				nats.UserInfo(harness.SystemUser, harness.SystemPassword))
			if err != nil {
				return err
			}
			defer sys.Close()
			dead = &deaths{group: site.Group, at: map[string]time.Time{}, seen: map[string][]string{}}
			if _, err := sys.Subscribe("$SYS.ACCOUNT.*.DISCONNECT", dead.add); err != nil {
				return err
			}
			if err := sys.Flush(); err != nil {
				return err
			}
		}
	}
	if o.witness {
		bus += ", " + witnessID(o) + " a witness"
	}
	site.Journals = true
	if o.old != "" {
		if o.oldBin == "" {
			return fmt.Errorf("-old needs -old-bin")
		}
		old := map[string]bool{}
		for _, id := range strings.Split(o.old, ",") {
			if !slices.Contains(site.IDs(), id) {
				return fmt.Errorf("-old: %q is not one of %v", id, site.IDs())
			}
			old[id] = true
		}
		site.Command = func(id string) []string {
			if old[id] {
				return []string{o.oldBin}
			}
			return []string{bin}
		}
		out.Settings += fmt.Sprintf(", %s running %s", o.old, o.oldBin)
		bus += fmt.Sprintf(", %s on %s", o.old, o.oldBin)
	}
	if o.verbose {
		site.Log = os.Stderr
	}
	if o.logPath != "" {
		f, err := os.Create(o.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		site.Log = f
	}
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		return err
	}
	url := site.NATSURL
	for _, u := range site.ClientURLs { // a clustered site: any gateway's server
		url = u
	}
	nc, err := nats.Connect(url, nats.Name("failoverbench"))
	if err != nil {
		return err
	}
	defer nc.Close()
	events := &eventLog{}
	if _, err := nc.Subscribe(agent.EventsSubject(agent.DefaultSubjectPrefix, site.Group), events.add); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	ids := site.IDs()
	cur, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("failover of %d agent processes (%s), %s, H=%s k=%d (D=%s), mode=%s, detection: %s, poll %s\n",
		o.n, o.algorithm, bus, o.hb, o.misses, time.Duration(o.misses)*o.hb, o.mode, path, o.poll)
	var samples, seen []time.Duration
	var gone, after []time.Duration // SIGKILL -> the server's advisory -> agreement
	d := time.Duration(o.misses) * o.hb
	restarted := time.Now()
	var lastTransfer time.Time
	// A member whose lease lapsed or that lost an election backs off for up
	// to 45 H (30 H and +50% jitter) before it stands again, even after it
	// has heard the winner; if it is the one the others expect to take
	// over, a crash in that window measures the backoff. Trials start once
	// the elections that no trial caused (start-up, a lease lost while the
	// machine was busy) are that far behind.
	quietSince := time.Now()
	settle := 45*o.hb + d
	if o.settle >= 0 {
		settle = o.settle
	}
	unplanned := 0     // terms that no fault of ours started
	missedNominee := 0 // transfers that did not end with the nominee leading
	for i := 0; i < o.trials; i++ {
		time.Sleep(settle - time.Since(quietSince))
		// A member that started less than D ago neither votes nor stands
		// (it may have acknowledged a leader just before it went down), so
		// a crash right after a restart measures that wait, not failover.
		// Each trial starts once every member has been up for D.
		time.Sleep(d - time.Since(restarted))
		// The group grants handovers on request at one per
		// agent.HandoverPeriod(D) once a burst is spent, counting every
		// request each agent saw (a new leader inherits the budget): pace
		// the transfers at that rate, or the leader refuses them.
		if o.mode == modeTransfer {
			time.Sleep(agent.HandoverPeriod(d) - time.Since(lastTransfer))
			lastTransfer = time.Now()
		}
		// Let the leader run a random part of a heartbeat period, so the
		// fault lands at a random phase of the heartbeat cycle.
		time.Sleep(o.hb + rand.N(o.hb))
		// The fault must hit the leader the others agree on now: an
		// election since the last agreement (a lease lost while the machine
		// was busy) would make the trial time a change that had already
		// happened.
		now, err := site.WaitAgreement(site.Running(), "", 0, o.poll, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d: before the fault: %w", i+1, err)
		}
		if o.witness && now.Leader == witnessID(o) {
			return fmt.Errorf("trial %d: the witness %s leads term %d", i+1, now.Leader, now.Term)
		}
		if now.Leader != cur.Leader || now.Term != cur.Term {
			if unplanned += int(now.Term - cur.Term); unplanned > 10*o.trials {
				return fmt.Errorf("the group keeps electing without a fault (%d terms): the machine is too busy to measure", unplanned)
			}
			fmt.Printf("before trial %d: %s term %d -> %s term %d without a fault; trial postponed\n", i+1, cur.Leader, cur.Term, now.Leader, now.Term)
			cur, quietSince = now, time.Now()
			i--
			continue
		}
		fastBefore := fastSuspicions(site, site.Running())
		if dead != nil {
			dead.reset()
		}
		witness := ""
		if o.witness {
			witness = witnessID(o)
		}
		next, err := trial(site, nc, o.mode, cur, o.poll, witness)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		if o.witness && next.Leader == witnessID(o) {
			return fmt.Errorf("trial %d: the witness %s leads term %d", i+1, next.Leader, next.Term)
		}
		took := next.At.Sub(next.t0)
		samples = append(samples, took)
		if at, ok := events.agreed(next.waitFor, next.Leader, next.Term, 2*time.Second); ok {
			seen = append(seen, at.Sub(next.t0))
		}
		if dead != nil {
			if at, ok := dead.first(cur.Leader); ok {
				gone = append(gone, at.Sub(next.t0))
				after = append(after, next.At.Sub(at))
			}
		}
		// Which path the trial took: the survivors that acted on a fast-path
		// report (edge_election_fast_suspicions_total went up); the others
		// followed the new leader, or suspected on missed heartbeats.
		fastAfter, acted := fastSuspicions(site, next.waitFor), 0
		for id, n := range fastAfter {
			if n > fastBefore[id] {
				acted++
			}
		}
		fmt.Printf("trial %2d: %s -> %s term %d->%d in %6.1f ms (fast-path report acted on by %d of %d)\n",
			i+1, cur.Leader, next.Leader, cur.Term, next.Term, benchresult.Ms(took), acted, len(next.waitFor))
		if dead != nil && acted == 0 && o.mode == modeKill {
			// Why no survivor acted: the agents act only on a "Client
			// Closed" advisory about the connection the leader announced.
			fmt.Printf("          the server's advisories about %s: %s\n", cur.Leader, dead.about(cur.Leader))
		}
		if o.mode == modeTransfer {
			if next.Leader != next.nominee {
				missedNominee++
			}
			cur = next.Agreement
			continue
		}
		if o.mode != modeFreeze {
			if _, err := site.Start(cur.Leader); err != nil {
				return err
			}
			restarted = time.Now()
		}
		cur, err = site.WaitAgreement(ids, "", next.Term-1, 5*time.Millisecond, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d: after the old leader came back: %w", i+1, err)
		}
	}
	report(os.Stdout, "polling /status", samples)
	if len(seen) > 0 {
		report(os.Stdout, "agents' own clocks (leader-change events)", seen)
	}
	if len(gone) > 0 {
		report(os.Stdout, "SIGKILL -> the server's disconnect advisory (the process torn down; no agent can act earlier)", gone)
		report(os.Stdout, "the server's disconnect advisory -> agreement (polling /status)", after)
	}
	site.Stop()
	entries, err := journalcheck.ReadFiles(site.JournalPaths()...)
	if err != nil {
		return err
	}
	rep := journalcheck.Check(entries, time.Now())
	fmt.Printf("safety: %s\n", rep)
	for _, d := range samples {
		out.Samples = append(out.Samples, benchresult.Ms(d))
	}
	out.Note = "leadership journals: " + rep.String()
	if len(seen) > 0 {
		ms := make([]float64, len(seen))
		for i, d := range seen {
			ms[i] = benchresult.Ms(d)
		}
		out.Note += fmt.Sprintf("; by the agents' own clocks (their leader-change events, free of the polling's delays) p50 %.1f ms, p99 %.1f ms over %d trials",
			benchresult.Percentile(ms, 50), benchresult.Percentile(ms, 99), len(ms))
	}
	if len(gone) > 0 {
		g, a := msOf(gone), msOf(after)
		out.Note += fmt.Sprintf("; of which SIGKILL -> the server's disconnect advisory (the kernel tearing the process down: no agent can act earlier) p50 %.1f ms, p99 %.1f ms, and the advisory -> agreement p50 %.1f ms, p99 %.1f ms, over %d trials",
			benchresult.Percentile(g, 50), benchresult.Percentile(g, 99), benchresult.Percentile(a, 50), benchresult.Percentile(a, 99), len(g))
	}
	if missedNominee > 0 {
		out.Note += fmt.Sprintf("; %d transfers ended with another member than the nominee leading", missedNominee)
	}
	if unplanned > 0 {
		out.Note += fmt.Sprintf("; the term advanced %d times between trials without a fault (a lease lost while the machine was busy); the trials it touched were postponed", unplanned)
	}
	fmt.Printf("terms started between trials without a fault: %d\n", unplanned)
	if err := record(out); err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("safety violated: overlaps %v, double votes %v, split terms %v, regressions %v",
			rep.Overlaps, rep.DoubleVotes, rep.SplitTerms, rep.TermRegressions)
	}
	return nil
}

// deaths records when the server's disconnect advisory for a member's
// connection reached the bench: the moment the server knew the connection
// closed, the earliest any agent can act on a crash. For a SIGKILL it is
// mostly the kernel tearing the process down (its sockets close last).
type deaths struct {
	mu    sync.Mutex
	group string
	at    map[string]time.Time // member id -> first advisory since reset
	seen  map[string][]string  // member id -> each advisory since reset: connection, client id, reason
}

func (d *deaths) add(m *nats.Msg) {
	var adv struct {
		Client struct {
			Name string `json:"name"`
			ID   uint64 `json:"id"`
		} `json:"client"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(m.Data, &adv) != nil {
		return
	}
	id, ok := strings.CutPrefix(adv.Client.Name, agent.ConnName(d.group, ""))
	if !ok {
		return
	}
	id = strings.TrimSuffix(id, agent.PresenceSuffix)
	now := time.Now()
	d.mu.Lock()
	if _, seen := d.at[id]; !seen {
		d.at[id] = now
	}
	d.seen[id] = append(d.seen[id], fmt.Sprintf("%s cid %d %q", adv.Client.Name, adv.Client.ID, adv.Reason))
	d.mu.Unlock()
}

func (d *deaths) reset() {
	d.mu.Lock()
	d.at, d.seen = map[string]time.Time{}, map[string][]string{}
	d.mu.Unlock()
}

// about lists the advisories about id since reset.
func (d *deaths) about(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen[id]) == 0 {
		return "none"
	}
	return strings.Join(d.seen[id], "; ")
}

// first returns when the first advisory about id arrived since reset.
func (d *deaths) first(id string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[id]
	return at, ok
}

type outcome struct {
	harness.Agreement
	t0      time.Time
	waitFor []string // the agents whose agreement ended the trial
	nominee string   // the member a transfer named
}

// trial takes the leader away as mode says and waits until the others agree
// on a successor. The survivors are polled while the old leader exits: the
// parent sees a SIGKILLed child's exit only when it gets to run (up to 100 ms
// late on a loaded 2-core machine), and a SIGTERMed leader hands over before
// it exits, so waiting for the exit first would time the harness, not the
// failover. A frozen leader is thawed once the others agree: it wakes with
// its lease long gone and must rejoin as a follower. A transfer goes to a
// random other member (never the witness, which would refuse); the old
// leader keeps running and must agree too.
func trial(site *harness.Site, nc *nats.Conn, mode string, cur harness.Agreement, poll time.Duration, witness string) (outcome, error) {
	victim := cur.Leader
	var survivors []string
	for _, id := range site.Running() {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	waitFor := survivors
	nominee := ""
	t0 := time.Now()
	wait := func() error { return nil }
	var err error
	switch mode {
	case modeKill:
		wait, err = site.StopAsync(victim, syscall.SIGKILL)
	case modeTerm:
		wait, err = site.StopAsync(victim, syscall.SIGTERM)
	case modeFreeze:
		err = site.Freeze(victim)
		wait = func() error { return site.Thaw(victim) }
	case modeTransfer:
		waitFor = site.Running()
		var nominees []string
		for _, id := range survivors {
			if id != witness {
				nominees = append(nominees, id)
			}
		}
		nominee = nominees[rand.N(len(nominees))]
		err = transfer(nc, site.Group, nominee)
	}
	if err != nil {
		return outcome{}, fmt.Errorf("%s %s: %w", mode, victim, err)
	}
	exclude := victim
	if mode == modeTransfer {
		// The old leader is still a member: a transfer that goes wrong may
		// end with it leading again, in a higher term. That ends the trial
		// too; the run counts such trials.
		exclude = ""
	}
	next, aerr := site.WaitAgreement(waitFor, exclude, cur.Term, poll, 30*time.Second)
	if werr := wait(); werr != nil {
		return outcome{}, fmt.Errorf("%s after %s: %w", victim, mode, werr)
	}
	if aerr != nil {
		return outcome{}, aerr
	}
	return outcome{Agreement: next, t0: t0, waitFor: waitFor, nominee: nominee}, nil
}

// msOf returns ds in milliseconds, sorted.
func msOf(ds []time.Duration) []float64 {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = benchresult.Ms(d)
	}
	slices.Sort(ms)
	return ms
}

func report(w io.Writer, how string, samples []time.Duration) {
	s := slices.Clone(samples)
	slices.Sort(s)
	ms := make([]float64, len(s))
	for i, d := range s {
		ms[i] = benchresult.Ms(d)
	}
	fmt.Fprintf(w, "\n%s: trials %d: min %.1f ms, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		how, len(s), ms[0], benchresult.Percentile(ms, 50), benchresult.Percentile(ms, 90), benchresult.Percentile(ms, 99), ms[len(ms)-1])
}

// fastSuspicions reads edge_election_fast_suspicions_total of the agents
// ids; an agent whose metrics cannot be read is left out.
func fastSuspicions(site *harness.Site, ids []string) map[string]float64 {
	out := map[string]float64{}
	for _, id := range ids {
		p := site.Proc(id)
		if p == nil {
			continue
		}
		resp, err := metricsClient.Get("http://" + p.HTTPAddr + "/metrics")
		if err != nil {
			continue
		}
		samples, err := harness.ParseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		if v, ok := harness.Find(samples, "edge_election_fast_suspicions_total", nil); ok {
			out[id] = v
		}
	}
	return out
}

var metricsClient = &http.Client{Timeout: 2 * time.Second}

// eventLog keeps the leader changes the agents publish.
type eventLog struct {
	mu  sync.Mutex
	evs []agent.LeaderChange
}

func (l *eventLog) add(m *nats.Msg) {
	var c agent.LeaderChange
	if json.Unmarshal(m.Data, &c) != nil {
		return
	}
	l.mu.Lock()
	l.evs = append(l.evs, c)
	l.mu.Unlock()
}

// agreed returns when the last of ids saw leader in term, by its own clock,
// waiting up to timeout for their events to arrive.
func (l *eventLog) agreed(ids []string, leader string, term uint64, timeout time.Duration) (time.Time, bool) {
	var last time.Time
	err := poll.For(timeout, "the agents' leader-change events", func() (bool, string) {
		last = time.Time{}
		n := 0
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, id := range ids {
			for _, c := range l.evs {
				if c.ID == id && c.Leader == leader && c.Term == term {
					if c.Time.After(last) {
						last = c.Time
					}
					n++
					break
				}
			}
		}
		return n == len(ids), ""
	})
	if err != nil {
		return time.Time{}, false
	}
	return last, true
}

// transfer asks the group's leader to hand over to nominee, as
// `edge-agent transfer` does, and waits for its answer.
func transfer(nc *nats.Conn, group, nominee string) error {
	body, _ := json.Marshal(agent.ControlRequest{Nominee: nominee})
	msg, err := nc.Request(wire.ControlSubject(agent.DefaultSubjectPrefix, group, "transfer"), body, 5*time.Second)
	if err != nil {
		return err
	}
	var r agent.ControlReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return err
	}
	if !r.OK {
		return fmt.Errorf("%s refused: %s", r.ID, r.Error)
	}
	return nil
}
