package vipbed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// The experiments' parameters. VIPBED_TRIALS sets the number of kills and
// of cuts per product (default 30); VIPBED_OUT names a file for the
// figures (benchmark JSON; a text summary beside it, .txt).
const (
	heartbeat = 100 * time.Millisecond
	// lease is edge-agent's lease at H = 100 ms, k = 3 (the default:
	// k*H - H - 2 ticks): the bound by which a killed or cut-off holder's
	// VIP must be gone. The last renewal is before the kill or the cut, so
	// its lease ends at the latest this long after it.
	lease    = 180 * time.Millisecond
	cutFor   = time.Second
	probeInt = time.Millisecond
)

func trials(t *testing.T) int {
	if s := os.Getenv("VIPBED_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("VIPBED_TRIALS=%q: want a positive number", s)
		}
		return n
	}
	return 30
}

// need fails under CI (which installs the tool) and skips elsewhere when a
// test-time tool is missing.
func need(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (apt-get install %s; .ci/run installs it)", tool, pkg)
		}
		t.Skipf("needs %s (apt-get install %s)", tool, pkg)
	}
}

// product is what an experiment needs of a VIP holder implementation.
type product interface {
	// stable waits until exactly one gateway holds the VIP and everything
	// agrees on it, and returns that gateway.
	stable(timeout time.Duration) (string, error)
	// kill SIGKILLs the VIP process of gateway id and returns the wall
	// clock (ns) just before and just after the signal was sent, and when
	// the process was reaped (it had exited).
	kill(id string) (before, after, reaped int64, err error)
	// restart starts gateway id's VIP process again after kill.
	restart(id string) error
	// cut drops the election traffic between h and the others.
	cut(h *Host) error
	// logs returns the processes' recent logs, for a failure message.
	logs() string
}

// TestVIPFailoverNetns runs the experiments of issue 19 in network
// namespaces: three gateways and a client on one bridge, the client
// probing the VIP every millisecond (UDP and ARP). For Debian's keepalived
// and for edge-agent's VIP duty: SIGKILL of the holder's process, and a
// 1 s cut of the election traffic between the holder and the others. The
// edge-agent side asserts that no two gateways ever answer for the VIP in
// the same millisecond and that a killed or cut-off holder's VIP is gone
// by its lease end; keepalived's figures are recorded, not judged.
func TestVIPFailoverNetns(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip("network namespaces unavailable: " + why)
	}
	need(t, "nft", "nftables")
	bed, err := New(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bed.Close(); err != nil {
			t.Errorf("removing the bed: %v", err)
		}
	})
	for i, g := range bed.Gateways {
		r, err := StartResponder(g, i+1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	prober, err := StartProber(bed, probeInt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prober.Close() })
	taps := map[int]*Tap{}
	for i, g := range bed.Gateways {
		tap, err := StartTap(g)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tap.Close() })
		taps[i+1] = tap
	}
	n := trials(t)
	started := time.Now()
	var results []Result

	t.Run("keepalived", func(t *testing.T) {
		need(t, "keepalived", "keepalived")
		k := startKeepalived(t, bed, prober)
		r := Result{Product: "keepalived " + keepalivedVersion(),
			Settings: fmt.Sprintf("3 gateways, VRRPv3, advert_int %s s, priorities 100/150/200, nopreempt, GARP 5 x 1 ms at once and 5 after 1 s; looked at %s after the kill or the cut", KeepalivedAdvert, lease),
			LeaseMS:  benchresult.Ms(lease)}
		runExperiments(t, bed, prober, taps, k, n, &r, false)
		k.stopAll()
		results = append(results, r)
	})
	t.Run("edge-agent", func(t *testing.T) {
		e := startEdgeAgents(t, bed, prober)
		r := Result{Product: "edge-agent",
			Settings: "3 gateways, embedded clustered NATS on the bridge, H = 100 ms, k = 3, lease 180 ms, --preemption never, --leader-vip, fast failover on route closure",
			LeaseMS:  benchresult.Ms(lease),
			// Issue 19: below keepalived's 33.6 / 45.0 ms measured there.
			Targets: []benchresult.Target{{Stat: "p50", Max: 33.6}, {Stat: "p99", Max: 45.0}}}
		runExperiments(t, bed, prober, taps, e, n, &r, true)
		results = append(results, r)
	})
	writeResults(t, results, started)
}

