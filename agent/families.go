package agent

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricFamilies are the agent's metric families on one registry. Every
// edge_election_ series carries the election group as its group label, and
// the agents of many groups on one registry (a witness process serving a
// thousand sites, package witness) share one family, that is one
// descriptor and one registration, per name.
//
// A family keeps each series as its bare value (a float, or a histogram's
// counts) and makes it a Prometheus metric only when scraped: client_golang's
// own vectors keep every series ready to scrape, with its label pairs as
// protobuf messages and a hashed index, about 500 bytes a series, 11 KB for
// each group of a witness; here a series costs its value, its key and a map
// entry. What a scrape shows is the same: names, help texts, types, labels
// and values.
type MetricFamilies struct {
	reg prometheus.Registerer

	mu   sync.Mutex
	fams map[string]*family // by metric name
}

// NewMetricFamilies returns the families of reg, empty until an agent
// (WithMetricFamilies) registers its series.
func NewMetricFamilies(reg prometheus.Registerer) *MetricFamilies {
	return &MetricFamilies{reg: reg, fams: map[string]*family{}}
}

// WithMetricFamilies registers the agent's series in f, a set of families
// that the agents of other groups on f's registry share. The agent's
// registry (WithRegistry) should be f's.
func WithMetricFamilies(f *MetricFamilies) Option {
	return func(a *Agent) error { a.out.fam = f; return nil }
}

// family is every series of one metric name: a prometheus.Collector
// registered once.
type family struct {
	desc    *prometheus.Desc
	kind    prometheus.ValueType // GaugeValue or CounterValue; UntypedValue: a histogram
	buckets []float64            // a histogram's upper bounds
	labels  int                  // label values of a series, the group first

	mu     sync.RWMutex
	series map[string]*series // by their label values, joined by keySep
}

// keySep joins a series' label values into its key; label values cannot
// hold it (UTF-8 text never has the byte 0xff).
const keySep = "\xff"

// family returns the family called name, made and registered on first use.
// It panics if the name was made here with another kind or labels, or is
// registered on the registry otherwise: a programming error, as with
// promauto.
func (f *MetricFamilies) family(name, help string, kind prometheus.ValueType, buckets []float64, labels []string) *family {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := append([]string{"group"}, labels...)
	if fam, ok := f.fams[name]; ok {
		if fam.kind != kind || fam.labels != len(all) {
			panic(fmt.Sprintf("agent metrics: %s made twice with different kinds or labels", name))
		}
		return fam
	}
	fam := &family{desc: prometheus.NewDesc(name, help, all, nil), kind: kind, buckets: buckets,
		labels: len(all), series: map[string]*series{}}
	if err := f.reg.Register(fam); err != nil {
		// Another set of families on the registry made it: share it.
		var dup prometheus.AlreadyRegisteredError
		theirs, ok := (*family)(nil), errors.As(err, &dup)
		if ok {
			theirs, ok = dup.ExistingCollector.(*family)
		}
		if !ok || theirs.kind != kind || theirs.labels != len(all) {
			panic(fmt.Sprintf("agent metrics: %s: %v", name, err))
		}
		fam = theirs
	}
	f.fams[name] = fam
	return fam
}

func (fam *family) Describe(ch chan<- *prometheus.Desc) { ch <- fam.desc }

func (fam *family) Collect(ch chan<- prometheus.Metric) {
	fam.mu.RLock()
	defer fam.mu.RUnlock()
	for _, s := range fam.series {
		ch <- s
	}
}

// get returns the series of the label values lvs (the group first), made
// on first use.
func (fam *family) get(lvs []string) *series {
	if len(lvs) != fam.labels {
		panic(fmt.Sprintf("agent metrics: %s: %d label values, want %d", fam.desc, len(lvs), fam.labels))
	}
	key := strings.Join(lvs, keySep)
	fam.mu.RLock()
	s, ok := fam.series[key]
	fam.mu.RUnlock()
	if ok {
		return s
	}
	fam.mu.Lock()
	defer fam.mu.Unlock()
	if s, ok := fam.series[key]; ok {
		return s
	}
	s = &series{fam: fam, key: key}
	if fam.kind == prometheus.UntypedValue {
		s.h = &histValues{counts: make([]uint64, len(fam.buckets))}
	}
	fam.series[key] = s
	return s
}

// drop removes the series of lvs (the group first), if it exists.
func (fam *family) drop(lvs []string) bool {
	key := strings.Join(lvs, keySep)
	fam.mu.Lock()
	defer fam.mu.Unlock()
	_, ok := fam.series[key]
	delete(fam.series, key)
	return ok
}

// series is one series of a family: a gauge's or counter's value, or a
// histogram's counts. It is a prometheus.Gauge, Counter and Histogram (the
// family's kind says which it is) and writes itself when scraped.
type series struct {
	fam  *family
	key  string
	bits atomic.Uint64 // the value's float64 bits (gauges, counters)
	h    *histValues   // histograms only
}

// histValues are a histogram's observations per bucket (not cumulative),
// their count and their sum.
type histValues struct {
	mu     sync.Mutex
	counts []uint64
	count  uint64
	sum    float64
}

