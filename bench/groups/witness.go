package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// witnessScale runs one `edge-agent witness` process serving many
// two-gateway groups, the gateways' agents in this process (each on a
// connection of its own), one nats-server in a child process. It waits until
// every pair elected a gateway and the witness names that leader, then for a
// window checks every second that each pair has exactly one leader with a
// valid lease, named by both gateways, and samples the witness process's
// CPU and RSS: what one witness box costs per site it serves.
func witnessScale(args []string) error {
	fs := flag.NewFlagSet("witness", flag.ExitOnError)
	pairs := fs.Int("pairs", 1000, "two-gateway groups the witness serves")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat period H")
	window := fs.Duration("window", 60*time.Second, "steady-state window")
	bin := fs.String("bin", "", "the edge-agent binary (default: build this tree's)")
	perID := fs.Int("conns", 8, "connections per gateway id that the simulated gateways share (0: one per gateway)")
	jsonPath := fs.String("json", "", "write the series here")
	extra := fs.String("witness-flags", "", "more flags of the witness process, space-separated (e.g. \"--read-batch 0\")")
	_ = fs.Parse(args)
	began := time.Now()

	dir, err := os.MkdirTemp("", "bench-witness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		if *bin, err = harness.BuildBinary(dir); err != nil {
			return err
		}
	}
	srv, url, err := startServerProcess()
	if err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()

	names := make([]string, *pairs)
	for i := range names {
		names[i] = fmt.Sprintf("site%04d", i)
	}
	w, httpAddr, err := startWitnessProcess(*bin, dir, url, names, *hb, strings.Fields(*extra))
	if err != nil {
		return err
	}
	defer func() {
		_ = w.Process.Kill()
		_ = w.Wait()
	}()

	// The gateways share a few connections (gw1s on some, gw2s on others:
	// a connection does not hear its own messages), with small inboxes:
	// 2,000 agents with a connection and the default inbox each do not fit
	// this machine beside the witness, and the witness sees the same
	// messages either way.
	conns := map[string][]sharedConn{}
	for _, id := range []string{"gw1", "gw2"} {
		for j := range *perID {
			nc, err := nats.Connect(url, bus.NATSOptions(fmt.Sprintf("bench-%s-%d", id, j))...)
			if err != nil {
				return err
			}
			defer nc.Close()
			conns[id] = append(conns[id], sharedConn{nc: nc, s: bus.NewShared(nc, quiet)})
		}
	}
	gs := make([]*group, len(names))
	for i, n := range names {
		gs[i] = newWitnessGroup(n, url, dir, 2, *hb, "w")
		if *perID > 0 {
			gs[i].conns = map[string]sharedConn{"gw1": conns["gw1"][i%*perID], "gw2": conns["gw2"][i%*perID]}
		}
	}
	defer stopAll(gs)
	t0 := time.Now()
	for _, g := range gs {
		if err := g.startAll(); err != nil {
			return err
		}
	}
	started := time.Since(t0)
	terms, err := electAll(gs, 50*time.Millisecond, 5*time.Minute)
	if err != nil {
		return err
	}
	if err := poll.Every(100*time.Millisecond, 2*time.Minute, "the witness names every pair's leader", func() (bool, string) {
		s, err := witnessSummary(httpAddr)
		if err != nil {
			return false, err.Error()
		}
		return s.Led == len(gs), fmt.Sprintf("%d of %d groups led", s.Led, len(gs))
	}); err != nil {
		return err
	}
	elected := time.Since(t0)
	fmt.Printf("witness: %d pairs (%d gateway agents) connected in %s, all elected and known to the witness %s after the first start\n",
		len(gs), 2*len(gs), started.Round(time.Millisecond), elected.Round(time.Millisecond))

	st, err := watchSteady(gs, terms, []int{w.Process.Pid}, *window)
	if err != nil {
		return err
	}
	led, cpu, rss := st.oneLeader, st.cpu[0], scaled(st.rss[0], 1<<20)
	meanCPU, changes, worst := st.meanCPU[0], st.changes, st.worst
	s, err := witnessSummary(httpAddr)
	if err != nil {
		return err
	}
	shared := "a connection each"
	if *perID > 0 {
		shared = fmt.Sprintf("sharing %d connections", 2**perID)
	}
	settings := fmt.Sprintf("1 edge-agent witness process serving %d groups of 2 gateways + the witness; the %d gateway agents in another process (%s), 1 nats-server in a third; H=%s, k=3, checked every 1 s for %s",
		len(gs), 2*len(gs), shared, *hb, *window)
	if *extra != "" {
		settings += "; witness flags " + *extra
	}
	note := fmt.Sprintf("all %d pairs elected a gateway and the witness named it %.1f s after the first gateway started (%.1f s to start them); %d pairs changed leader or term during the window; at the end the witness named a leader in %d of %d groups, %d failed",
		len(gs), elected.Seconds(), started.Seconds(), changes, s.Led, s.Groups, len(s.Failed))
	if worst != "" {
		note += "; first pair without exactly one leader: " + worst
	}
	out := []benchresult.Series{
		{Figure: "witness", Name: "pairs with exactly one leader", Unit: "groups", Settings: settings, Samples: led,
			Targets: []benchresult.Target{{Stat: "min", Min: float64(len(gs)), AtLeast: true}}, Note: note},
		{Figure: "witness", Name: "witness process CPU", Unit: "% of a core", Settings: settings, Samples: cpu,
			Targets: []benchresult.Target{{Stat: "mean", Max: 5}}, Note: fmt.Sprintf("mean over the window %.2f%%", meanCPU)},
		{Figure: "witness", Name: "witness process RSS", Unit: "MiB", Settings: settings, Samples: rss,
			Targets: []benchresult.Target{{Stat: "max", Max: 64}}},
	}
	fmt.Printf("witness: pairs with one leader min %.0f of %d; witness CPU mean %.2f%% p99 %.2f%% of a core; RSS max %.1f MiB; %d pairs changed leader or term\n",
		benchresult.Percentile(led, 0), len(gs), meanCPU, benchresult.Percentile(cpu, 99), benchresult.Percentile(rss, 100), changes)
	if *jsonPath == "" {
		return nil
	}
	return benchresult.Write(*jsonPath, benchresult.File{Program: "bench witness",
		Started: began.UTC().Format(time.RFC3339), Seconds: time.Since(began).Seconds(), Series: out})
}

