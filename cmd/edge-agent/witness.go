package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/witness"
)

const witnessHelp = `  --groups G1,G2,...
    	the groups to serve as their witness (default: the config's group)
  --groups-file FILE
    	the groups to serve, one per line (# starts a comment)

The config is the member's, as for run, the same for every group but the group:
its id must be one of its witnesses; each group's term and vote are kept in
state_dir/GROUP. Every other run flag applies:

`

// cmdWitness serves as the witness member of many groups in one process,
// over one NATS connection (package witness).
func cmdWitness(args []string, stdout, stderr io.Writer) int {
	rc, groups, err := config.LoadWitness(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			config.Usage(&b)
			return printHelp(stdout, "edge-agent witness --config FILE [--groups G1,G2,... | --groups-file FILE] [run flags]", witnessHelp+b.String(), nil)
		}
		fmt.Fprintf(stderr, "edge-agent witness: %v\n", err)
		return exitUsage
	}
	log := newLogger(stderr, rc.LogFormat, rc.LogLevel)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(witness.MemoryLimit(defaultMemoryLimit, len(groups)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := witness.Serve(ctx, rc, groups, log, version); err != nil {
		log.Error("edge-agent witness failed", "err", err)
		return exitFailure
	}
	return exitOK
}
