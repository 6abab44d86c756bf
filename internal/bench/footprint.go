package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
	"github.com/edge-agent/edge-agent/internal/harness"
)

// footprint measures one idle agent process at H=100ms: its CPU and RSS,
// client-only (the NATS server runs elsewhere) and with its embedded
// nats-server, which then also carries the traffic of the two other members
// of its group. The measured agent is the group's leader (gw3, the highest
// rank), which does the most work: it sends the heartbeats and receives every
// acknowledgement. It also builds the stripped linux/arm64 binary, exactly as
// `make build-arm64`, and records its size.
func footprint(args []string) error {
	fs := flag.NewFlagSet("footprint", flag.ExitOnError)
	window := fs.Duration("window", 30*time.Second, "measurement window")
	warmup := fs.Duration("warmup", 5*time.Second, "idle time after the election before measuring")
	jsonPath := fs.String("json", "", "write the series here")
	_ = fs.Parse(args)
	began := time.Now()
	dir, err := os.MkdirTemp("", "bench-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	var out []benchresult.Series

	_, arm, err := buildStripped(root, dir, "arm64")
	if err != nil {
		return err
	}
	out = append(out, benchresult.Series{
		Figure: "footprint", Name: "binary size, stripped linux/arm64", Unit: "MB",
		Settings: "CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -ldflags '-s -w' ./cmd/edge-agent (as make build-arm64)",
		Samples:  []float64{float64(arm) / 1e6},
		Targets:  []benchresult.Target{{Stat: "max", Max: 17}},
		Note:     fmt.Sprintf("%d bytes = %.2f MiB", arm, float64(arm)/(1<<20)),
	})
	fmt.Printf("footprint: arm64 binary %d bytes\n", arm)

	host, _, err := buildStripped(root, dir, "")
	if err != nil {
		return err
	}
	for _, embedded := range []bool{false, true} {
		u, follower, elections, err := idleAgent(host, dir, embedded, *warmup, *window)
		if err != nil {
			return err
		}
		kind := "client-only"
		rssMax := 12.0
		if embedded {
			kind = "with embedded nats-server"
			rssMax = 22
		}
		settings := fmt.Sprintf("leader of a 3-member group, H=100ms, k=3, idle for %s after a %s warm-up, sampled every 1 s; host binary, stripped", *window, *warmup)
		out = append(out,
			benchresult.Series{Figure: "footprint", Name: "RSS, " + kind, Unit: "MB", Settings: settings,
				Samples: u.rssMB, Targets: []benchresult.Target{{Stat: "p99", Max: rssMax}},
				Note: fmt.Sprintf("a follower of the same group: RSS p50 %.1f MB", benchresult.Percentile(follower.rssMB, 50))},
			benchresult.Series{Figure: "footprint", Name: "CPU, " + kind, Unit: "% of a core", Settings: settings,
				Samples: u.cpuPct, Targets: []benchresult.Target{{Stat: "mean", Max: 0.5}},
				Note: fmt.Sprintf("mean over the window %.3f%%; a follower of the same group: %.3f%%; %d re-elections during the window", u.meanCPU(), follower.meanCPU(), elections)},
		)
		fmt.Printf("footprint %s: RSS p50 %.1f MB p99 %.1f MB, CPU mean %.3f%% p99 %.2f%%\n", kind,
			benchresult.Percentile(u.rssMB, 50), benchresult.Percentile(u.rssMB, 99), u.meanCPU(), benchresult.Percentile(u.cpuPct, 99))
	}
	if *jsonPath == "" {
		return nil
	}
	return benchresult.Write(*jsonPath, benchresult.File{Program: "bench footprint",
		Started: began.UTC().Format(time.RFC3339), Seconds: time.Since(began).Seconds(), Series: out})
}

// idleAgent runs a 3-member group and samples its leader gw3 (and gw1, a
// follower). With embedded, gw3 runs the group's nats-server in its process.
func idleAgent(bin, dir string, embedded bool, warmup, window time.Duration) (leader, follower usage, elections int, err error) {
	common := []string{"--heartbeat", "100ms", "--heartbeat-misses", "3", "--log-level", "info"}
	sub := filepath.Join(dir, fmt.Sprintf("embedded-%v", embedded))
	var url string
	var lead *harness.Site
	if embedded {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return usage{}, usage{}, 0, err
		}
		url = "nats://" + addr
		lead = harness.NewSite(bin, url, sub, 3, append(common, "--embedded-nats", "--nats-listen", addr)...)
	} else {
		ns, err := harness.StartNATS()
		if err != nil {
			return usage{}, usage{}, 0, err
		}
		defer ns.Shutdown()
		url = ns.ClientURL()
		lead = harness.NewSite(bin, url, sub, 3, common...)
	}
	others := harness.NewSite(bin, url, sub, 3, common...)
	defer lead.Stop()
	defer others.Stop()
	if _, err := lead.Start("gw3"); err != nil {
		return usage{}, usage{}, 0, err
	}
	for _, id := range []string{"gw1", "gw2"} {
		if _, err := others.Start(id); err != nil {
			return usage{}, usage{}, 0, err
		}
	}
	ag, err := others.WaitAgreement([]string{"gw1", "gw2"}, "", 0, 10*time.Millisecond, 30*time.Second)
	if err != nil {
		return usage{}, usage{}, 0, err
	}
	if ag.Leader != "gw3" {
		return usage{}, usage{}, 0, fmt.Errorf("leader is %s, want gw3", ag.Leader)
	}
	time.Sleep(warmup)
	us, err := sample([]int{lead.Proc("gw3").Cmd.Process.Pid, others.Proc("gw1").Cmd.Process.Pid}, time.Second, window)
	if err != nil {
		return usage{}, usage{}, 0, err
	}
	ag2, err := others.WaitAgreement([]string{"gw1", "gw2"}, "", 0, 10*time.Millisecond, 5*time.Second)
	if err != nil {
		return usage{}, usage{}, 0, err
	}
	// Re-elections in the window are counted, not hidden: on a loaded
	// machine an acknowledgement can miss the 180 ms lease.
	return us[0], us[1], int(ag2.Term - ag.Term), nil
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// moduleRoot finds the root of the main module from the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run from inside the edge-agent module")
	}
	return filepath.Dir(mod), nil
}

// buildStripped builds cmd/edge-agent stripped for linux/goarch (the host's
// when empty) into dir and returns its path and size.
func buildStripped(root, dir, goarch string) (string, int64, error) {
	name := "edge-agent-host"
	env := os.Environ()
	if goarch != "" {
		name = "edge-agent-linux-" + goarch
		env = append(env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/edge-agent")
	cmd.Dir, cmd.Env = root, env
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("go build %s: %v\n%s", name, err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		return "", 0, err
	}
	return bin, st.Size(), nil
}
