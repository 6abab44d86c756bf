package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gathered returns every family reg gathers as text, without the created
// timestamps that client_golang's own counters and histograms carry (the
// text format the agent serves does not show them).
func gathered(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				c.CreatedTimestamp = nil
			}
			if h := m.GetHistogram(); h != nil {
				h.CreatedTimestamp = nil
			}
		}
		out = append(out, mf.String())
	}
	return out
}

// A scrape of the agent's families shows what client_golang's own vectors
// show for the same series and updates: names, help, types, labels, values,
// histogram buckets, deleted series gone.
func TestMetricFamiliesScrapeAsClientGolang(t *testing.T) {
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	fam := NewMetricFamilies(ours)
	gOpts := prometheus.GaugeOpts{Name: "edge_test_gauge", Help: "A gauge."}
	cOpts := prometheus.CounterOpts{Name: "edge_test_total", Help: "A counter."}
	vOpts := prometheus.CounterOpts{Name: "edge_test_by_kind_total", Help: "A counter by kind."}
	lOpts := prometheus.GaugeOpts{Name: "edge_test_leader", Help: "A gauge by leader."}
	hOpts := prometheus.HistogramOpts{Name: "edge_test_seconds", Help: "A histogram.", Buckets: persistBuckets}
	rOpts := prometheus.HistogramOpts{Name: "edge_test_result_seconds", Help: "A histogram by result.", Buckets: electionBuckets}
	g := prometheus.NewGaugeVec(gOpts, []string{"group"})
	c := prometheus.NewCounterVec(cOpts, []string{"group"})
	v := prometheus.NewCounterVec(vOpts, []string{"group", "kind", "direction"})
	l := prometheus.NewGaugeVec(lOpts, []string{"group", "leader"})
	h := prometheus.NewHistogramVec(hOpts, []string{"group"})
	r := prometheus.NewHistogramVec(rOpts, []string{"group", "result"})
	theirs.MustRegister(g, c, v, l, h, r)
	for _, group := range []string{"site-a", "site-b"} {
		s := groupSeries{fam, group}
		og, oc, ov, ol, oh, or := s.gauge(gOpts), s.counter(cOpts), s.counterVec(vOpts, "kind", "direction"),
			s.gaugeVec(lOpts, "leader"), s.histogram(hOpts), s.histogramVec(rOpts, "result")
		tg, tc, tv, tl := g.WithLabelValues(group), c.WithLabelValues(group), v.MustCurryWith(prometheus.Labels{"group": group}), l.MustCurryWith(prometheus.Labels{"group": group})
		th, tr := h.WithLabelValues(group), r.MustCurryWith(prometheus.Labels{"group": group})
		for _, x := range []prometheus.Gauge{og, tg} {
			x.Set(7)
			x.Add(2.5)
			x.Dec()
			x.Sub(0.25)
		}
		for _, x := range []prometheus.Counter{oc, tc} {
			x.Inc()
			x.Add(41)
		}
		ov.WithLabelValues("heartbeat", "in").Add(3)
		tv.WithLabelValues("heartbeat", "in").Add(3)
		ov.WithLabelValues("ack", "out").Inc()
		tv.WithLabelValues("ack", "out").Inc()
		for _, leader := range []string{"gw1", "gw2"} {
			ol.WithLabelValues(leader).Set(1)
			tl.WithLabelValues(leader).Set(1)
		}
		if !ol.DeleteLabelValues("gw1") || !tl.DeleteLabelValues("gw1") || ol.DeleteLabelValues("gw9") {
			t.Fatal("DeleteLabelValues answered wrong")
		}
		// On a bound, between bounds, below the first and above the last.
		for _, x := range []float64{0.001, 0.0033, 0.0001, 7, 0.25} {
			oh.Observe(x)
			th.Observe(x)
			or.WithLabelValues("won").Observe(x * 10)
			tr.WithLabelValues("won").Observe(x * 10)
		}
		or.WithLabelValues("failed").Observe(200)
		tr.WithLabelValues("failed").Observe(200)
		// The same series again is the same series.
		if s.gauge(gOpts).(*series) != og.(*series) {
			t.Error("a group's gauge made twice is two series")
		}
	}
	got, want := gathered(t, ours), gathered(t, theirs)
	if len(got) != len(want) {
		t.Fatalf("%d families, client_golang gives %d:\n%q\n%q", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("family %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	var m dto.Metric
	again := groupSeries{fam, "site-a"}
	if err := again.counter(cOpts).Write(&m); err != nil || m.GetCounter().GetValue() != 42 {
		t.Errorf("counter Write: %v %v", m.GetCounter().GetValue(), err)
	}
}
