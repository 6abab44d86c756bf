package metricread

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValueMatchesLabelsExactly(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h", ConstLabels: prometheus.Labels{"group": "g"}}, []string{"type"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h", ConstLabels: prometheus.Labels{"group": "g"}})
	reg.MustRegister(c, g)
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Add(5)
	g.Set(7)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"c_total", map[string]string{"type": "b"}, 5, true},
		{"c_total", map[string]string{"type": "z"}, 0, false},
		{"c_total", nil, 0, false},
		{"g", nil, 7, true},
		{"g", map[string]string{"type": "a"}, 0, false},
		{"missing", nil, 0, false},
	} {
		v, found, err := Value(reg, tc.name, tc.labels)
		if err != nil || v != tc.want || found != tc.found {
			t.Errorf("Value(%s, %v) = %v, %v, %v; want %v, %v", tc.name, tc.labels, v, found, err, tc.want, tc.found)
		}
	}
}
