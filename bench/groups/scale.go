package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
)

// scale runs many groups of 3 agents in this process on one nats-server,
// which runs in a child process so that its CPU can be told apart from the
// agents'. It waits until every group has elected, then for a window checks
// every second that each group has exactly one leader with a valid lease,
// named by all three members, and samples the server's CPU and RSS.
func scale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	groups := fs.Int("groups", 500, "groups of 3 agents")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat period H")
	window := fs.Duration("window", 30*time.Second, "steady-state window")
	jsonPath := fs.String("json", "", "write the series here")
	_ = fs.Parse(args)
	began := time.Now()

	srv, url, err := startServerProcess()
	if err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	gs := make([]*group, *groups)
	for i := range gs {
		gs[i] = newGroup(fmt.Sprintf("g%03d", i), url, dir, "bully", 3, *hb, nil)
	}
	defer stopAll(gs)
	t0 := time.Now()
	for _, g := range gs {
		if err := g.startAll(); err != nil {
			return err
		}
	}
	started := time.Since(t0)
	terms, err := electAll(gs, 10*time.Millisecond, 2*time.Minute)
	if err != nil {
		return err
	}
	elected := time.Since(t0)
	fmt.Printf("scale: %d groups of 3 (%d agents) connected in %s, all elected %s after the first start\n",
		len(gs), 3*len(gs), started.Round(time.Millisecond), elected.Round(time.Millisecond))

	st, err := watchSteady(gs, terms, []int{srv.Process.Pid, os.Getpid()}, *window)
	if err != nil {
		return err
	}
	oneLeader, serverCPU, serverRSS, agentsCPU := st.oneLeader, st.cpu[0], scaled(st.rss[0], 1e6), st.cpu[1]
	meanCPU, meanSelf, changes, worst := st.meanCPU[0], st.meanCPU[1], st.changes, st.worst
	settings := fmt.Sprintf("%d groups x 3 agents (%d connections) in one process, 1 nats-server in another, H=%s, k=3, checked every 1 s for %s",
		len(gs), 3*len(gs), *hb, *window)
	note := fmt.Sprintf("all %d groups elected %.1f s after the first agent started (%.1f s to start all agents); %d groups changed leader or term during the window",
		len(gs), elected.Seconds(), started.Seconds(), changes)
	if worst != "" {
		note += "; first group without exactly one leader: " + worst
	}
	out := []benchresult.Series{
		{Figure: "scale", Name: "groups with exactly one leader", Unit: "groups", Settings: settings, Samples: oneLeader,
			Targets: []benchresult.Target{{Stat: "min", Min: float64(len(gs)), AtLeast: true}}, Note: note},
		{Figure: "scale", Name: "nats-server CPU", Unit: "% of a core", Settings: settings, Samples: serverCPU,
			Note: fmt.Sprintf("mean over the window %.2f%%", meanCPU)},
		{Figure: "scale", Name: "nats-server RSS", Unit: "MB", Settings: settings, Samples: serverRSS},
		{Figure: "scale", Name: fmt.Sprintf("CPU of the process running the %d agents", 3*len(gs)), Unit: "% of a core", Settings: settings, Samples: agentsCPU,
			Note: fmt.Sprintf("mean over the window %.1f%% of one core, of the %d%% this machine has", meanSelf, 100*runtime.NumCPU())},
	}
	fmt.Printf("scale: groups with one leader p50 %.0f min %.0f; server CPU mean %.2f%% p99 %.2f%%; server RSS p99 %.1f MB; agents' CPU mean %.1f%%; %d groups changed leader or term\n",
		benchresult.Percentile(oneLeader, 50), benchresult.Percentile(oneLeader, 0), meanCPU,
		benchresult.Percentile(serverCPU, 99), benchresult.Percentile(serverRSS, 99), meanSelf, changes)
	if *jsonPath == "" {
		return nil
	}
	return benchresult.Write(*jsonPath, benchresult.File{Program: "bench scale",
		Started: began.UTC().Format(time.RFC3339), Seconds: time.Since(began).Seconds(), Series: out})
}

// startServerProcess runs `groups serve` as a child and returns it with the
// URL it listens on.
func startServerProcess() (*exec.Cmd, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "serve")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	_ = stdin // closed when this process exits: the child then stops
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("groups serve: %w", err)
	}
	return cmd, strings.TrimSpace(line), nil
}

// serve runs a nats-server on a free loopback port, prints its URL and runs
// until its standard input closes (its parent is gone).
func serve([]string) error {
	ns, err := harness.StartNATS()
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	fmt.Println(ns.ClientURL())
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
