// Package procstat reads what a benchmark needs to know about a running
// process from Linux's /proc: the CPU time it has used, at nanosecond
// resolution, and its resident memory.
package procstat

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

// CPUTime returns the CPU time process pid has used so far, summed over its
// threads from /proc/PID/task/*/schedstat (nanoseconds, where the 10 ms
// clock ticks of /proc/PID/stat cannot resolve an idle agent's fraction of
// a percent within a second). Threads that already exited are not counted;
// a Go process keeps its threads.
func CPUTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("procstat: process %d: no schedstat (%v)", pid, err)
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
			return 0, fmt.Errorf("procstat: %s: %w", t, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// RSS returns the resident set size of process pid in bytes (VmRSS).
func RSS(pid int) (int64, error) {
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
	return 0, fmt.Errorf("procstat: process %d: no VmRSS", pid)
}
