// Command attack attacks a secure three-gateway site of real edge-agent
// processes (internal/attack) and prints what each attack achieved, for the
// binary given (the tree's by default): the figures of docs/SECURITY.md and
// of the closing note, before and after, come from it.
//
//	go run ./bench/attack -rows 1,2,3            # this tree
//	go run ./bench/attack -bin /tmp/old/edge-agent -old -rows all
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/attack"
	"github.com/edge-agent/edge-agent/internal/harness"
)

func main() {
	bin := flag.String("bin", "", "edge-agent binary to attack (default: build this tree)")
	old := flag.Bool("old", false, "the binary predates the fixes (no operator keys, no signed control requests)")
	rows := flag.String("rows", "all", "rows to run: all, or a comma-separated list of 1..8, compromised, flood")
	floodFor := flag.Duration("flood", 30*time.Second, "length of the site-client flood")
	trials := flag.Int("trials", 20, "trials of the compromised-member attack")
	verbose := flag.Bool("v", false, "echo the agents' logs")
	hb := flag.Duration("heartbeat", 100*time.Millisecond, "H of the compromised-member attack")
	seed := flag.Uint64("seed", 1, "seed of the compromised-member attack's sequences")
	flag.Parse()
	dir, err := os.MkdirTemp("", "attackbench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		if *bin, err = harness.BuildBinary(dir); err != nil {
			fail(err)
		}
	}
	want := map[string]bool{}
	for _, r := range strings.Split(*rows, ",") {
		want[strings.TrimSpace(r)] = true
	}
	var lines *attack.Lines
	run := func(name string, f func(*attack.Site) (fmt.Stringer, error), hb ...time.Duration) {
		if !want["all"] && !want[name] {
			return
		}
		sub, err := os.MkdirTemp(dir, "row")
		if err != nil {
			fail(err)
		}
		lines = &attack.Lines{}
		o := attack.Options{Operators: !*old, Log: lines}
		if len(hb) > 0 {
			o.Heartbeat = hb[0]
		}
		if *verbose {
			o.Log = io.MultiWriter(lines, os.Stderr)
		}
		s, err := attack.NewSite(*bin, sub, o)
		if err != nil {
			fail(err)
		}
		defer s.Stop()
		if err := s.StartAll(); err != nil {
			fail(err)
		}
		start := time.Now()
		r, err := f(s)
		s.Stop()
		if err != nil {
			fmt.Printf("row %s: error after %s: %v\n", name, time.Since(start).Round(time.Millisecond), err)
			return
		}
		fmt.Printf("row %s: %s\n", name, r)
	}
	run("1", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow1(s, *bin, !*old) })
	run("2", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow2(s, *bin, !*old) })
	run("3", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow3(s, *bin, !*old) })
	// H = 500 ms: a restarted member waits D = 1.5 s before it votes, long
	// enough for the attacker's server to rejoin the cluster.
	run("4", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow4(s, 10*time.Second) }, 500*time.Millisecond)
	run("5", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow5(s) })
	run("6", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackRow6(s, lines, 10*time.Second) }, time.Second)
	if want["all"] || want["7"] {
		r, err := attack.AttackRow7(*bin, dir)
		report("7", r, err)
		for _, l := range r.Lines {
			fmt.Println("   ", l)
		}
	}
	if want["all"] || want["8"] {
		r, err := attack.AttackRow8(*bin, dir)
		report("8", r, err)
	}
	run("compromised", func(s *attack.Site) (fmt.Stringer, error) { return attack.AttackCompromised(s, *trials, *seed) }, *hb)
	// The flood at the default heartbeat (1 s): the lease a production
	// leader holds.
	run("flood", func(s *attack.Site) (fmt.Stringer, error) { return attack.Flood(s, *floodFor) }, time.Second)
	_ = trials
}

func report(name string, r fmt.Stringer, err error) {
	if err != nil {
		fmt.Printf("row %s: error: %v\n", name, err)
		return
	}
	fmt.Printf("row %s: %s\n", name, r)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "attack:", err)
	os.Exit(1)
}
