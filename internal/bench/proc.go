package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTime returns the CPU time process pid has used so far, summed over its
// threads from /proc/<pid>/task/*/schedstat (nanoseconds, unlike the 10 ms
// clock ticks of /proc/<pid>/stat, which cannot resolve an idle agent's
// fraction of a percent within a second).
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no schedstat: %v", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// rss returns the resident set size of process pid in bytes (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS", pid)
}

// usage is what sample measured of one process.
type usage struct {
	cpuPct []float64 // % of one core, per interval
	rssMB  []float64 // MB (10^6 bytes), at the end of each interval
	cpu    time.Duration
	wall   time.Duration
}

// meanCPU is the CPU used over the whole window, in % of one core.
func (u usage) meanCPU() float64 { return 100 * u.cpu.Seconds() / u.wall.Seconds() }

// sample measures processes pids every interval for window.
func sample(pids []int, interval, window time.Duration) ([]usage, error) {
	out := make([]usage, len(pids))
	prev := make([]time.Duration, len(pids))
	first := make([]time.Duration, len(pids))
	for i, pid := range pids {
		c, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		prev[i], first[i] = c, c
	}
	start := time.Now()
	last := start
	for time.Since(start) < window {
		time.Sleep(interval - time.Since(last)%interval)
		now := time.Now()
		for i, pid := range pids {
			c, err := cpuTime(pid)
			if err != nil {
				return nil, err
			}
			r, err := rss(pid)
			if err != nil {
				return nil, err
			}
			out[i].cpuPct = append(out[i].cpuPct, 100*(c-prev[i]).Seconds()/now.Sub(last).Seconds())
			out[i].rssMB = append(out[i].rssMB, float64(r)/1e6)
			prev[i] = c
		}
		last = now
	}
	for i := range out {
		out[i].cpu = prev[i] - first[i]
		out[i].wall = last.Sub(start)
	}
	return out, nil
}