// runExperiments runs n kills and n cuts of p and records them in r. With
// strict (edge-agent) it asserts the safety of each: no millisecond with
// two holders, the old holder's VIP gone by its lease end.
// The lease checks date the old holder's last ARP answer by its own send
// (taps), not by the client's receive.
func runExperiments(t *testing.T, bed *Bed, prober *Prober, taps map[int]*Tap, p product, n int, r *Result, strict bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nlogs:\n%s", append(args, p.logs())...)
	}
	check := func(format string, args ...any) {
		t.Helper()
		if strict {
			t.Errorf(format, args...)
		}
	}
	u0, a0, e0, _ := prober.Sent()
	began := time.Now()
	from := wallNow()
	for i := range n {
		holder, err := p.stable(30 * time.Second)
		if err != nil {
			fail("before kill %d: %v", i+1, err)
		}
		g, gi := bed.Gateway(holder), bed.Index(holder)
		// Failover is timed from before the signal (t0), the lease from
		// after it (tk): the process may have renewed its lease until then.
		t0, tk, reaped, err := p.kill(holder)
		if err != nil {
			fail("kill %d of %s: %v", i+1, holder, err)
		}
		var first Answer
		if err := poll.For(20*time.Second, "a UDP answer from another gateway", func() (bool, string) {
			var ok bool
			first, ok = FirstFrom(prober.UDP(t0, wallNow()), t0, gi)
			return ok, ""
		}); err != nil {
			fail("kill %d of %s: %v", i+1, holder, err)
		}
		// Look at the killed gateway's interface once its lease is over
		// (a point in time the experiment defines, not a wait for a
		// condition).
		time.Sleep(time.Until(time.Unix(0, tk).Add(lease)))
		kept, err := g.HasAddr(VIP)
		if err != nil {
			t.Fatal(err)
		}
		tr := KillTrial{Victim: holder, NewHolder: fmt.Sprintf("gw%d", first.GW), FailoverMS: msSince(t0, first.T), KeptVIP: kept, VictimLastARPMS: -1,
			ReapedMS: msSince(tk, reaped)}
		if a, ok := FirstFrom(prober.ARP(t0, wallNow()), t0, gi); ok {
			tr.ARPFailoverMS = msSince(t0, a.T)
		}
		if kept {
			check("kill %d: the VIP is still on %s's interface %s after the kill", i+1, holder, lease)
			// keepalived leaves it until someone removes it: as an operator
			// would before starting it again.
			if err := g.DelAddr(VIP); err != nil {
				t.Fatal(err)
			}
		}
		tR := wallNow()
		if a, ok := LastFrom(prober.ARP(t0, tR), gi); ok {
			tr.VictimLastARPMS = msSince(t0, a.T)
		}
		if ts, ok := taps[gi].Last(t0, tR); ok {
			tr.VictimLastSentMS = msSince(tk, ts)
			if ts > tk+int64(lease) {
				check("kill %d: %s sent an ARP answer for the VIP %.1f ms after its kill (the client received its last %.1f ms after), past its lease (%s); its process was reaped %.1f ms after the kill",
					i+1, holder, tr.VictimLastSentMS, tr.VictimLastARPMS, lease, tr.ReapedMS)
			}
		}
		if err := p.restart(holder); err != nil {
			fail("restart %s: %v", holder, err)
		}
		if _, err := p.stable(30 * time.Second); err != nil {
			fail("after kill %d of %s: %v", i+1, holder, err)
		}
		ans := prober.ARP(t0, wallNow())
		var desc string
		tr.TwoHolderMS, _, desc = twoHolders(ans, t0)
		if tr.TwoHolderMS > 0 {
			check("kill %d of %s: two gateways answered ARP for the VIP in %d ms: %s", i+1, holder, tr.TwoHolderMS, desc)
		}
		r.Kills = append(r.Kills, tr)
		t.Logf("kill %d at %s: %s -> %s in %.1f ms (ARP %.1f ms), reaped after %.1f ms, last ARP answer sent %.1f ms / received %.1f ms, kept VIP %v, two-holder ms %d",
			i+1, time.Unix(0, t0).UTC().Format("15:04:05.000000"), holder, tr.NewHolder, tr.FailoverMS, tr.ARPFailoverMS, tr.ReapedMS, tr.VictimLastSentMS, tr.VictimLastARPMS, kept, tr.TwoHolderMS)
	}
	for i := range n {
		holder, err := p.stable(30 * time.Second)
		if err != nil {
			fail("before cut %d: %v", i+1, err)
		}
		g, gi := bed.Gateway(holder), bed.Index(holder)
		// The rules are in force from some moment between tb and t0:
		// two holders are looked for from tb, the lease counted from t0.
		tb := wallNow()
		if err := p.cut(g); err != nil {
			t.Fatal(err)
		}
		t0 := wallNow()
		time.Sleep(time.Until(time.Unix(0, tb).Add(cutFor))) // the cut's length is the experiment's, not a wait for a condition
		kept, err := g.HasAddr(VIP)
		if err != nil {
			t.Fatal(err)
		}
		t1 := wallNow()
		if err := g.Heal(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.stable(30 * time.Second); err != nil {
			fail("after cut %d of %s: %v", i+1, holder, err)
		}
		t2 := wallNow()
		during := prober.ARP(t0, t1)
		tr := CutTrial{Holder: holder, HolderKeptVIP: kept, HolderLastARPMS: -1, RecoverMS: msSince(t1, t2), AnsweredMS: answeredMillis(during)}
		if a, ok := LastFrom(during, gi); ok {
			tr.HolderLastARPMS = msSince(t0, a.T)
		}
		if a, ok := FirstFrom(during, t0, gi); ok {
			tr.TakeoverMS = msSince(t0, a.T)
		}
		var desc string
		tr.TwoHolderMS, tr.FirstTwoHolderMS, desc = twoHolders(prober.ARP(tb, t2), t0)
		if tr.TwoHolderMS > 0 {
			check("cut %d of %s: two gateways answered ARP for the VIP in %d ms: %s", i+1, holder, tr.TwoHolderMS, desc)
		}
		if kept {
			check("cut %d: the VIP is still on %s's interface at the end of the 1 s cut", i+1, holder)
		}
		if ts, ok := taps[gi].Last(t0, t1); ok {
			tr.HolderLastSentMS = msSince(t0, ts)
			if ts > t0+int64(lease) {
				check("cut %d: %s sent an ARP answer for the VIP %.1f ms after the cut (the client received its last %.1f ms after), past its lease (%s)",
					i+1, holder, tr.HolderLastSentMS, tr.HolderLastARPMS, lease)
			}
		}
		r.Cuts = append(r.Cuts, tr)
		t.Logf("cut %d of %s: other holder after %.1f ms, old holder's last answer sent %.1f ms / received %.1f ms, kept %v, two-holder ms %d (of %d ms of the cut with an answer), stable %.0f ms after the heal",
			i+1, holder, tr.TakeoverMS, tr.HolderLastSentMS, tr.HolderLastARPMS, kept, tr.TwoHolderMS, tr.AnsweredMS, tr.RecoverMS)
	}
	// Between the trials too (the waits for a stable bed, the restarts):
	// over the whole run, no millisecond with two holders.
	if n, _, desc := twoHolders(prober.ARP(from, wallNow()), from); n > 0 {
		check("over the whole %s run: two gateways answered ARP for the VIP in %d ms: %s", r.Product, n, desc)
	}
	u1, a1, e1, last := prober.Sent()
	r.UDPSent, r.ARPSent, r.SendErrors = u1-u0, a1-a0, e1-e0
	r.Seconds, r.ProbeRealtime = time.Since(began).Seconds(), prober.Realtime()
	if e1 > e0 {
		t.Logf("%d probe sends failed, the last: %v", e1-e0, last)
	}
	t.Log(r.Summary())
}

