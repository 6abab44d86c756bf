package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// TestE2EPushedMetricsFollowTheDuty runs a three-gateway group with a
// leader duty (after an on_elected hook of 0.3 s) that pushes to a real
// Pushgateway only when something happens (the interval is an hour): the
// push of the leader change comes before the duty runs, so the Pushgateway
// must get the leader's edge_election_duty_running 1 from a push made once
// the duty started; the counters of every message type are pushed, at zero
// for the Ring types a Bully group never sends; the build info is there;
// and the final push on SIGTERM shows the duty stopped, with no
// "context canceled" warning from the push the handover triggered.
func TestE2EPushedMetricsFollowTheDuty(t *testing.T) {
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
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "200ms", "--preemption", "never",
		"--pushgateway-url", pg.URL(), "--push-interval", "1h", "--leader-command", "sleep 600", "--leader-on-elected", "sleep 0.3")
	logs := &lineLog{}
	site.Log = logs
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	// The leader whose duty runs, as the Pushgateway and its own /metrics
	// show it (on a loaded machine the first leader may lose its lease).
	var leader string
	var key map[string]string
	value := func(name string, labels map[string]string) (float64, bool, error) {
		ms, err := pg.Metrics(context.Background())
		if err != nil {
			return 0, false, err
		}
		match := map[string]string{}
		for k, v := range key {
			match[k] = v
		}
		for k, v := range labels {
			match[k] = v
		}
		v, ok := harness.Find(ms, name, match)
		return v, ok, nil
	}
	poll.UntilWhy(t, 30*time.Second, "the Pushgateway to show a leader with its duty running", func() (bool, string) {
		why := ""
		for _, id := range site.IDs() {
			leader, key = id, map[string]string{"job": "edge-agent", "group": "site", "instance": id}
			lead, _, err := value("edge_election_is_leader", nil)
			duty, _, _ := value("edge_election_duty_running", nil)
			if err != nil || lead != 1 || duty != 1 {
				why += fmt.Sprintf("%s: pushed is_leader %v, duty_running %v, err %v; ", id, lead, duty, err)
				continue
			}
			// The agent's own /metrics carries the group on every
			// edge_election_ series, and the build info.
			_, m := httpGet(t, "http://"+site.Proc(id).HTTPAddr+"/metrics")
			if strings.Contains(m, `edge_election_duty_running{group="site"} 1`) &&
				strings.Contains(m, `edge_election_build_info{group="site",protocol="`+strconv.Itoa(wire.ProtocolMax)+`",version="`) {
				return true, ""
			}
			why += id + ": pushed as leader with its duty, but its /metrics lacks the grouped duty_running 1 or build info; "
		}
		return false, why
	})
	for _, typ := range []string{"ring_token", "ring_ack"} {
		if v, ok, _ := value("edge_election_messages_total", map[string]string{"type": typ, "direction": "in"}); !ok || v != 0 {
			t.Errorf("pushed edge_election_messages_total{type=%q,direction=\"in\"}: %v %v, want 0", typ, v, ok)
		}
	}
	if v, ok, _ := value("edge_election_build_info", map[string]string{"protocol": strconv.Itoa(wire.ProtocolMax)}); !ok || v != 1 {
		t.Errorf("pushed edge_election_build_info{protocol=%q}: %v %v", strconv.Itoa(wire.ProtocolMax), v, ok)
	}
	if err := site.Terminate(leader); err != nil { // waits for the exit
		t.Fatal(err)
	}
	lead, _, _ := value("edge_election_is_leader", nil)
	duty, _, err := value("edge_election_duty_running", nil)
	if err != nil || lead != 0 || duty != 0 {
		t.Errorf("after SIGTERM the Pushgateway shows is_leader %v, duty_running %v (%v); want 0 and 0", lead, duty, err)
	}
	if lines := logs.matching("context canceled"); len(lines) != 0 {
		t.Errorf("log lines say context canceled on a normal shutdown:\n%s", strings.Join(lines, "\n"))
	}
}

// matching returns the lines that contain sub.
func (l *lineLog) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}