func (s *series) Desc() *prometheus.Desc { return s.fam.desc }

func (s *series) Write(m *dto.Metric) error {
	m.Label = prometheus.MakeLabelPairs(s.fam.desc, strings.Split(s.key, keySep))
	switch s.fam.kind {
	case prometheus.GaugeValue:
		v := s.value()
		m.Gauge = &dto.Gauge{Value: &v}
	case prometheus.CounterValue:
		v := s.value()
		m.Counter = &dto.Counter{Value: &v}
	default:
		m.Histogram = s.h.write(s.fam.buckets)
	}
	return nil
}

func (s *series) Describe(ch chan<- *prometheus.Desc) { ch <- s.fam.desc }
func (s *series) Collect(ch chan<- prometheus.Metric) { ch <- s }

func (s *series) value() float64 { return math.Float64frombits(s.bits.Load()) }

func (s *series) Set(v float64)     { s.bits.Store(math.Float64bits(v)) }
func (s *series) Inc()              { s.Add(1) }
func (s *series) Dec()              { s.Add(-1) }
func (s *series) Sub(v float64)     { s.Add(-v) }
func (s *series) SetToCurrentTime() { s.Set(float64(time.Now().UnixNano()) / 1e9) }

func (s *series) Add(v float64) {
	if s.fam.kind == prometheus.CounterValue && v < 0 {
		panic("agent metrics: a counter cannot decrease")
	}
	for {
		old := s.bits.Load()
		if s.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (s *series) Observe(v float64) {
	h := s.h
	i := sort.SearchFloat64s(s.fam.buckets, v) // the first bound >= v
	h.mu.Lock()
	defer h.mu.Unlock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.count++
	h.sum += v
}

func (h *histValues) write(bounds []float64) *dto.Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	count, sum := h.count, h.sum
	out := &dto.Histogram{SampleCount: &count, SampleSum: &sum, Bucket: make([]*dto.Bucket, len(bounds))}
	var cum uint64
	for i, ub := range bounds {
		cum += h.counts[i]
		c, b := cum, ub
		out.Bucket[i] = &dto.Bucket{CumulativeCount: &c, UpperBound: &b}
	}
	return out
}

// The vectors the agent uses: one group's series of a family with labels
// beside the group.
type (
	counterVec interface {
		WithLabelValues(...string) prometheus.Counter
	}
	observerVec interface {
		WithLabelValues(...string) prometheus.Observer
	}
	gaugeVec interface {
		WithLabelValues(...string) prometheus.Gauge
		DeleteLabelValues(...string) bool
	}
)

// groupVec is one group's part of a family with labels beside the group.
type groupVec struct {
	fam   *family
	group string
}

func (v groupVec) get(lvs []string) *series {
	return v.fam.get(append([]string{v.group}, lvs...))
}

func (v groupVec) DeleteLabelValues(lvs ...string) bool {
	return v.fam.drop(append([]string{v.group}, lvs...))
}

type groupCounterVec struct{ groupVec }

func (v groupCounterVec) WithLabelValues(lvs ...string) prometheus.Counter { return v.get(lvs) }

type groupGaugeVec struct{ groupVec }

func (v groupGaugeVec) WithLabelValues(lvs ...string) prometheus.Gauge { return v.get(lvs) }

type groupObserverVec struct{ groupVec }

func (v groupObserverVec) WithLabelValues(lvs ...string) prometheus.Observer { return v.get(lvs) }

// groupSeries makes one group's series in its families, with the methods
// of promauto's factory that the agent uses.
type groupSeries struct {
	f     *MetricFamilies
	group string
}

func (g groupSeries) vec(name, help string, kind prometheus.ValueType, buckets []float64, labels []string) groupVec {
	return groupVec{g.f.family(name, help, kind, buckets, labels), g.group}
}

func (g groupSeries) gauge(o prometheus.GaugeOpts) prometheus.Gauge {
	return g.vec(o.Name, o.Help, prometheus.GaugeValue, nil, nil).get(nil)
}

func (g groupSeries) gaugeVec(o prometheus.GaugeOpts, labels ...string) gaugeVec {
	return groupGaugeVec{g.vec(o.Name, o.Help, prometheus.GaugeValue, nil, labels)}
}

func (g groupSeries) counter(o prometheus.CounterOpts) prometheus.Counter {
	return g.vec(o.Name, o.Help, prometheus.CounterValue, nil, nil).get(nil)
}

func (g groupSeries) counterVec(o prometheus.CounterOpts, labels ...string) counterVec {
	return groupCounterVec{g.vec(o.Name, o.Help, prometheus.CounterValue, nil, labels)}
}

func (g groupSeries) histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	return g.vec(o.Name, o.Help, prometheus.UntypedValue, o.Buckets, nil).get(nil)
}

func (g groupSeries) histogramVec(o prometheus.HistogramOpts, labels ...string) observerVec {
	return groupObserverVec{g.vec(o.Name, o.Help, prometheus.UntypedValue, o.Buckets, labels)}
}