// stableARP reports whether, over the last 30 ms, the client's ARP requests
// for the VIP were answered by gateway gw alone.
func stableARP(prober *Prober, gw int) bool {
	now := wallNow()
	return OnlyFrom(prober.ARP(now-int64(30*time.Millisecond), now), gw)
}

// holderNow returns the one gateway that has the VIP on its interface.
func holderNow(bed *Bed) (string, string) {
	hs, err := bed.Holders()
	if err != nil {
		return "", err.Error()
	}
	if len(hs) != 1 {
		return "", fmt.Sprintf("VIP on %v", hs)
	}
	return hs[0], ""
}

// ---- keepalived ----

type keepaliveds struct {
	t      *testing.T
	bed    *Bed
	prober *Prober
	dir    string
	mu     sync.Mutex
	procs  map[string]*Keepalived
}

func keepalivedVersion() string {
	out, _ := exec.Command("keepalived", "--version").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(strings.Fields(line + " ?")[1], "v")
}

func startKeepalived(t *testing.T, bed *Bed, prober *Prober) *keepaliveds {
	k := &keepaliveds{t: t, bed: bed, prober: prober, dir: t.TempDir(), procs: map[string]*Keepalived{}}
	t.Cleanup(k.stopAll)
	for _, g := range bed.Gateways {
		if err := k.restart(g.ID); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func (k *keepaliveds) prio(id string) int { return 50 + 50*k.bed.Index(id) }

func (k *keepaliveds) restart(id string) error {
	p, err := StartKeepalived(k.bed.Gateway(id), k.dir, k.prio(id))
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.procs[id] = p
	k.mu.Unlock()
	return nil
}

func (k *keepaliveds) stable(timeout time.Duration) (string, error) {
	var holder string
	err := poll.For(timeout, "one keepalived MASTER holding the VIP", func() (bool, string) {
		var why string
		masters := 0
		for _, g := range k.bed.Gateways {
			k.mu.Lock()
			p := k.procs[g.ID]
			k.mu.Unlock()
			st := p.State()
			switch {
			case p.Exited():
				return false, g.ID + ": keepalived exited"
			case st == "MASTER":
				masters++
				holder = g.ID
			case st != "BACKUP":
				return false, fmt.Sprintf("%s in state %q", g.ID, st)
			}
		}
		if masters != 1 {
			return false, fmt.Sprintf("%d masters", masters)
		}
		h, why := holderNow(k.bed)
		if h != holder {
			return false, why
		}
		if !stableARP(k.prober, k.bed.Index(holder)) {
			return false, "ARP answers not from " + holder + " alone"
		}
		return true, ""
	})
	return holder, err
}

func (k *keepaliveds) kill(id string) (int64, int64, int64, error) {
	k.mu.Lock()
	p := k.procs[id]
	k.mu.Unlock()
	t0 := wallNow()
	err := p.Kill()
	return t0, t0, wallNow(), err // the VIP is not bound to a lease: t0 for both
}

func (k *keepaliveds) cut(h *Host) error {
	var others []string
	for _, g := range k.bed.Gateways {
		if g != h {
			others = append(others, g.Addr)
		}
	}
	set := "{ " + strings.Join(others, ", ") + " }"
	// VRRP is IP protocol 112; the adverts go to 224.0.0.18.
	return h.Cut([]string{"ip saddr " + set + " ip protocol 112 drop"}, []string{"ip protocol 112 drop"})
}

func (k *keepaliveds) logs() string {
	var b strings.Builder
	for _, g := range k.bed.Gateways {
		k.mu.Lock()
		p := k.procs[g.ID]
		k.mu.Unlock()
		if p != nil {
			l := p.Log()
			if len(l) > 3000 {
				l = l[len(l)-3000:]
			}
			fmt.Fprintf(&b, "--- keepalived %s ---\n%s\n", g.ID, l)
		}
	}
	return b.String()
}

func (k *keepaliveds) stopAll() {
	k.mu.Lock()
	ps := k.procs
	k.procs = map[string]*Keepalived{}
	k.mu.Unlock()
	for _, p := range ps {
		p.Stop()
	}
	for _, g := range k.bed.Gateways {
		_ = g.DelAddr(VIP) // left by a SIGKILLed keepalived
	}
}

// ---- edge-agent ----

type edgeAgents struct {
	t      *testing.T
	bed    *Bed
	prober *Prober
	site   *harness.Site
	log    *tailLog
	http   map[string]*http.Client
}

func startEdgeAgents(t *testing.T, bed *Bed, prober *Prober) *edgeAgents {
	dir := t.TempDir()
	bin, err := harness.BuildBinary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(bin, "run", "-h").CombinedOutput(); !strings.Contains(string(out), "leader-vip") {
		t.Fatalf("this edge-agent has no --leader-vip (the VIP duty of issue 19): the edge-agent half cannot run\n%s", out)
	}
	site := harness.NewSite(bin, "", dir, len(bed.Gateways),
		"--heartbeat", heartbeat.String(), "--heartbeat-misses", "3", "--preemption", "never",
		"--leader-vip", fmt.Sprintf("%s/%d@%s", VIP, PrefixLen, Dev))
	e := &edgeAgents{t: t, bed: bed, prober: prober, site: site, log: &tailLog{max: 400}, http: map[string]*http.Client{}}
	site.Log = e.log
	if path := os.Getenv("VIPBED_AGENT_LOG"); path != "" {
		// The agents' own logs, to look into a slow trial afterwards.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		site.Log = io.MultiWriter(e.log, f)
	}
	var routes []string
	for _, g := range bed.Gateways {
		routes = append(routes, "nats-route://"+g.Addr+":6222")
		e.http[g.ID] = nsHTTPClient(g)
	}
	site.Command = func(id string) []string {
		argv := []string{"ip", "netns", "exec", bed.Gateway(id).Name}
		if setpriv, err := exec.LookPath("setpriv"); err == nil {
			// Killed with the test process if it dies before its cleanup
			// (a timeout): its duty guard then removes the VIP, and
			// SweepStale the namespaces. setpriv execs the agent, whose
			// pid stays the one the site signals.
			argv = append(argv, setpriv, "--pdeathsig", "KILL")
		}
		return append(argv, bin)
	}
	site.MemberArgs = func(id string) []string {
		g := bed.Gateway(id)
		var peers []string
		for _, o := range bed.Gateways {
			if o != g {
				peers = append(peers, "nats://"+o.Addr+":4222")
			}
		}
		return []string{
			"--embedded-nats", "--nats-listen", g.Addr + ":4222",
			"--nats-cluster-name", "vipbed",
			"--nats-cluster-listen", g.Addr + ":6222",
			"--nats-cluster-routes", strings.Join(routes, ","),
			"--nats-url", strings.Join(peers, ","),
		}
	}
	t.Cleanup(func() {
		site.Stop()
		for _, g := range bed.Gateways {
			_ = g.DelAddr(VIP)
		}
	})
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	return e
}

// nsHTTPClient reaches the HTTP endpoint of an agent in h's namespace
// (it listens on the namespace's loopback).
func nsHTTPClient(h *Host) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := h.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		MaxIdleConnsPerHost: 2,
	}}
}

