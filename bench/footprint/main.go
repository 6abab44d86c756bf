// Command footprint measures the idle memory and CPU of edge-agent processes:
// it starts a three-gateway site twice, once with client-only agents on one
// shared nats-server (run by this program, not counted) and once with every
// agent running its own embedded nats-server clustered with the others', waits
// until they agree on a leader and have idled for a while, then reads VmRSS
// from /proc/PID/status and the CPU time from /proc/PID/task/*/schedstat once
// a second and prints the leader's and a follower's. With -json it also builds
// the linux/arm64 binary as make build-arm64 does (and without inlining) and
// records everything for make bench.
//
//	go run ./bench/footprint                      # builds the binary like make build
//	go run ./bench/footprint -bin bin/edge-agent  # measures a given binary
//	go run ./bench/footprint -heartbeat 100ms -samples 30 -json bin/bench/footprint.json
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/procstat"
)

func main() {
	bin := flag.String("bin", "", "edge-agent binary to measure (default: build one as make build does)")
	clientBin := flag.String("client-bin", "", "client-only edge-agent binary (-tags noembed) to measure too (default: build one when -bin is not given)")
	hb := flag.Duration("heartbeat", time.Second, "heartbeat period H (the production default is 1s)")
	settle := flag.Duration("settle", 10*time.Second, "idle time after the leader is agreed, before sampling")
	samples := flag.Int("samples", 5, "VmRSS and CPU readings per agent, one a second")
	jsonPath := flag.String("json", "", "also write the figures, with the arm64 binary sizes, to this file (benchresult JSON, for make bench)")
	flag.Parse()
	if err := run(*bin, *clientBin, *hb, *settle, *samples, *jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

func run(bin, clientBin string, hb, settle time.Duration, samples int, jsonPath string) error {
	began := time.Now()
	dir, err := os.MkdirTemp("", "footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = build(dir, ""); err != nil {
			return err
		}
		if clientBin == "" {
			if clientBin, err = build(dir, "noembed"); err != nil {
				return err
			}
		}
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return err
	}
	fmt.Printf("binary %s: %.2f MB (%d bytes); 3 agents, H=%s, idle %s, %d samples of VmRSS\n", bin, float64(fi.Size())/1e6, fi.Size(), hb, settle, samples)
	args := []string{"--heartbeat", hb.String(), "--preemption", "never"}

	ns, err := harness.StartNATS()
	if err != nil {
		return err
	}
	client := harness.NewSite(bin, ns.ClientURL(), dir+"/client", 3, args...)
	clientFig, err := measure("client only (shared nats-server)", client, hb, settle, samples)
	if err != nil {
		ns.Shutdown()
		return err
	}
	var clientOnlyFig *figures
	if clientBin != "" {
		cfi, err := os.Stat(clientBin)
		if err != nil {
			ns.Shutdown()
			return err
		}
		fmt.Printf("client-only build %s: %.2f MB (%d bytes)\n", clientBin, float64(cfi.Size())/1e6, cfi.Size())
		site := harness.NewSite(clientBin, ns.ClientURL(), dir+"/client-only", 3, args...)
		fig, err := measure("client-only build (-tags noembed), shared nats-server", site, hb, settle, samples)
		if err != nil {
			ns.Shutdown()
			return err
		}
		clientOnlyFig = &fig
	}
	ns.Shutdown()
	embedded, err := harness.NewClusterSite(bin, dir+"/embedded", 3, args...)
	if err != nil {
		return err
	}
	embeddedFig, err := measure("embedded nats-server, clustered", embedded, hb, settle, samples)
	if err != nil || jsonPath == "" {
		return err
	}
	return record(jsonPath, began, dir, hb, settle, clientFig, embeddedFig, clientOnlyFig)
}

// build compiles the binary as make build-arm64 does (static, stripped),
// for this machine's architecture, with the given build tags.
func build(dir, tags string) (string, error) {
	out := dir + "/edge-agent" + tags
	cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-ldflags", "-s -w", "-o", out, "./cmd/edge-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %w", err)
	}
	return out, nil
}

// figures is what measure found for one kind of site.
type figures struct {
	leaderRSS, followerRSS   []float64 // MB (10^6 bytes), one a second
	leaderCPU, followerCPU   []float64 // % of one core, per second
	leaderMean, followerMean float64   // % of one core over the whole sampling
	anonKB, fileKB           int       // the leader's last RssAnon and RssFile
	terms                    uint64    // terms started while sampling
}