// startWitnessProcess starts `edge-agent witness` for groups, the witness
// member w of each (gw1, gw2, w), and waits until it is connected. It
// returns the process and its HTTP address.
func startWitnessProcess(bin, dir, url string, groups []string, hb time.Duration, extra []string) (*exec.Cmd, string, error) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	groupsFile := filepath.Join(dir, "groups")
	if err := os.WriteFile(groupsFile, []byte(strings.Join(groups, "\n")+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	cfg := fmt.Sprintf(`id: w
group: %s
members: [gw1, gw2, w]
witnesses: [w]
heartbeat: %s
preemption: never
nats:
  urls: [%s]
state_dir: %s
http_addr: %s
log_level: warn
`, groups[0], hb, url, filepath.Join(dir, "witness-state"), addr)
	cfgFile := filepath.Join(dir, "witness.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(dir, "witness.log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, append([]string{"witness", "--config", cfgFile, "--groups-file", groupsFile}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	err = poll.Every(50*time.Millisecond, time.Minute, "the witness process is ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log, _ := os.ReadFile(logf.Name())
		return nil, "", fmt.Errorf("%w\n%s", err, log)
	}
	return cmd, addr, nil
}

// witnessSummary is the part of the witness process's /status it needs.
type witnessSummaryJSON struct {
	Groups int      `json:"groups"`
	Led    int      `json:"led"`
	Failed []string `json:"failed"`
}

func witnessSummary(addr string) (witnessSummaryJSON, error) {
	var s witnessSummaryJSON
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}
