package agent

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricFamilies are the agent's metric families on one registry. Every
// edge_election_ series carries the election group as its group label, and
// the agents of many groups on one registry (a witness process serving a
// thousand sites, package witness) share one family, that is one
// descriptor and one registration, per name; each agent holds only its
// own series (the family's children with its group's label). Registering
// each agent's series on its own instead, through a registerer that adds
// the label, gave each group a copy of every descriptor and registry entry:
// about 20 KB of heap a group.
//
// What a scrape shows is the same either way: the same names, help texts,
// labels and values.
type MetricFamilies struct {
	reg prometheus.Registerer

	mu   sync.Mutex
	vecs map[string]prometheus.Collector // by metric name
}

// NewMetricFamilies returns the families of reg, empty until an agent
// (WithMetricFamilies) registers its series.
func NewMetricFamilies(reg prometheus.Registerer) *MetricFamilies {
	return &MetricFamilies{reg: reg, vecs: map[string]prometheus.Collector{}}
}

// WithMetricFamilies registers the agent's series in f, a set of families
// that the agents of other groups on f's registry share. The agent's
// registry (WithRegistry) should be f's.
func WithMetricFamilies(f *MetricFamilies) Option {
	return func(a *Agent) error { a.out.fam = f; return nil }
}

// family returns the family called name, made by newVec and registered on
// first use. It panics if the name is registered on the registry otherwise
// or was made here with another kind or labels: a programming error, as
// with promauto.
func family[V prometheus.Collector](f *MetricFamilies, name string, labels []string, newVec func(labels []string) V) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.vecs[name]; ok {
		v, ok := c.(V)
		if !ok {
			panic(fmt.Sprintf("agent metrics: %s made twice with different kinds", name))
		}
		return v
	}
	v := newVec(append([]string{"group"}, labels...))
	if err := f.reg.Register(v); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			panic(fmt.Sprintf("agent metrics: %s: %v", name, err))
		}
		existing, ok := dup.ExistingCollector.(V)
		if !ok {
			panic(fmt.Sprintf("agent metrics: %s is registered otherwise", name))
		}
		v = existing
	}
	f.vecs[name] = v
	return v
}

// groupSeries makes one group's series in its families, with the methods
// of promauto's factory that the agent uses.
type groupSeries struct {
	f     *MetricFamilies
	group string
}

func (g groupSeries) label() prometheus.Labels { return prometheus.Labels{"group": g.group} }

func (g groupSeries) gauge(o prometheus.GaugeOpts) prometheus.Gauge {
	return g.gaugeVec(o).WithLabelValues()
}

func (g groupSeries) gaugeVec(o prometheus.GaugeOpts, labels ...string) *prometheus.GaugeVec {
	v := family(g.f, o.Name, labels, func(l []string) *prometheus.GaugeVec { return prometheus.NewGaugeVec(o, l) })
	return v.MustCurryWith(g.label())
}

func (g groupSeries) counter(o prometheus.CounterOpts) prometheus.Counter {
	return g.counterVec(o).WithLabelValues()
}

func (g groupSeries) counterVec(o prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	v := family(g.f, o.Name, labels, func(l []string) *prometheus.CounterVec { return prometheus.NewCounterVec(o, l) })
	return v.MustCurryWith(g.label())
}

func (g groupSeries) histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	return g.histogramVec(o).WithLabelValues().(prometheus.Histogram) // a HistogramVec's child
}

func (g groupSeries) histogramVec(o prometheus.HistogramOpts, labels ...string) prometheus.ObserverVec {
	v := family(g.f, o.Name, labels, func(l []string) *prometheus.HistogramVec { return prometheus.NewHistogramVec(o, l) })
	return v.MustCurryWith(g.label())
}