func measure(name string, site *harness.Site, hb, settle time.Duration, samples int) (figures, error) {
	var fig figures
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		return fig, err
	}
	agreed, err := site.WaitAgreement(site.IDs(), "", 0, 50*time.Millisecond, 60*time.Second)
	if err != nil {
		return fig, err
	}
	// Idle: nothing happens but heartbeats; let the start-up garbage be
	// collected and the heap reach its steady state.
	time.Sleep(settle)
	follower := "gw1"
	if agreed.Leader == follower {
		follower = "gw2"
	}
	rss := map[string][]int{}
	cpu := map[string][]float64{}
	var detail map[string]int
	ids := []string{agreed.Leader, follower}
	prev, first := map[string]time.Duration{}, map[string]time.Duration{}
	for _, id := range ids {
		c, err := procstat.CPUTime(site.Proc(id).Cmd.Process.Pid)
		if err != nil {
			return fig, err
		}
		prev[id], first[id] = c, c
	}
	start := time.Now()
	last := start
	for range samples {
		time.Sleep(time.Second - time.Since(last)%time.Second)
		now := time.Now()
		for _, id := range ids {
			pid := site.Proc(id).Cmd.Process.Pid
			st, err := procStatus(pid)
			if err != nil {
				return fig, err
			}
			c, err := procstat.CPUTime(pid)
			if err != nil {
				return fig, err
			}
			rss[id] = append(rss[id], st["VmRSS"])
			cpu[id] = append(cpu[id], 100*(c-prev[id]).Seconds()/now.Sub(last).Seconds())
			prev[id] = c
			if id == agreed.Leader {
				detail = st
			}
		}
		last = now
	}
	// The leader must still lead: the figures are of an idle, settled site.
	after, err := site.WaitAgreement(site.IDs(), "", agreed.Term-1, 50*time.Millisecond, 10*time.Second)
	if err != nil {
		return fig, fmt.Errorf("%s: site not settled while sampling: %w", name, err)
	}
	mean := func(id string) float64 { return 100 * (prev[id] - first[id]).Seconds() / last.Sub(start).Seconds() }
	mb := func(kb []int) []float64 {
		out := make([]float64, len(kb))
		for i, k := range kb {
			out[i] = float64(k) * 1024 / 1e6
		}
		return out
	}
	fig = figures{
		leaderRSS: mb(rss[agreed.Leader]), followerRSS: mb(rss[follower]),
		leaderCPU: cpu[agreed.Leader], followerCPU: cpu[follower],
		leaderMean: mean(agreed.Leader), followerMean: mean(follower),
		anonKB: detail["RssAnon"], fileKB: detail["RssFile"], terms: after.Term - agreed.Term,
	}
	fmt.Printf("%-34s leader %s: %s   follower %s: %s\n", name+":", agreed.Leader, summary(rss[agreed.Leader]), follower, summary(rss[follower]))
	fmt.Printf("%-34s leader's last reading: RssAnon %d kB (heap, stacks), RssFile %d kB (the binary's pages)\n", "", detail["RssAnon"], detail["RssFile"])
	fmt.Printf("%-34s CPU: leader %.3f%% of a core, follower %.3f%%; %d terms started while sampling\n", "", fig.leaderMean, fig.followerMean, fig.terms)
	return fig, nil
}

// summary gives the median and range of VmRSS readings in MB.
func summary(kb []int) string {
	s := slices.Clone(kb)
	slices.Sort(s)
	mb := func(k int) float64 { return float64(k) * 1024 / 1e6 }
	return fmt.Sprintf("VmRSS %.1f MB (%.1f..%.1f)", mb(s[len(s)/2]), mb(s[0]), mb(s[len(s)-1]))
}

// procStatus reads the kB figures of /proc/PID/status (VmRSS, RssAnon,
// RssFile, ...).
func procStatus(pid int) (map[string]int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && isKB {
			if n, err := strconv.Atoi(v); err == nil {
				st[k] = n
			}
		}
	}
	if _, ok := st["VmRSS"]; !ok {
		return nil, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return st, sc.Err()
}
