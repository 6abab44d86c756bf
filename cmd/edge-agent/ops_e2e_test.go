package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// lineLog collects the agents' log lines (harness.Site.Log).
type lineLog struct {
	mu    sync.Mutex
	lines []string
	echo  bool
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, s)
		if l.echo {
			fmt.Fprintln(os.Stderr, s)
		}
	}
	return len(p), nil
}

// dumpOnFailure logs every line but the DEBUG ones at the end of t, if t
// failed.
func (l *lineLog) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, line := range l.lines {
			if !strings.Contains(line, `"level":"DEBUG"`) {
				t.Log(line)
			}
		}
	})
}

// count returns how many lines contain every one of subs.
func (l *lineLog) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.lines {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// TestE2EPushgatewayAndWatch runs three agent processes that push to a real
// Pushgateway and a real `edge-agent watch`: the agents' metrics appear in
// the Pushgateway under job, group and instance; with the Pushgateway
// stopped, a transfer changes the leader (watch streams it) and the pushes
// fail; once the Pushgateway is back the change shows up there; a leader
// stopped with SIGTERM leaves its final values (is_leader 0).
func TestE2EPushgatewayAndWatch(t *testing.T) {
	pgBin := harness.RequirePushgateway(t)
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	pg, err := harness.StartPushgateway(pgBin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	logs := &lineLog{echo: testing.Verbose() && os.Getenv("E2E_LOG") != ""}
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "100ms", "--preemption", "never",
		"--pushgateway-url", pg.URL(), "--push-interval", "250ms")
	site.Log = logs
	defer site.Stop()

	// watch, started before the agents, sees every change from the first.
	watch := exec.Command(binary, "watch", "--json", "--nats-url", ns.ClientURL(), "--group", "site")
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	var evMu sync.Mutex
	var events []agent.LeaderChange
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var c agent.LeaderChange
			if json.Unmarshal(sc.Bytes(), &c) == nil {
				evMu.Lock()
				events = append(events, c)
				evMu.Unlock()
			}
		}
	}()
	sawEvent := func(id, leader string, term uint64) bool {
		evMu.Lock()
		defer evMu.Unlock()
		for _, c := range events {
			if c.ID == id && c.Leader == leader && c.Term == term && c.Group == "site" && c.Seq > 0 {
				return true
			}
		}
		return false
	}
	// Let watch subscribe before the first election (D = 300ms away).
	poll.UntilWhy(t, 10*time.Second, "watch to subscribe", func() (bool, string) {
		return ns.NumSubscriptions() > 0, "no subscription yet"
	})
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	first, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// pushed reports whether the Pushgateway shows every agent in ids
	// following leader in term.
	pushed := func(ids []string, leader string, term uint64) (bool, string) {
		ms, err := pg.Metrics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, id := range ids {
			key := map[string]string{"job": "edge-agent", "group": "site", "instance": id}
			want := 0.0
			if id == leader {
				want = 1
			}
			if v, ok := harness.Find(ms, "edge_election_is_leader", key); !ok || v != want {
				return false, fmt.Sprintf("%s: is_leader %v (found %v), want %v", id, v, ok, want)
			}
			if v, ok := harness.Find(ms, "edge_election_term", key); !ok || v != float64(term) {
				return false, fmt.Sprintf("%s: term %v, want %d", id, v, term)
			}
			key["leader"] = leader
			if v, ok := harness.Find(ms, "edge_election_leader", key); !ok || v != 1 {
				return false, fmt.Sprintf("%s: no edge_election_leader{leader=%q}", id, leader)
			}
		}
		return true, ""
	}
	poll.UntilWhy(t, 10*time.Second, "the first leadership in the Pushgateway", func() (bool, string) { return pushed(ids, first.Leader, first.Term) })
	ms, err := pg.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := harness.Find(ms, "edge_election_election_duration_seconds_count",
		map[string]string{"instance": first.Leader, "result": "won"}); !ok || v < 1 {
		t.Errorf("no election duration pushed for the winner %s: %v %v", first.Leader, v, ok)
	}
	if _, ok := harness.Find(ms, "go_goroutines", map[string]string{"instance": first.Leader}); ok {
		t.Error("go_ series were pushed")
	}
	for _, id := range ids {
		id := id
		poll.UntilWhy(t, 10*time.Second, "watch to stream "+id+"'s first leader", func() (bool, string) {
			return sawEvent(id, first.Leader, first.Term), "not yet"
		})
	}

	// Offline: the Pushgateway goes away, the leader changes.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	nominee := "gw1"
	if out, err := exec.Command(binary, "transfer", nominee, "--nats-url", ns.ClientURL(), "--group", "site").CombinedOutput(); err != nil {
		t.Fatalf("transfer: %v\n%s", err, out)
	}
	second, err := site.WaitAgreement(ids, first.Leader, first.Term, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		id := id
		poll.UntilWhy(t, 10*time.Second, "watch to stream the transfer seen by "+id, func() (bool, string) {
			return sawEvent(id, second.Leader, second.Term), "not yet"
		})
	}
	poll.UntilWhy(t, 10*time.Second, "every agent to fail a push", func() (bool, string) {
		n := logs.count("push to the Pushgateway failed")
		return n >= len(ids), fmt.Sprintf("%d agents logged a failed push", n)
	})
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	poll.UntilWhy(t, 10*time.Second, "the change in the restarted Pushgateway", func() (bool, string) { return pushed(ids, second.Leader, second.Term) })
	if n := logs.count("pushes to the Pushgateway resumed"); n == 0 {
		t.Error("no agent logged that its pushes resumed")
	}

	// SIGTERM the leader: it hands over and its final push says so.
	if err := site.Terminate(second.Leader); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, id := range ids {
		if id != second.Leader {
			rest = append(rest, id)
		}
	}
	third, err := site.WaitAgreement(rest, second.Leader, second.Term, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	poll.UntilWhy(t, 10*time.Second, "the final push of the stopped leader", func() (bool, string) {
		ok, why := pushed(rest, third.Leader, third.Term)
		if !ok {
			return false, why
		}
		ms, err := pg.Metrics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		v, found := harness.Find(ms, "edge_election_is_leader", map[string]string{"instance": second.Leader})
		return found && v == 0, fmt.Sprintf("%s: is_leader %v (found %v)", second.Leader, v, found)
	})
}
