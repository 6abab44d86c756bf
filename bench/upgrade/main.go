// Command upgrade measures a rolling upgrade and a rolling downgrade of a
// site, as an operator flashes gateways one at a time: every member starts
// on an earlier build (-old-bin, e.g. the previous protocol release), then
// gw1..gwN are stopped with SIGTERM and restarted on this tree's build one
// by one, each once the site agrees on a leader again and the restarted
// member has been up for D; then the same back to the earlier build. It
// repeats that -passes times and reads the agents' leadership journals
// (their own clocks) for the spans with no valid lease anywhere: the site
// without a leader. A span belongs to the step during which it began;
// steps that stopped the leader are handovers, the others should have
// none.
//
//	go run ./bench/upgrade -old-bin bin/mixed/edge-agent-<commit> -algorithm ring
//
// make mixed-bench runs it for each algorithm after the failover series.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
)

type options struct {
	oldBin    string
	algorithm string
	n         int
	passes    int
	hb        time.Duration
	misses    int
	fast      bool
	verbose   bool
	logPath   string
}

// step is one member's restart on the other build.
type step struct {
	id       string
	to       string // "new" or "old"
	leader   bool   // it led when it was stopped: a handover
	from, at int64  // Unix ns: the SIGTERM; the site's agreement after it
}

func main() {
	var o options
	flag.StringVar(&o.oldBin, "old-bin", "", "an edge-agent binary of the earlier build (required)")
	flag.StringVar(&o.algorithm, "algorithm", "bully", "election algorithm (bully or ring)")
	flag.IntVar(&o.n, "agents", 5, "agents in the group")
	flag.IntVar(&o.passes, "passes", 2, "rolling upgrades (each followed by a rolling downgrade)")
	flag.DurationVar(&o.hb, "heartbeat", 100*time.Millisecond, "heartbeat period H")
	flag.IntVar(&o.misses, "misses", 3, "missed heartbeats k before suspicion")
	flag.BoolVar(&o.fast, "fast", true, "give the agents system-account access (the fast path on crashes)")
	flag.BoolVar(&o.verbose, "v", false, "print the agents' logs")
	flag.StringVar(&o.logPath, "log", "", "write the agents' debug logs to this file (to look into a long span without a leader afterwards)")
	flag.Parse()
	if o.oldBin == "" {
		fmt.Fprintln(os.Stderr, "upgrade: -old-bin is required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "upgradebench-")
	if err != nil {
		return err
	}
	if o.verbose {
		fmt.Printf("journals and state in %s (kept with -v)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin, err := harness.BuildBinary(dir)
	if err != nil {
		return err
	}
	args := []string{"--algorithm", o.algorithm, "--heartbeat", o.hb.String(), "--heartbeat-misses", fmt.Sprint(o.misses),
		"--preemption", "never"}
	start := harness.StartNATS
	if o.fast {
		start = harness.StartNATSWithSystemAccount
		args = append(args, "--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword)
	}
	ns, err := start()
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	site := harness.NewSite(bin, ns.ClientURL(), dir, o.n, args...)
	site.Journals = true
	switch {
	case o.logPath != "":
		f, err := os.Create(o.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		site.Log = f
		site.Args = append(site.Args, "--log-level", "debug")
	case o.verbose:
		site.Log = os.Stderr
		site.Args = append(site.Args, "--log-level", "debug")
	}
	var mu sync.Mutex
	onNew := map[string]bool{}
	site.Command = func(id string) []string {
		mu.Lock()
		defer mu.Unlock()
		if onNew[id] {
			return []string{bin}
		}
		return []string{o.oldBin}
	}
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		return err
	}
	ids := site.IDs()
	cur, err := site.WaitAgreement(ids, "", 0, 2*time.Millisecond, 30*time.Second)
	if err != nil {
		return err
	}
	d := time.Duration(o.misses) * o.hb
	fmt.Printf("rolling upgrade and downgrade of %d agent processes (%s), H=%s k=%d (D=%s), earlier build %s, %d passes\n",
		o.n, o.algorithm, o.hb, o.misses, d, o.oldBin, o.passes)
	began := time.Now().UnixNano()
	var steps []step
	for pass := 0; pass < o.passes; pass++ {
		for _, to := range []string{"new", "old"} {
			for _, id := range ids {
				// A restarted member neither votes nor stands for D; the next
				// restart waits for it, as an operator waits for a gateway to
				// rejoin before flashing the next.
				time.Sleep(d + o.hb)
				s := step{id: id, to: to, leader: id == cur.Leader, from: time.Now().UnixNano()}
				if err := site.Terminate(id); err != nil {
					fmt.Printf("%s exited: %v\n", id, err)
				}
				mu.Lock()
				onNew[id] = to == "new"
				mu.Unlock()
				if _, err := site.Start(id); err != nil {
					return err
				}
				if cur, err = site.WaitAgreement(ids, "", 0, 2*time.Millisecond, 30*time.Second); err != nil {
					return fmt.Errorf("after restarting %s on the %s build: %w", id, to, err)
				}
				s.at = time.Now().UnixNano()
				steps = append(steps, s)
			}
		}
	}
	end := time.Now().UnixNano()
	site.Stop()
	entries, err := journalcheck.ReadFiles(site.JournalPaths()...)
	if err != nil {
		return err
	}
	rep := journalcheck.Check(entries, time.Unix(0, end))
	return report(o, steps, journalcheck.Gaps(rep.Intervals, began, end), rep)
}

// report attributes each leaderless span to the step during which it
// began and prints the longest per kind of step.
func report(o options, steps []step, gaps []journalcheck.Interval, rep *journalcheck.Report) error {
	type key struct {
		to     string
		leader bool
	}
	longest := map[key]time.Duration{}
	count := map[key]int{}
	var handovers []float64
	unexpected := 0
	for _, s := range steps {
		var worst time.Duration
		for _, g := range gaps {
			if g.Start >= s.from && g.Start < s.at {
				worst = max(worst, time.Duration(g.End-g.Start))
			}
		}
		k := key{s.to, s.leader}
		count[k]++
		longest[k] = max(longest[k], worst)
		if s.leader {
			handovers = append(handovers, benchresult.Ms(worst))
		} else if worst > 0 {
			unexpected++
			fmt.Printf("  %s to the %s build (a follower): %.1f ms without a leader\n", s.id, s.to, benchresult.Ms(worst))
		}
	}
	var all time.Duration
	for _, g := range gaps {
		all = max(all, time.Duration(g.End-g.Start))
	}
	for _, to := range []string{"new", "old"} {
		what := map[string]string{"new": "upgrade", "old": "downgrade"}[to]
		for _, leader := range []bool{true, false} {
			k := key{to, leader}
			who := map[bool]string{true: "the leader (a handover)", false: "a follower"}[leader]
			fmt.Printf("%-9s of %-23s %2d steps, longest span without a leader %6.1f ms\n", what, who, count[k], benchresult.Ms(longest[k]))
		}
	}
	slices.Sort(handovers)
	if len(handovers) > 0 {
		fmt.Printf("handovers (the leader stopped with SIGTERM): %d, span without a leader p50 %.1f ms, max %.1f ms\n",
			len(handovers), benchresult.Percentile(handovers, 50), handovers[len(handovers)-1])
	}
	fmt.Printf("longest span without a leader: %.1f ms; follower restarts with one: %d of %d\n",
		benchresult.Ms(all), unexpected, len(steps)-len(handovers))
	fmt.Printf("safety: %s\n", rep)
	if !rep.OK() {
		return fmt.Errorf("safety violated: overlaps %s", strings.Join(rep.Overlaps, "; "))
	}
	return nil
}
