// Command failoverbench measures crash failover and graceful handover of real
// edge-agent processes on one real NATS server: it SIGKILLs (-mode kill) or
// SIGTERMs (-mode term) the leader, or asks it over NATS to hand over to
// another member (-mode transfer, as `edge-agent transfer` does; the leader
// keeps running), then polls every agent's /status until all report the
// same new leader in a higher term. It prints p50/p99 over the trials, by
// that polling and by the agents' own clocks: each agent publishes the
// moment it saw the new leader (agent.EventsSubject), so the second figure
// is free of the polling's delays (an HTTP round of /status requests, and a
// benchmark process that shares the machine's two cores with the agents).
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
	"sync"
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
	fmt.Printf("failover of %d agent processes, %s, H=%s k=%d (D=%s), mode=%s, detection: %s, poll %s\n",
		n, bus, hb, misses, time.Duration(misses)*hb, mode, path, poll)
	var samples, seen []time.Duration
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
		var exited chan error
		t0 := time.Now()
		switch mode {
		case "kill":
			err = site.Kill(victim)
		case "term":
			// The handover ends when the others agree on the successor, not
			// when the old process has finished exiting (closing its
			// connections, flushing its last pushes): poll from the signal on.
			exited = make(chan error, 1)
			go func() { exited <- site.Terminate(victim) }()
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
		if exited != nil {
			if err := <-exited; err != nil {
				return fmt.Errorf("trial %d: SIGTERM %s: %w", i, victim, err)
			}
		}
		d := next.At.Sub(t0)
		samples = append(samples, d)
		if at, ok := events.agreed(waitFor, next.Leader, next.Term, 2*time.Second); ok {
			seen = append(seen, at.Sub(t0))
		}
		fmt.Printf("trial %2d: %s -> %s term %d->%d in %6.1f ms\n", i+1, victim, next.Leader, cur.Term, next.Term, ms(d))
		if mode == "transfer" {
			cur = next
			continue
		}
		if _, err := site.Start(victim); err != nil {
			return err
		}
		// A member that just started neither votes nor stands for D (it may
		// have acknowledged a leader right before it went down): wait that
		// out, or the next trial measures the restarted member's quiet
		// period rather than the failover.
		time.Sleep(time.Duration(misses) * hb)
		cur, err = site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d: after restart: %w", i, err)
		}
	}
	report(os.Stdout, "polling /status", samples)
	if len(seen) > 0 {
		report(os.Stdout, "agents' own clocks (leader-change events)", seen)
	}
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

func report(w io.Writer, how string, samples []time.Duration) {
	s := slices.Clone(samples)
	slices.Sort(s)
	fmt.Fprintf(w, "\n%s: trials %d: min %.1f ms, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		how, len(s), ms(s[0]), ms(percentile(s, 50)), ms(percentile(s, 90)), ms(percentile(s, 99)), ms(s[len(s)-1]))
}

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
	deadline := time.Now().Add(timeout)
	for {
		var last time.Time
		n := 0
		l.mu.Lock()
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
		l.mu.Unlock()
		if n == len(ids) {
			return last, true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(5 * time.Millisecond)
	}
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
