package edge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// TestPusherAgainstRealPushgateway pushes to a real Pushgateway process:
// the series appear under the grouping labels (and only the edge_election_
// ones), a trigger pushes at once, pushes are retried while the Pushgateway
// is down and the current values show up once it is back, and the final push
// on shutdown carries the last values.
func TestPusherAgainstRealPushgateway(t *testing.T) {
	bin := harness.RequirePushgateway(t)
	pg, err := harness.StartPushgateway(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()

	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "edge_election_term", Help: "term"})
	// A series that carries the grouping label itself, as the agent's
	// edge_election_duty_running does: pushed without it, since the push
	// client refuses a metric that repeats a grouping label.
	duty := prometheus.NewGauge(prometheus.GaugeOpts{Name: "edge_election_duty_running", Help: "duty",
		ConstLabels: prometheus.Labels{"group": "site"}})
	reg.MustRegister(g, duty, collectors.NewGoCollector())
	g.Set(1)
	duty.Set(1)
	const interval = time.Hour // only triggers, retries and the final push
	p, err := NewPusher(PushConfig{URL: pg.URL(), Interval: interval, Timeout: time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Grouping: [][2]string{{"group", "site"}, {"instance", "gw1"}},
		Gatherer: PrefixGatherer(reg, "edge_election_")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	key := map[string]string{"job": DefaultPushJob, "group": "site", "instance": "gw1"}
	value := func() (float64, bool) {
		ms, err := pg.Metrics(context.Background())
		if err != nil {
			return 0, false
		}
		return harness.Find(ms, "edge_election_term", key)
	}
	poll.Until(t, 10*time.Second, "the first push", func() bool { v, ok := value(); return ok && v == 1 })
	ms, err := pg.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := harness.Find(ms, "go_goroutines", key); ok {
		t.Error("go_ series were pushed")
	}
	if _, ok := harness.Find(ms, "push_time_seconds", key); !ok {
		t.Error("no push_time_seconds for the group")
	}
	if v, ok := harness.Find(ms, "edge_election_duty_running", key); !ok || v != 1 {
		t.Errorf("edge_election_duty_running under the group's key: %v %v", v, ok)
	}
	// The registry still has the label: only the push leaves it out.
	if mfs, _ := reg.Gather(); !hasLabel(mfs, "edge_election_duty_running", "group", "site") {
		t.Error("the pusher changed the registry's series")
	}

	g.Set(2)
	p.Trigger()
	poll.Until(t, 10*time.Second, "the triggered push", func() bool { v, _ := value(); return v == 2 })

	// Offline: the Pushgateway goes away; pushes fail and are retried.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	g.Set(3)
	p.Trigger()
	poll.Until(t, 10*time.Second, "two failed pushes", func() bool { _, f, _ := p.Stats(); return f >= 2 })
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	// The Pushgateway has the value before the pusher has read its answer
	// and counted the success: wait for both.
	poll.UntilWhy(t, 10*time.Second, "the retried push after the restart, and the failures cleared", func() (bool, string) {
		v, ok := value()
		_, f, err := p.Stats()
		return ok && v == 3 && f == 0 && err == nil, fmt.Sprintf("value %v (pushed %v), %d failures, %v", v, ok, f, err)
	})

	// Shutdown: the last values are pushed, and left in place.
	g.Set(4)
	cancel()
	<-done
	if v, ok := value(); !ok || v != 4 {
		t.Fatalf("after the final push: %v %v", v, ok)
	}
}

func TestPushConfigValidate(t *testing.T) {
	reg := prometheus.NewRegistry()
	for key, c := range map[string]PushConfig{
		"pushgateway.url:":      {URL: "ftp://x", Gatherer: reg},
		"pushgateway.job:":      {URL: "http://x:9091", Job: "a/b", Gatherer: reg},
		"pushgateway.interval:": {URL: "http://x:9091", Interval: time.Millisecond, Gatherer: reg},
	} {
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	c := PushConfig{URL: "http://pgw.example:9091", Gatherer: reg}
	if err := c.Validate(); err != nil || c.Job != DefaultPushJob || c.Interval != DefaultPushInterval || c.Timeout != 10*time.Second {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

func hasLabel(mfs []*dto.MetricFamily, name, label, value string) bool {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}

// TestWithoutGrouping: labels that repeat the grouping key with its value
// are left out of the pushed series; other labels, and a grouping label
// with another value, stay.
func TestWithoutGrouping(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "m", Help: "m"}, []string{"group", "reason"})
	reg.MustRegister(v)
	v.WithLabelValues("site", "a").Set(1)
	v.WithLabelValues("other", "b").Set(2)
	mfs, err := withoutGrouping(reg, [][2]string{{"group", "site"}, {"instance", "gw1"}}).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mfs[0].GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		got = append(got, strings.Join(ls, ","))
	}
	if strings.Join(got, " ") != "group=other,reason=b reason=a" && strings.Join(got, " ") != "reason=a group=other,reason=b" {
		t.Fatalf("labels %q", got)
	}
}
