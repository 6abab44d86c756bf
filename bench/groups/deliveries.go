package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
)

// deliveries measures the election messages delivered to the agents per
// failover, over a real NATS server, with every agent in this process on a
// connection of its own. The leader is crashed (its connection closed, as a
// SIGKILL would); the count runs from the crash (the group is quiet before
// it: only heartbeats and acks flow) until the survivors agree on the new
// leader, plus 2H for votes still in flight.
//
// Detection: "all" gives every member the server's disconnect advisories, so
// all suspect the leader at once; "one" gives them only to the lowest-ranked
// member, which suspects alone while the others still wait out D.
func deliveries(args []string) error {
	fs := flag.NewFlagSet("deliveries", flag.ExitOnError)
	sizes := fs.String("n", "5,25,100", "group sizes")
	hbs := fs.String("heartbeat", "100ms,100ms,500ms", "heartbeat period H for each group size")
	algs := fs.String("algorithms", "bully,ring", "algorithms")
	trials := fs.Int("trials", 10, "failovers per group size, algorithm and detection (half as many at n >= 100)")
	jsonPath := fs.String("json", "", "write the series here")
	_ = fs.Parse(args)
	began := time.Now()
	var ns []int
	var periods []time.Duration
	hbList := strings.Split(*hbs, ",")
	for i, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			return fmt.Errorf("-n: %q is not a group size of 3 or more", s)
		}
		hb, err := time.ParseDuration(hbList[min(i, len(hbList)-1)])
		if err != nil {
			return fmt.Errorf("-heartbeat: %w", err)
		}
		ns, periods = append(ns, n), append(periods, hb)
	}
	var out []benchresult.Series
	for _, alg := range strings.Split(*algs, ",") {
		for _, detect := range []string{"one", "all"} {
			for i, n := range ns {
				s := benchresult.Series{
					Figure: "deliveries", Algorithm: alg, Unit: "deliveries",
					Name: fmt.Sprintf("n=%d, %s", n, map[string]string{
						"one": "one detector (the lowest rank)", "all": "all detect at once"}[detect]),
					Settings: fmt.Sprintf("%d agents in one process, each on its own NATS connection, 1 nats-server, H=%s, k=3", n, periods[i]),
					Targets:  []benchresult.Target{{Stat: "p99", Max: float64(3 * n)}},
				}
				if err := benchresult.AlgorithmAvailable(alg); err != nil {
					s.Pending = fmt.Sprintf("this build cannot run it (%v)", err)
					fmt.Printf("deliveries %s: %v: pending\n", alg, err)
					out = append(out, s)
					continue
				}
				// A trial at n=100 (H=500ms) takes about 5 s: half as many.
				count := *trials
				if n >= 100 {
					count = max(3, count/2)
				}
				samples, note, err := deliveryTrials(alg, detect, n, count, periods[i])
				if err != nil {
					return fmt.Errorf("deliveries %s n=%d detect=%s: %w", alg, n, detect, err)
				}
				s.Samples, s.Note = samples, note
				fmt.Printf("deliveries %s %s: %v (p50 %.0f, p99 %.0f, 3n = %d)\n", alg, s.Name, samples,
					benchresult.Percentile(samples, 50), benchresult.Percentile(samples, 99), 3*n)
				out = append(out, s)
			}
		}
	}
	if *jsonPath == "" {
		return nil
	}
	return benchresult.Write(*jsonPath, benchresult.File{Program: "bench deliveries",
		Started: began.UTC().Format(time.RFC3339), Seconds: time.Since(began).Seconds(), Series: out})
}

func deliveryTrials(alg, detect string, n, trials int, hb time.Duration) ([]float64, string, error) {
	ns, err := harness.StartNATSWithSystemAccount()
	if err != nil {
		return nil, "", err
	}
	defer ns.Shutdown()
	dir, err := os.MkdirTemp("", "bench-deliveries-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	advisories := func(id string) bool { return detect == "all" || id == "gw1" }
	g := newGroup("d", ns.ClientURL(), dir, alg, n, hb, advisories)
	defer g.stop()
	if err := g.startAllAtOnce(); err != nil {
		return nil, "", err
	}
	d := 3 * hb
	leader, term, err := g.waitAgreement(0, time.Millisecond, 30*time.Second)
	if err != nil {
		return nil, "", err
	}
	var samples []float64
	postponed, discarded := 0, 0
	for len(samples) < trials {
		if postponed+discarded > 3*trials {
			return nil, "", fmt.Errorf("the group did not stay quiet: %d trials postponed, %d discarded", postponed, discarded)
		}
		// Every member up for D (a fresh one neither votes nor stands),
		// and the group quiet: no election message for 2H.
		time.Sleep(d - time.Since(g.startedAt))
		// Counted over the members that will survive the crash.
		before, err := g.electionIn(leader)
		if err != nil {
			return nil, "", err
		}
		time.Sleep(2 * hb)
		base, err := g.electionIn(leader)
		if err != nil {
			return nil, "", err
		}
		if l, t, ok := g.agreement(0); !ok || base != before || l != leader || t != term {
			// Not quiet (a late vote, a re-election): let it settle.
			postponed++
			leader, term, err = g.waitAgreement(0, time.Millisecond, 30*time.Second)
			if err != nil {
				return nil, "", err
			}
			continue
		}
		g.crash(leader)
		next, nextTerm, err := g.waitAgreement(term, time.Millisecond, 30*time.Second)
		if err != nil {
			return nil, "", err
		}
		time.Sleep(2 * hb)
		after, err := g.electionIn(leader)
		if err != nil {
			return nil, "", err
		}
		if _, t, ok := g.agreement(0); ok && t == nextTerm {
			samples = append(samples, float64(after-base))
		} else {
			// Another election followed within 2H: the count would mix two.
			discarded++
			fmt.Printf("deliveries %s n=%d: trial discarded, a second election followed the failover to %s (term %d, now %d)\n", alg, n, next, nextTerm, t)

		}
		// The crashed member comes back (a restart) for the next trial.
		if err := g.start(leader); err != nil {
			return nil, "", err
		}
		leader, term, err = g.waitAgreement(0, time.Millisecond, 30*time.Second)
		if err != nil {
			return nil, "", err
		}
	}
	var notes []string
	if postponed > 0 {
		notes = append(notes, fmt.Sprintf("%d trial starts postponed because the group was not quiet for 2H", postponed))
	}
	if discarded > 0 {
		notes = append(notes, fmt.Sprintf("%d trials discarded because a second election followed within 2H", discarded))
	}
	return samples, strings.Join(notes, "; "), nil
}
