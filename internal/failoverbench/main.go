// Command failoverbench measures crash failover and graceful handover of real
// edge-agent processes on one real NATS server: it SIGKILLs (-mode kill) or
// SIGTERMs (-mode term) the leader, or asks it over NATS to hand over to
// another member (-mode transfer, as `edge-agent transfer` does; the leader
// keeps running), then polls every agent's /status until all report the
// same new leader in a higher term. It prints p50/p99 over the trials.
//
//	go run ./internal/failoverbench -trials 30 -agents 5 -heartbeat 100ms -misses 3 -mode transfer
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
)

func main() {
	trials := flag.Int("trials", 30, "number of failovers to measure")
	n := flag.Int("agents", 5, "agents in the group")
	hb := flag.Duration("heartbeat", 100*time.Millisecond, "heartbeat period H")
	misses := flag.Int("misses", 3, "missed heartbeats k before suspicion")
	mode := flag.String("mode", "kill", "kill (SIGKILL, crash), term (SIGTERM, graceful handover) or transfer (planned handover to another member)")
	poll := flag.Duration("poll", time.Millisecond, "status polling interval")
	verbose := flag.Bool("v", false, "print the agents' logs")
	fast := flag.Bool("fast", false, "give the agents system-account access: crash failover on the server's disconnect advisories")
	cluster := flag.Bool("cluster", false, "an offline site: every agent runs an embedded server, clustered with the others (fast path: route closures)")
	flag.Parse()
	if err := run(*trials, *n, *hb, *misses, *mode, *poll, *verbose, *fast, *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

func run(trials, n int, hb time.Duration, misses int, mode string, poll time.Duration, verbose, fast, cluster bool) error {
	if mode != "kill" && mode != "term" && mode != "transfer" {
		return fmt.Errorf("-mode must be kill, term or transfer")
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
	args := []string{"--heartbeat", hb.String(), "--heartbeat-misses", fmt.Sprint(misses), "--preemption", "never", "--log-level", "debug"}
	path := "heartbeats only"
	bus := "one nats-server"
	var site *harness.Site
	switch {
	case cluster:
		bus = "embedded nats-servers clustered by routes"
		if fast {
			path = "fast path: route closures"
		} else {
			args = append(args, "--fast-failover=false")
		}
		if site, err = harness.NewClusterSite(bin, dir, n, args...); err != nil {
			return err
		}
	default:
		if fast {
			start = harness.StartNATSWithSystemAccount
			args = append(args, "--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword)
			path = "fast path: server disconnect advisories"
		} else {
			args = append(args, "--fast-failover=false")
		}
		ns, err := start()
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		site = harness.NewSite(bin, ns.ClientURL(), dir, n, args...)
	}
	site.Journals = true
	if verbose {
		site.Log = os.Stderr
	}
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		return err
	}
	var nc *nats.Conn
	if mode == "transfer" {
		url := site.NATSURL
		for _, u := range site.ClientURLs { // a clustered site: any gateway's server
			url = u
		}
		if nc, err = nats.Connect(url, nats.Name("failoverbench")); err != nil {
			return err
		}
		defer nc.Close()
	}
	ids := site.IDs()
	cur, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("failover of %d agent processes, %s, H=%s k=%d (D=%s), mode=%s, detection: %s, poll %s\n",
		n, bus, hb, misses, time.Duration(misses)*hb, mode, path, poll)
	var samples []time.Duration
	for i := 0; i < trials; i++ {
		// Let the leader run a random part of a heartbeat period, so the kill
		// lands at a random phase of the heartbeat cycle.
		time.Sleep(hb + rand.N(hb))
		victim := cur.Leader
		var survivors []string
		for _, id := range site.Running() {
			if id != victim {
				survivors = append(survivors, id)
			}
		}
		waitFor := survivors
		t0 := time.Now()
		switch mode {
		case "kill":
			err = site.Kill(victim)
		case "term":
			err = site.Terminate(victim)
		case "transfer":
			waitFor = ids // the old leader keeps running and must agree too
			err = transfer(nc, site.Group, survivors[rand.N(len(survivors))])
		}
		if err != nil {
			return fmt.Errorf("trial %d: %s %s: %w", i, mode, victim, err)
		}
		next, err := site.WaitAgreement(waitFor, victim, cur.Term, poll, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		d := next.At.Sub(t0)
		samples = append(samples, d)
		fmt.Printf("trial %2d: %s -> %s term %d->%d in %6.1f ms\n", i+1, victim, next.Leader, cur.Term, next.Term, ms(d))
		if mode == "transfer" {
			cur = next
			continue
		}
		if _, err := site.Start(victim); err != nil {
			return err
		}
		cur, err = site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d: after restart: %w", i, err)
		}
	}
	report(os.Stdout, samples)
	site.Stop()
	entries, err := journalcheck.ReadFiles(site.JournalPaths()...)
	if err != nil {
		return err
	}
	rep := journalcheck.Check(entries, time.Now())
	fmt.Printf("safety: %s\n", rep)
	if !rep.OK() {
		return fmt.Errorf("safety violated: overlaps %v, double votes %v, split terms %v, regressions %v",
			rep.Overlaps, rep.DoubleVotes, rep.SplitTerms, rep.TermRegressions)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the nearest-rank percentile p (0..100) of sorted xs.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func report(w io.Writer, samples []time.Duration) {
	s := slices.Clone(samples)
	slices.Sort(s)
	fmt.Fprintf(w, "\ntrials %d: min %.1f ms, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		len(s), ms(s[0]), ms(percentile(s, 50)), ms(percentile(s, 90)), ms(percentile(s, 99)), ms(s[len(s)-1]))
}

// transfer asks the group's leader to hand over to nominee, as
// `edge-agent transfer` does, and waits for its answer.
func transfer(nc *nats.Conn, group, nominee string) error {
	body, _ := json.Marshal(agent.ControlRequest{Nominee: nominee})
	msg, err := nc.Request(agent.ControlSubject(agent.DefaultSubjectPrefix, group, "transfer"), body, 5*time.Second)
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
