package main

import (
	"fmt"
	"time"

	"github.com/edge-agent/edge-agent/internal/procstat"
)

// steady is what watchSteady saw over its window: per second, the groups
// with exactly one leader agreed on by every running member, and each
// watched process's CPU (% of a core) and RSS (bytes).
type steady struct {
	oneLeader []float64
	cpu, rss  [][]float64 // by process, in the order of pids
	meanCPU   []float64   // by process, over the whole window
	worst     string      // the first group seen without exactly one leader
	changes   int         // groups whose leader or term differs from terms at the end
}

// watchSteady checks every second, for window, that each group has
// exactly one leader with a valid lease named by all its running members,
// and samples the CPU and RSS of pids. terms are the groups' terms when
// the window began.
func watchSteady(gs []*group, terms []uint64, pids []int, window time.Duration) (*steady, error) {
	st := &steady{cpu: make([][]float64, len(pids)), rss: make([][]float64, len(pids)), meanCPU: make([]float64, len(pids))}
	prev := make([]time.Duration, len(pids))
	for i, pid := range pids {
		c, err := procstat.CPUTime(pid)
		if err != nil {
			return nil, err
		}
		prev[i] = c
	}
	first := append([]time.Duration(nil), prev...)
	start := time.Now()
	last := start
	for time.Since(start) < window {
		time.Sleep(time.Second - time.Since(last)%time.Second)
		ok := 0
		for _, g := range gs {
			if _, _, agreed := g.agreement(0); agreed && g.leaders() == 1 {
				ok++
			} else if st.worst == "" {
				st.worst = fmt.Sprintf("group %s at %s: %d leaders", g.name, time.Since(start).Round(time.Second), g.leaders())
			}
		}
		st.oneLeader = append(st.oneLeader, float64(ok))
		now := time.Now()
		for i, pid := range pids {
			c, err := procstat.CPUTime(pid)
			if err != nil {
				return nil, err
			}
			r, err := procstat.RSS(pid)
			if err != nil {
				return nil, err
			}
			st.cpu[i] = append(st.cpu[i], 100*(c-prev[i]).Seconds()/now.Sub(last).Seconds())
			st.rss[i] = append(st.rss[i], float64(r))
			prev[i] = c
		}
		last = now
	}
	for i := range pids {
		st.meanCPU[i] = 100 * (prev[i] - first[i]).Seconds() / last.Sub(start).Seconds()
	}
	for i, g := range gs {
		if _, t, ok := g.agreement(0); !ok || t != terms[i] {
			st.changes++
		}
	}
	return st, nil
}

// electAll waits until every group agrees on a leader, polling each every
// interval for at most timeout, and returns their terms.
func electAll(gs []*group, every, timeout time.Duration) ([]uint64, error) {
	terms := make([]uint64, len(gs))
	for i, g := range gs {
		_, t, err := g.waitAgreement(0, every, timeout)
		if err != nil {
			return nil, err
		}
		terms[i] = t
	}
	return terms, nil
}

// scaled returns samples each divided by unit.
func scaled(samples []float64, unit float64) []float64 {
	out := make([]float64, len(samples))
	for i, v := range samples {
		out[i] = v / unit
	}
	return out
}
