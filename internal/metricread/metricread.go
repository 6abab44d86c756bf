// Package metricread reads one series of a gauge or counter from a
// Prometheus registry, for the tests that look at an agent's metrics
// through its exported Registry.
package metricread

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the value of the series of the gauge or counter name whose
// labels, less the group label every agent metric carries, are exactly
// labels (nil: none). found is false when there is no such series.
func Value(g prometheus.Gatherer, name string, labels map[string]string) (v float64, found bool, err error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !sameLabels(m.GetLabel(), labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true, nil
			}
			if ga := m.GetGauge(); ga != nil {
				return ga.GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

// sameLabels reports whether got, less the group label, is exactly want.
func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, l := range got {
		if l.GetName() == "group" {
			continue
		}
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
		n++
	}
	return n == len(want)
}
