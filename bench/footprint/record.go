package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
)

// record writes the figures of both sites and the arm64 binary sizes as
// benchresult series, judged against the targets of issue 8: the leader
// (which sends the heartbeats and receives every acknowledgement) is the
// measured agent; the follower is in the note.
func record(path string, began time.Time, dir string, hb, settle time.Duration, client, embedded figures, clientOnly *figures) error {
	var out []benchresult.Series
	size, err := buildArm64(dir, "", "")
	if err != nil {
		return err
	}
	noInline, err := buildArm64(dir, "all=-l", "")
	if err != nil {
		return err
	}
	clientSize, err := buildArm64(dir, "", "noembed")
	if err != nil {
		return err
	}
	out = append(out, benchresult.Series{
		Figure: "footprint", Name: "binary size, stripped linux/arm64", Unit: "MB",
		Settings: "CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -ldflags '-s -w' ./cmd/edge-agent, as make build-arm64",
		Samples:  []float64{float64(size) / 1e6},
		Targets:  []benchresult.Target{{Stat: "max", Max: 17}},
		Note: fmt.Sprintf("%d bytes; built without inlining (make build-arm64 GCFLAGS=all=-l) %d bytes = %.2f MB",
			size, noInline, float64(noInline)/1e6),
	}, benchresult.Series{
		Figure: "footprint", Name: "binary size, stripped linux/arm64, client-only build (-tags noembed)", Unit: "MB",
		Settings: "as above with -tags noembed, as make build-arm64-client: no embedded nats-server, for gateways on a site bus",
		Samples:  []float64{float64(clientSize) / 1e6},
		Targets:  []benchresult.Target{{Stat: "max", Max: 17}},
		Note:     fmt.Sprintf("%d bytes", clientSize),
	})
	type site struct {
		kind   string
		fig    figures
		rssMax float64
	}
	kinds := []site{{"client-only", client, 12}, {"with embedded nats-server (clustered, as at an offline site)", embedded, 22}}
	if clientOnly != nil {
		kinds = append(kinds, site{"client-only build (-tags noembed)", *clientOnly, 12})
	}
	for _, c := range kinds {
		settings := fmt.Sprintf("the leader of a 3-gateway site, H=%s, idle for %s, then sampled once a second; static, stripped build for this machine (RSS under qemu would measure the emulator)", hb, settle)
		out = append(out,
			benchresult.Series{Figure: "footprint", Name: "RSS, " + c.kind, Unit: "MB", Settings: settings,
				Samples: c.fig.leaderRSS, Targets: []benchresult.Target{{Stat: "p99", Max: c.rssMax}},
				Note: fmt.Sprintf("last reading %d kB anonymous (heap, stacks) + %d kB of the binary's file pages; a follower: p50 %.2f MB",
					c.fig.anonKB, c.fig.fileKB, benchresult.Percentile(c.fig.followerRSS, 50))},
			benchresult.Series{Figure: "footprint", Name: "CPU, " + c.kind, Unit: "% of a core", Settings: settings,
				Samples: c.fig.leaderCPU, Targets: []benchresult.Target{{Stat: "mean", Max: 0.5}},
				Note: fmt.Sprintf("mean over the whole sampling %.3f%%; a follower %.3f%%; %d terms started while sampling",
					c.fig.leaderMean, c.fig.followerMean, c.fig.terms)},
		)
	}
	return benchresult.Write(path, benchresult.File{Program: "footprint", Started: began.UTC().Format(time.RFC3339),
		Seconds: time.Since(began).Seconds(), Series: out})
}

// buildArm64 builds the static, stripped linux/arm64 binary as make
// build-arm64 does (with gcflags, as its GCFLAGS) and returns its size.
func buildArm64(dir, gcflags, tags string) (int64, error) {
	out := filepath.Join(dir, "edge-agent-linux-arm64"+gcflags+tags)
	cmd := exec.Command("go", "build", "-trimpath", "-gcflags", gcflags, "-tags", tags, "-ldflags", "-s -w", "-o", out, "./cmd/edge-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("go build linux/arm64: %w", err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