func (e *edgeAgents) get(id, path string) (string, error) {
	p := e.site.Proc(id)
	if p == nil {
		return "", fmt.Errorf("%s not running", id)
	}
	resp, err := e.http[id].Get("http://" + p.HTTPAddr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s", id, path, resp.Status)
	}
	return string(b), nil
}

func (e *edgeAgents) status(id string) (agent.StatusReport, error) {
	var st agent.StatusReport
	b, err := e.get(id, "/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(b), &st)
}

// vipHeld reads edge_election_vip_held{address="VIP/24"} of agent id.
func (e *edgeAgents) vipHeld(id string) (float64, error) {
	m, err := e.get(id, "/metrics")
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(`address="%s/%d"`, VIP, PrefixLen)
	sc := bufio.NewScanner(strings.NewReader(m))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "edge_election_vip_held{") && strings.Contains(l, want) {
			f := strings.Fields(l)
			return strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	return 0, fmt.Errorf("%s: no edge_election_vip_held series for %s", id, want)
}

func (e *edgeAgents) stable(timeout time.Duration) (string, error) {
	var holder string
	err := poll.For(timeout, "one edge-agent leader holding the VIP", func() (bool, string) {
		holder = ""
		for _, g := range e.bed.Gateways {
			st, err := e.status(g.ID)
			if err != nil {
				return false, err.Error()
			}
			if st.Leader == "" || (holder != "" && st.Leader != holder) {
				return false, fmt.Sprintf("%s names leader %q", g.ID, st.Leader)
			}
			holder = st.Leader
			if st.ID == st.Leader && st.Role != "leader" {
				return false, g.ID + " named itself but is " + st.Role
			}
		}
		for _, g := range e.bed.Gateways {
			held, err := e.vipHeld(g.ID)
			if err != nil {
				return false, err.Error()
			}
			if want := g.ID == holder; (held == 1) != want {
				return false, fmt.Sprintf("%s: edge_election_vip_held %v", g.ID, held)
			}
		}
		if h, why := holderNow(e.bed); h != holder {
			return false, fmt.Sprintf("leader %s; %s", holder, why)
		}
		if !stableARP(e.prober, e.bed.Index(holder)) {
			return false, "ARP answers not from " + holder + " alone"
		}
		return true, ""
	})
	return holder, err
}

func (e *edgeAgents) kill(id string) (int64, int64, int64, error) {
	t0 := wallNow()
	wait, err := e.site.StopAsync(id, syscall.SIGKILL)
	tk := wallNow()
	if err != nil {
		return t0, tk, tk, err
	}
	err = wait()
	return t0, tk, wallNow(), err
}

func (e *edgeAgents) restart(id string) error {
	_, err := e.site.Start(id)
	return err
}

func (e *edgeAgents) cut(h *Host) error {
	var others []string
	for _, g := range e.bed.Gateways {
		if g != h {
			others = append(others, g.Addr)
		}
	}
	set := "{ " + strings.Join(others, ", ") + " }"
	// The routes (6222) and the client port (4222) between h and the
	// others; the probe client's traffic (UDP, ARP) still flows.
	return h.Cut(
		[]string{"ip saddr " + set + " tcp dport { 4222, 6222 } drop", "ip saddr " + set + " tcp sport { 4222, 6222 } drop"},
		[]string{"ip daddr " + set + " tcp dport { 4222, 6222 } drop", "ip daddr " + set + " tcp sport { 4222, 6222 } drop"})
}

func (e *edgeAgents) logs() string { return e.log.String() }

// tailLog keeps the last max lines written to it.
type tailLog struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	if len(l.lines) > l.max {
		l.lines = l.lines[len(l.lines)-l.max:]
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// writeResults writes the figures to VIPBED_OUT (benchmark JSON) and a text
// summary beside it.
func writeResults(t *testing.T, results []Result, started time.Time) {
	out := os.Getenv("VIPBED_OUT")
	if out == "" || len(results) == 0 {
		return
	}
	f := benchresult.File{Program: "vipbed", Started: started.UTC().Format(time.RFC3339), Seconds: time.Since(started).Seconds()}
	var sum []string
	for _, r := range results {
		f.Series = append(f.Series, r.Series()...)
		sum = append(sum, r.Summary())
	}
	if err := benchresult.Write(out, f); err != nil {
		t.Error(err)
	}
	raw, _ := json.MarshalIndent(results, "", "  ")
	txt := strings.TrimSuffix(out, filepath.Ext(out))
	// Not *.json: the report reads every *.json of its directory.
	if err := os.WriteFile(txt+".trials", append(raw, '\n'), 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(txt+".txt", []byte(strings.Join(sum, "\n")+"\n"), 0o644); err != nil {
		t.Error(err)
	}
}
