package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edge-agent/edge-agent/internal/chaos"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// deployBlocks returns the bodies of the fenced blocks of kind lang in the
// part of deploy/arm64/README.md under heading, up to the next heading of
// its level or above.
func deployBlocks(t *testing.T, heading, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "arm64", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ") // 3 for "### "
	var out []string
	var block []string
	in, under, fenced := false, false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case fenced && line == "```":
			fenced = false
			if in {
				out = append(out, strings.Join(block, "\n")+"\n")
				in = false
			}
		case fenced:
			if in {
				block = append(block, line)
			}
		case strings.HasPrefix(line, "```"):
			fenced = true
			in, block = under && line == "```"+lang, nil
		case line == heading:
			under = true
		case under && strings.HasPrefix(line, "#"):
			if n := strings.Index(line, " "); n > 0 && n <= level && strings.Trim(line[:n], "#") == "" {
				return out
			}
		}
	}
	if !under {
		t.Fatalf("deploy/arm64/README.md has no heading %q", heading)
	}
	return out
}

// replaceAll applies the replacements old -> new to s, failing the test if
// one of the olds is not in s (the README's example changed).
func replaceAll(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("the README's example has no %q:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// leafHub is the hub's nats-server, run in the test process from the
// README's nats-server.conf, on fixed ports so that it can come back.
type leafHub struct {
	t    *testing.T
	conf string
	srv  *server.Server
}

func (h *leafHub) start() {
	h.t.Helper()
	opts, err := server.ProcessConfigFile(h.conf)
	if err != nil {
		h.t.Fatalf("the hub's nats-server.conf: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	// A restart reuses the ports; one may be held for a moment by another
	// process's outgoing connection on a busy machine.
	var serr error
	poll.Until(h.t, 10*time.Second, "the hub's server up", func() bool {
		h.srv, serr = harness.StartServer(opts.Clone())
		return serr == nil
	})
}

func (h *leafHub) stop() {
	if h.srv != nil {
		h.srv.Shutdown()
		h.srv.WaitForShutdown()
		h.srv = nil
	}
}

// TestE2EWitnessHubLeaf runs the hub placement of deploy/arm64/README.md
// (A witness at the hub, through a leaf node) from the README's own files,
// with loopback addresses for the names, for each algorithm: the hub's
// nats-server (in the test process, from the README's nats-server.conf),
// gw1 and gw2 with embedded servers clustered with each other, each route
// through a proxy the test can cut, and both leaf nodes of the hub; the
// witness an agent on the hub's server. A gateway leads, never the witness;
// with the other gateway down the leader keeps its lease on the witness's
// acknowledgements through the hub; a SIGKILL of the leader makes the other
// lead on the witness's vote; with the hub's server shut down the leader
// keeps leading in the same term, and when it is back the witness follows
// it; with the gateways' route cut, both reaching the hub, at most one
// gateway says it leads at every sample and one leads at the end. The
// journals show no lease of the witness and none overlapping.
func TestE2EWitnessHubLeaf(t *testing.T) {
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) { testWitnessHubLeaf(t, alg) })
	}
}

func testWitnessHubLeaf(t *testing.T, alg string) {
	const heading = "### A witness at the hub, through a leaf node"
	confs, yamls := deployBlocks(t, heading, "conf"), deployBlocks(t, heading, "yaml")
	if len(confs) != 1 || len(yamls) != 2 {
		t.Fatalf("under %q: %d conf and %d yaml blocks, want the hub's nats-server.conf, the gateways' and the witness's files", heading, len(confs), len(yamls))
	}
	hubConf, gwYAML, witYAML := confs[0], yamls[0], yamls[1]
	dir := t.TempDir()
	ports, err := harness.FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	hubClient, hubLeaf := addr(0), addr(1)
	client := map[string]string{"gw1": addr(2), "gw2": addr(3)}
	route := map[string]string{"gw1": addr(4), "gw2": addr(5)}
	monitor := map[string]int{"gw1": ports[6], "gw2": ports[7]}

	hub := &leafHub{t: t, conf: filepath.Join(dir, "hub.conf")}
	if err := os.WriteFile(hub.conf, []byte(replaceAll(t, hubConf,
		"0.0.0.0:4222", hubClient, "0.0.0.0:7422", hubLeaf)), 0o600); err != nil {
		t.Fatal(err)
	}
	hub.start()
	t.Cleanup(hub.stop)

	// Each gateway's route to the other goes through a proxy: cutting both
	// cuts the pair's cluster while both keep their leaf connection.
	proxy := map[string]*chaos.Proxy{}
	for _, id := range []string{"gw1", "gw2"} {
		p, err := chaos.NewProxy(chaos.ProxyConfig{Name: "route to " + id, Target: route[id], Mode: chaos.Raw, Seed: 17})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxy[id] = p
	}
	files := map[string]string{}
	for _, id := range []string{"gw1", "gw2"} {
		other := otherGateway(id)
		files[id] = replaceAll(t, gwYAML,
			"id: gw1", "id: "+id,
			"/var/lib/edge-agent", filepath.Join(dir, id),
			`listen: "0.0.0.0:4222"`, `listen: "`+client[id]+`"`,
			`listen: "0.0.0.0:6222"`, `listen: "`+route[id]+`"`,
			"nats://gw1.site.lan:4222", "nats://"+client["gw1"],
			"nats://gw2.site.lan:4222", "nats://"+client["gw2"],
			"nats-route://"+id+".site.lan:6222", "nats-route://"+route[id],
			"nats-route://"+other+".site.lan:6222", "nats-route://"+proxy[other].Addr(),
			"hub.example.net:7422", hubLeaf)
	}
	files[witnessID] = replaceAll(t, witYAML,
		"/var/lib/edge-agent", filepath.Join(dir, witnessID),
		"nats://127.0.0.1:4222", "nats://"+hubClient)
	group := ""
	for _, l := range strings.Split(files["gw1"], "\n") {
		if g, ok := strings.CutPrefix(l, "group: "); ok {
			group = strings.TrimSpace(strings.SplitN(g, "#", 2)[0])
		}
	}
	for id, text := range files {
		if err := os.WriteFile(filepath.Join(dir, id+".yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Preemption never: a restarted gw1 (priority 100) would otherwise take
	// over a hold-down later, a change of leader the checks would blame on
	// the hub.
	site := harness.NewSite(binary, "", dir, 0, "--algorithm", alg, "--heartbeat", "100ms", "--heartbeat-misses", "10", "--preemption", "never")
	site.Group = group
	site.Members = "gw1=100,gw2=50," + witnessID + "=0" // as in the files; the harness passes --members
	site.Journals = true
	site.MemberArgs = func(id string) []string {
		args := []string{"--config", filepath.Join(dir, id+".yaml")}
		if id != witnessID {
			args = append(args, "--nats-monitor-port", fmt.Sprint(monitor[id]))
		}
		return args
	}
	logs := &lineLog{}
	site.Log = logs
	logs.dumpOnFailure(t)
	t.Cleanup(site.Stop)
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	w := &witnessSite{t: t, site: site}
	all := []string{"gw1", "gw2", witnessID}
	gateways := []string{"gw1", "gw2"}
	first := w.agree(all, "", 0)
	poll.Until(t, 10*time.Second, "both gateways' leaf connections and their route", func() bool {
		return hub.srv.NumLeafNodes() == 2 && routes(t, monitor["gw1"]) > 0 && routes(t, monitor["gw2"]) > 0
	})

	// The other gateway down: the witness's acknowledgements, through the
	// hub, carry the lease.
	other := otherGateway(first.Leader)
	// Killed right after the election, the other gateway may be the only
	// follower whose acknowledgement the lease holds yet (the witness's
	// come a hop later, through the hub): the leader then steps down at
	// once on the closed route, as it must. Wait for the witness's.
	ackedBy(t, site, first, []string{witnessID}, 100*time.Millisecond)
	if err := site.Kill(other); err != nil {
		t.Fatal(err)
	}
	w.holds(first.Leader, first.Term, 3*time.Second, other+" down, the witness through the hub")
	if _, err := site.Start(other); err != nil {
		t.Fatal(err)
	}
	second := w.agree(all, "", first.Term-1)

	// SIGKILL of the leader: the other gateway leads on the witness's vote.
	if err := site.Kill(second.Leader); err != nil {
		t.Fatal(err)
	}
	third := w.agree([]string{otherGateway(second.Leader), witnessID}, second.Leader, second.Term)
	if _, err := site.Start(second.Leader); err != nil {
		t.Fatal(err)
	}
	fourth := w.agree(all, "", third.Term-1)

	// The hub away: the site keeps its leader; the witness, cut off, is
	// left out of the check until the hub is back.
	ackedBy(t, site, fourth, []string{otherGateway(fourth.Leader)}, 100*time.Millisecond)
	hub.stop()
	holdsAmong(t, site, gateways, fourth.Leader, fourth.Term, 3*time.Second, "the hub's server down")
	hub.start()
	if a := w.agree(all, "", 0); a.Leader != fourth.Leader || a.Term != fourth.Term {
		t.Fatalf("after the hub came back: %s leads term %d, want %s term %d", a.Leader, a.Term, fourth.Leader, fourth.Term)
	}
	poll.Until(t, 10*time.Second, "both leaf connections back", func() bool { return hub.srv.NumLeafNodes() == 2 })

	// The gateways' route cut, both reaching the hub.
	replayed := map[string]float64{}
	for _, id := range gateways {
		replayed[id] = badReasonsOf(t, site.Proc(id))["replayed"]
	}
	for _, id := range gateways {
		proxy[id].Cut()
	}
	poll.Until(t, 10*time.Second, "the gateways' route down", func() bool {
		return routes(t, monitor["gw1"]) == 0 && routes(t, monitor["gw2"]) == 0
	})
	// The hub does not relay between two leaf connections of one cluster:
	// the gateways no longer hear each other, only the witness hears both.
	// The one it follows leads; the other, leaderless, stands and is
	// refused the witness's pre-vote.
	leaders := atMostOneLeads(t, site, gateways, 5*time.Second, "the route cut")
	var fifth harness.Agreement
	poll.Until(t, 20*time.Second, "a gateway leading, agreed by the witness", func() bool {
		w.check()
		for _, g := range gateways {
			if a, err := site.WaitAgreement([]string{g, witnessID}, "", fourth.Term-1, 10*time.Millisecond, 50*time.Millisecond); err == nil && a.Leader == g {
				fifth = a
				return true
			}
		}
		return false
	})
	if len(leaders) == 0 {
		t.Fatal("the route cut: no gateway said it leads in 5 s")
	}
	if l := leaders[len(leaders)-1]; l != fmt.Sprintf("%s/%d", fifth.Leader, fifth.Term) {
		t.Fatalf("the route cut: the last leader sampled was %s, then %s term %d led with the witness", l, fifth.Leader, fifth.Term)
	}
	t.Logf("route cut: leaders seen %v; %s term %d after 5 s (before the cut %s term %d)", leaders, fifth.Leader, fifth.Term, fourth.Leader, fourth.Term)
	for _, id := range gateways {
		proxy[id].Heal()
	}
	poll.Until(t, 20*time.Second, "the gateways' route back", func() bool {
		return routes(t, monitor["gw1"]) > 0 && routes(t, monitor["gw2"]) > 0
	})
	sixth := w.agree(all, "", fifth.Term-1)
	for _, id := range gateways {
		t.Logf("%s: %v messages dropped as replays since before the cut", id, badReasonsOf(t, site.Proc(id))["replayed"]-replayed[id])
	}
	t.Logf("%s: %s term %d; %s down: kept; SIGKILL %s: %s term %d; hub down: %s kept term %d; route cut: %s term %d; healed: %s term %d",
		alg, first.Leader, first.Term, other, second.Leader, third.Leader, third.Term, fourth.Leader, fourth.Term,
		fifth.Leader, fifth.Term, sixth.Leader, sixth.Term)

	rep := checkJournals(t, site)
	for _, iv := range rep.Intervals {
		if iv.ID == witnessID {
			t.Errorf("the witness held a lease in term %d", iv.Term)
		}
	}
}

// ackedBy waits until a's leader, still leading a's term, has heard from
// each of ids less than h ago, in a /status read at least 2h after the
// agreement: a follower's message that late answers a heartbeat of the
// term, so the lease rests on that follower's acknowledgements too.
func ackedBy(t *testing.T, site *harness.Site, a harness.Agreement, ids []string, h time.Duration) {
	t.Helper()
	poll.Until(t, 10*time.Second, a.Leader+" hearing "+strings.Join(ids, ", ")+" in term "+fmt.Sprint(a.Term), func() bool {
		if time.Since(a.At) < 2*h {
			return false
		}
		st, err := statusOf(t, site, a.Leader)
		if err != nil || st.Role != "leader" || st.Term != a.Term {
			t.Fatalf("%s: role %s term %d (%v), want leader of term %d", a.Leader, st.Role, st.Term, err, a.Term)
		}
		heard := 0
		for _, m := range st.Members {
			for _, id := range ids {
				if m.ID == id && m.LastSeenMS >= 0 && m.LastSeenMS < h.Milliseconds() {
					heard++
				}
			}
		}
		return heard == len(ids)
	})
}

// routes returns num_routes of the embedded server's /routez at the
// monitoring port (-1 if it does not answer).
func routes(t *testing.T, port int) int {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/routez", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var rz struct {
		NumRoutes int `json:"num_routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		return -1
	}
	return rz.NumRoutes
}

// holdsAmong checks every 50 ms for d that the agents ids all name leader
// in term and that leader says it leads.
func holdsAmong(t *testing.T, site *harness.Site, ids []string, leader string, term uint64, d time.Duration, what string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	samples := 0
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		for _, id := range ids {
			st, err := statusOf(t, site, id)
			if err != nil {
				t.Fatalf("%s: %s /status: %v", what, id, err)
			}
			if st.Leader != leader || st.Term != term || (id == leader && st.Role != "leader") {
				t.Fatalf("%s: %s reports leader %q term %d role %s, want %s term %d", what, id, st.Leader, st.Term, st.Role, leader, term)
			}
		}
		samples++
	}
	t.Logf("%s: %s led term %d through %d samples over %s", what, leader, term, samples, d)
}

// atMostOneLeads samples the agents ids every 50 ms for d and fails the
// test if two say they lead at once; it returns the leaders it saw, as
// "id/term".
func atMostOneLeads(t *testing.T, site *harness.Site, ids []string, d time.Duration, what string) []string {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var seen []string
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		var now []string
		for _, id := range ids {
			st, err := statusOf(t, site, id)
			if err != nil {
				continue
			}
			if st.Role == "leader" {
				now = append(now, fmt.Sprintf("%s/%d", id, st.Term))
			}
		}
		if len(now) > 1 {
			t.Fatalf("%s: %v say they lead at once", what, now)
		}
		if len(now) == 1 && (len(seen) == 0 || seen[len(seen)-1] != now[0]) {
			seen = append(seen, now[0])
		}
	}
	return seen
}

// badReasonsOf returns edge_election_bad_messages_total of p by reason.
func badReasonsOf(t *testing.T, p *harness.Proc) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	samples, err := harness.ParseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range samples {
		if sm.Name == "edge_election_bad_messages_total" {
			out[sm.Labels["reason"]] += sm.Value
		}
	}
	return out
}
