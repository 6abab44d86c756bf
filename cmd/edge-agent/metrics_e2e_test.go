package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "100ms",
		"--pushgateway-url", pg.URL(), "--push-interval", "1h", "--leader-command", "sleep 600", "--leader-on-elected", "sleep 0.3")
	logs := &lineLog{}
	site.Log = logs
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader := first.Leader
	key := map[string]string{"job": "edge-agent", "group": "site", "instance": leader}
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
	poll.UntilWhy(t, 20*time.Second, "the Pushgateway to show the leader with its duty running", func() (bool, string) {
		lead, _, err := value("edge_election_is_leader", nil)
		duty, _, _ := value("edge_election_duty_running", nil)
		return err == nil && lead == 1 && duty == 1, fmt.Sprintf("is_leader %v, duty_running %v, err %v", lead, duty, err)
	})
	for _, typ := range []string{"ring_token", "ring_ack"} {
		if v, ok, _ := value("edge_election_messages_total", map[string]string{"type": typ, "direction": "in"}); !ok || v != 0 {
			t.Errorf("pushed edge_election_messages_total{type=%q,direction=\"in\"}: %v %v, want 0", typ, v, ok)
		}
	}
	if v, ok, _ := value("edge_election_build_info", map[string]string{"protocol": "1"}); !ok || v != 1 {
		t.Errorf("pushed edge_election_build_info{protocol=\"1\"}: %v %v", v, ok)
	}
	// The agent's own /metrics carries the group on every edge_election_
	// series, and the version of `edge-agent version` in the build info.
	_, m := httpGet(t, "http://"+site.Proc(leader).HTTPAddr+"/metrics")
	if !strings.Contains(m, `edge_election_duty_running{group="site"} 1`) ||
		!strings.Contains(m, `edge_election_build_info{group="site",protocol="1",version="`) {
		t.Errorf("/metrics lacks the grouped duty or build info series:\n%s", m)
	}
	if err := site.Terminate(leader); err != nil { // waits for the exit
		t.Fatal(err)
	}
	lead, _, _ := value("edge_election_is_leader", nil)
	duty, _, err := value("edge_election_duty_running", nil)
	if err != nil || lead != 0 || duty != 0 {
		t.Errorf("after SIGTERM the Pushgateway shows is_leader %v, duty_running %v (%v); want 0 and 0", lead, duty, err)
	}
	if n := logs.count("context canceled"); n != 0 {
		t.Errorf("%d log lines say context canceled on a normal shutdown", n)
	}
}
