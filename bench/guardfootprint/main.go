// Command guardfootprint measures what the duty guard costs an idle leader:
// it runs a three-gateway site (client-only agents on one shared
// nats-server, run by this program) whose duty is `sleep`, waits until a
// leader runs it and the site has idled, then samples once a second the
// leader agent's CPU time, and the CPU time and memory (VmRSS, RssAnon, and
// from /proc/PID/smaps_rollup the private and proportional set sizes: a
// guard runs the agent's own executable, whose file pages it shares) of the
// guard of the leader's run and of the standby guard that every agent with a
// duty keeps ready for its next run. With -base-bin it measures the leader agent's CPU
// with the same duty under an edge-agent without a guard (an older build),
// and it always measures an idle leader without any duty.
//
//	go run ./bench/guardfootprint                                  # builds the binary like make build
//	go run ./bench/guardfootprint -base-bin /tmp/old/edge-agent -heartbeat 100ms
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
	"github.com/edge-agent/edge-agent/internal/procstat"
)

func main() {
	bin := flag.String("bin", "", "edge-agent binary to measure (default: build one as make build does)")
	baseBin := flag.String("base-bin", "", "an edge-agent without the duty guard, for the leader's CPU with the same duty")
	hb := flag.Duration("heartbeat", time.Second, "heartbeat period H")
	settle := flag.Duration("settle", 10*time.Second, "idle time after the duty started, before sampling")
	samples := flag.Int("samples", 20, "readings, one a second")
	flag.Parse()
	if err := run(*bin, *baseBin, *hb, *settle, *samples); err != nil {
		fmt.Fprintln(os.Stderr, "guardfootprint:", err)
		os.Exit(1)
	}
}

func run(bin, baseBin string, hb, settle time.Duration, samples int) error {
	dir, err := os.MkdirTemp("", "guardfootprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = dir + "/edge-agent"
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/edge-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	fmt.Printf("3 agents, H=%s, idle %s after the duty started, %d samples, 1/s\n", hb, settle, samples)
	ns, err := harness.StartNATS()
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	duty := []string{"--leader-command", "sleep 1000000"}
	args := []string{"--heartbeat", hb.String(), "--preemption", "never"}
	type run struct {
		name, bin string
		args      []string
		guard     bool
	}
	runs := []run{
		{"with the duty under its guard", bin, append(args, duty...), true},
		{"without a duty", bin, args, false},
	}
	if baseBin != "" {
		runs = append(runs, run{"with the duty, no guard (" + baseBin + ")", baseBin, append(args, duty...), false})
	}
	for i, r := range runs {
		site := harness.NewSite(r.bin, ns.ClientURL(), fmt.Sprintf("%s/%d", dir, i), 3, r.args...)
		site.Group = fmt.Sprintf("site%d", i)
		if err := measure(r.name, site, r.guard, hb, settle, samples); err != nil {
			return err
		}
	}
	return nil
}

func measure(name string, site *harness.Site, guard bool, hb, settle time.Duration, samples int) error {
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		return err
	}
	a, err := site.WaitAgreement(site.IDs(), "", 0, 50*time.Millisecond, 60*time.Second)
	if err != nil {
		return err
	}
	leader := site.Proc(a.Leader).Cmd.Process.Pid
	// The guard of the leader's run, and the standby guard every agent
	// with a duty keeps for its next run (started ahead of need).
	var guardPid, standbyPid int
	if guard {
		err := poll.For(30*time.Second, fmt.Sprintf("%s: a duty guard and a standby guard under the leader %d", name, leader), func() (bool, string) {
			// A guard that came from a standby keeps --standby in its
			// command line: the run's guard is the one with a child (sleep).
			guardPid = childRunning(leader, func(pid int, args []string) bool { return args[1] == "duty-guard" && len(children(pid)) > 0 })
			standbyPid = childRunning(leader, func(pid int, args []string) bool { return args[1] == "duty-guard" && len(children(pid)) == 0 })
			return guardPid != 0 && standbyPid != 0, fmt.Sprintf("guard %d, standby %d", guardPid, standbyPid)
		})
		if err != nil {
			return err
		}
	}
	time.Sleep(settle)
	pids := []int{leader}
	if guardPid != 0 {
		pids = append(pids, guardPid, standbyPid)
	}
	first := map[int]time.Duration{}
	for _, pid := range pids {
		c, err := procstat.CPUTime(pid)
		if err != nil {
			return err
		}
		first[pid] = c
	}
	start := time.Now()
	st, sm := map[int]map[string]int{}, map[int]map[string]int{}
	for range samples {
		time.Sleep(time.Second)
		for _, pid := range pids[1:] {
			if st[pid], err = kbFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
				return err
			}
			if sm[pid], err = kbFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)
	if after, err := site.WaitAgreement(site.IDs(), "", a.Term-1, 50*time.Millisecond, 10*time.Second); err != nil || after.Leader != a.Leader {
		return fmt.Errorf("%s: the leader changed while sampling: %v", name, err)
	}
	pct := func(pid int) float64 {
		c, _ := procstat.CPUTime(pid)
		return 100 * (c - first[pid]).Seconds() / elapsed.Seconds()
	}
	fmt.Printf("%-48s leader agent CPU %.3f%% of a core\n", name+":", pct(leader))
	for i, pid := range pids[1:] {
		what := []string{"guard", "standby guard"}[i]
		st, sm := st[pid], sm[pid]
		fmt.Printf("%-48s %s CPU %.4f%% of a core; VmRSS %d kB (RssAnon %d, RssFile %d), private %d kB (clean %d, dirty %d), Pss %d kB, threads %d\n", "",
			what, pct(pid), st["VmRSS"], st["RssAnon"], st["RssFile"], sm["Private_Clean"]+sm["Private_Dirty"], sm["Private_Clean"], sm["Private_Dirty"], sm["Pss"], st["Threads"])
	}
	return nil
}

// childRunning returns a child of pid whose command line (at least three
// words) matches, or 0.
func childRunning(pid int, match func(pid int, args []string) bool) int {
	for _, c := range children(pid) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if parts := strings.Split(string(cmd), "\x00"); len(parts) > 2 && match(c, parts) {
			return c
		}
	}
	return 0
}

// children lists pid's children.
func children(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var kids []int
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				kids = append(kids, c)
			}
		}
	}
	return kids
}

// kbFile reads the "Key: N kB" lines of a /proc file (and bare numbers, as
// Threads).
func kbFile(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSuffix(strings.TrimSpace(v), " kB")
		if n, err := strconv.Atoi(v); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}
