package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/election"
)

// The dashboard and alerting rules under deploy/ are part of what operators
// run; these tests keep them in step with the metrics the agent has.

const (
	dashboardPath = "../deploy/grafana/edge-agent-site.json"
	alertsPath    = "../deploy/prometheus/alerts.yml"
)

// metricNamePattern finds the agent's metric names in PromQL.
var metricNamePattern = regexp.MustCompile(`\bedge_election_[a-z0-9_]+`)

// agentMetricNames returns every series name the agent exposes (histograms
// with their _bucket, _sum and _count series).
func agentMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := newMetrics(NewMetricFamilies(reg), reg, false, false, "site", "")
	// Vectors without a child are not gathered: give each one.
	m.leaderInfo.WithLabelValues("x")
	m.stepDowns.WithLabelValues("x")
	m.messages.WithLabelValues("x", "y")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	collectors := 0
	for f := range reflect.TypeFor[metrics]().Fields() {
		if f.Type.Implements(reflect.TypeFor[prometheus.Collector]()) || hasMethod(f.Type, "WithLabelValues") {
			collectors++
		}
	}
	if len(mfs) != collectors {
		t.Fatalf("%d metric families gathered, the metrics struct has %d: give the new vector a child above", len(mfs), collectors)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		if mf.GetType().String() == "HISTOGRAM" {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		}
	}
	// The series the agent registers beside the metrics struct (drain and
	// duplicate id, the algorithm guard): from a real agent's registry.
	a, err := New(Config{ID: "gw1", Group: "site", Members: []election.Member{{ID: "gw1"}}, StateDir: t.TempDir()},
		WithTransport(NewMemNetwork().Join("gw1")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer a.store.Close()
	mfs, err = a.out.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

// dashboardExprs returns every PromQL expression of the dashboard: panel
// targets, template variable queries and annotations.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	if dash["title"] == nil || dash["uid"] == nil {
		t.Fatalf("%s: no title or uid", dashboardPath)
	}
	panels, _ := dash["panels"].([]any)
	if len(panels) == 0 {
		t.Fatalf("%s: no panels", dashboardPath)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	return exprs
}

// alertExprs returns the expressions of alerts.yml.
func alertExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// TestDeployReferencesOnlyExistingMetrics: every edge_election_ name in the
// dashboard and the alerting rules is a series the agent exposes, and the
// dashboard shows the operating essentials.
func TestDeployReferencesOnlyExistingMetrics(t *testing.T) {
	names := agentMetricNames(t)
	used := map[string]bool{}
	for file, exprs := range map[string][]string{dashboardPath: dashboardExprs(t), alertsPath: alertExprs(t)} {
		if len(exprs) == 0 {
			t.Errorf("%s: no expressions", file)
		}
		for _, e := range exprs {
			for _, n := range metricNamePattern.FindAllString(e, -1) {
				used[n] = true
				if !names[n] {
					t.Errorf("%s: %q uses %s, which the agent does not expose", file, e, n)
				}
			}
		}
	}
	for _, want := range []string{"edge_election_is_leader", "edge_election_term", "edge_election_quorum_ok",
		"edge_election_election_duration_seconds_bucket", "edge_election_messages_total", "edge_election_leader"} {
		if !used[want] {
			t.Errorf("the dashboard and rules never use %s", want)
		}
	}
}

// TestDashboardQueriesParse checks the dashboard's PromQL with promtool (as
// recording rules, template variables filled in). Without promtool it is
// skipped, unless CI is "true".
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found (apt-get install prometheus): CI=true requires it")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	fill := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$job", "edge-agent", "$group", "site")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	exprs := dashboardExprs(t)
	sort.Strings(exprs)
	for _, e := range exprs {
		if strings.HasPrefix(e, "label_values(") {
			continue // a Grafana function, not PromQL
		}
		rules = append(rules, rule{Record: "dashboard:query", Expr: fill.Replace(e)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, b)
	}
}

func hasMethod(t reflect.Type, name string) bool {
	_, ok := t.MethodByName(name)
	return ok
}
