package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// scrape returns the agent's /metrics as the HTTP handler serves it.
func scrape(t *testing.T, a *Agent) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// TestMetricsFirstScrape: the first scrape of a one-member group, before
// any message was sent, has every labelled counter at zero, the group label
// on every edge_election_ series (and on none of the Go and process ones)
// and the build info.
func TestMetricsFirstScrape(t *testing.T) {
	members := []election.Member{{ID: "gw1", Priority: 1}}
	cfg := Config{ID: "gw1", Group: "site", Members: members, Heartbeat: 100 * time.Millisecond, StateDir: t.TempDir()}
	a, err := New(cfg, WithTransport(NewMemNetwork().Join("gw1")), WithVersion("1.2.3"),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer a.store.Close()
	text := scrape(t, a)
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		lines[l] = true
		name := l[:strings.IndexAny(l, "{ ")]
		grouped := strings.Contains(l, `group="site"`)
		switch {
		case strings.HasPrefix(name, "edge_election_") && !grouped:
			t.Errorf("no group label: %s", l)
		case !strings.HasPrefix(name, "edge_election_") && grouped:
			t.Errorf("a runtime series with the group label: %s", l)
		}
	}
	want := []string{`edge_election_build_info{group="site",protocol="` + strconv.Itoa(wire.ProtocolMax) + `",version="1.2.3"} 1`}
	// The wire types of the README's contract, both directions.
	for _, typ := range []string{"heartbeat", "ack", "election", "ok", "coordinator", "vote", "resign",
		"ring_token", "ring_ack", "pre_vote", "pre_vote_reply", "withdraw"} {
		for _, dir := range []string{"in", "out"} {
			want = append(want, fmt.Sprintf(`edge_election_messages_total{direction=%q,group="site",type=%q} 0`, dir, typ))
		}
	}
	for _, r := range []string{"resigned", "lease_expired", "higher_term", "route_lost", "connection_lost", "other"} {
		want = append(want, fmt.Sprintf(`edge_election_step_downs_total{group="site",reason=%q} 0`, r))
	}
	want = append(want, `edge_election_elections_total{group="site",result="failed"} 0`,
		`edge_election_bad_messages_total{group="site",reason="stale_term"} 0`,
		`edge_election_control_requests_total{group="site",result="ok",verb="transfer"} 0`,
		`edge_election_algorithm_mismatch_members{group="site"} 0`,
		`edge_election_duty_running{group="site"} 0`)
	for _, w := range want {
		if !lines[w] {
			t.Errorf("first scrape lacks %s", w)
		}
	}
	if !strings.Contains(text, "\ngo_goroutines ") {
		t.Error("no go_goroutines series without labels")
	}
}

// TestBuildInfoWithoutVersion: a library user who gives no version still
// gets the series, with version "unknown".
func TestBuildInfoWithoutVersion(t *testing.T) {
	members := []election.Member{{ID: "gw1", Priority: 1}}
	cfg := Config{ID: "gw1", Group: "g", Members: members, Heartbeat: 100 * time.Millisecond, StateDir: t.TempDir()}
	a, err := New(cfg, WithTransport(NewMemNetwork().Join("gw1")), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.store.Close()
	if w := `edge_election_build_info{group="g",protocol="` + strconv.Itoa(wire.ProtocolMax) + `",version="unknown"} 1`; !strings.Contains(scrape(t, a), w) {
		t.Errorf("no %s", w)
	}
}

// labelOf returns the value of m's label name, or "".
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Sparse metrics (a witness process's thousand groups) leave out the zero
// series that the agent otherwise declares, and count as usual.
func TestSparseMetrics(t *testing.T) {
	series := func(sparse bool, count func(*metrics)) (total int, bad float64) {
		reg := prometheus.NewRegistry()
		m := newMetrics(NewMetricFamilies(reg), reg, false, sparse, "site", "")
		count(m)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			total += len(mf.GetMetric())
			if mf.GetName() == "edge_election_bad_messages_total" {
				for _, s := range mf.GetMetric() {
					bad += s.GetCounter().GetValue()
				}
			}
		}
		return total, bad
	}
	full, _ := series(false, func(*metrics) {})
	sparse, _ := series(true, func(*metrics) {})
	if sparse*4 > full {
		t.Errorf("sparse: %d series, declared: %d; want under a quarter", sparse, full)
	}
	n, bad := series(true, func(m *metrics) { m.badMessage("malformed"); m.badMessage("malformed") })
	if n != sparse+1 || bad != 2 {
		t.Errorf("sparse after two malformed messages: %d series (want %d), %v counted (want 2)", n, sparse+1, bad)
	}
}

// seriesOf returns every series gathered from g as "name{labels} value"
// (a histogram's value: its count and sum), sorted.
func seriesOf(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			v := fmt.Sprint(m.GetGauge().GetValue() + m.GetCounter().GetValue())
			if h := m.GetHistogram(); h != nil {
				v = fmt.Sprint(h.GetSampleCount(), h.GetSampleSum())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"} "+v)
		}
	}
	slices.Sort(out)
	return out
}

// The agents of many groups on one registry (a witness process) share one
// family per name, and a scrape shows exactly the series that each group's
// agent on a registry of its own shows, each with its group label.
func TestGroupsShareMetricFamilies(t *testing.T) {
	use := func(m *metrics, group string) {
		m.message(election.MsgHeartbeat, "in")
		m.badMessage("malformed")
		m.control("status", "ok")
		m.setLeader("", "gw-"+group)
		m.persistSeconds.Observe(0.002)
		m.electionStarted(time.Second)
		m.electionEnded("won", 2*time.Second)
		m.term.Set(float64(len(group)))
	}
	groups := []string{"site-a", "site-bb", "site-ccc"}
	shared := prometheus.NewRegistry()
	fam := NewMetricFamilies(shared)
	var want []string
	for i, g := range groups {
		own := prometheus.NewRegistry()
		use(newMetrics(NewMetricFamilies(own), own, false, i == 0, g, "v1"), g)
		want = append(want, seriesOf(t, own)...)
		f := fam
		if i == 2 {
			// A second set of families on the same registry finds the
			// first one's registrations.
			f = NewMetricFamilies(shared)
		}
		use(newMetrics(f, shared, false, i == 0, g, "v1"), g)
	}
	slices.Sort(want)
	got := seriesOf(t, shared)
	if !slices.Equal(got, want) {
		t.Fatalf("shared registry's series differ from the groups' own:\n got %d: %q\nwant %d: %q", len(got), got, len(want), want)
	}
	mfs, err := shared.Gather()
	if err != nil {
		t.Fatal(err)
	}
	own := prometheus.NewRegistry()
	use(newMetrics(NewMetricFamilies(own), own, false, false, "x", "v1"), "x")
	ownFamilies, _ := own.Gather()
	if len(mfs) != len(ownFamilies) {
		t.Errorf("%d families for %d groups, one group alone has %d", len(mfs), len(groups), len(ownFamilies))
	}
	for _, s := range got {
		if !strings.Contains(s, "group=site-") {
			t.Errorf("series without its group: %s", s)
		}
	}
}
