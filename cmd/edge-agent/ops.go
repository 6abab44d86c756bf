package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/edge-agent/edge-agent/opsclient"
)

// The commands that talk to a running group (package opsclient): a usage
// error exits 2, a failure 1, each with one line naming the command.

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	o, err := opsclient.ParseFlags("status", args, true)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	return opsExit(stderr, "status", opsclient.Status(o, stdout, stderr))
}

// cmdHandover asks the leader to resign (nominee "") or to transfer.
func cmdHandover(args []string, nominee string, stdout, stderr io.Writer) int {
	verb := "resign"
	if nominee != "" {
		verb = "transfer"
	}
	o, err := opsclient.ParseFlags(verb, args, false)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	return opsExit(stderr, verb, opsclient.Handover(o, nominee, stdout, stderr))
}

// cmdWatch streams the group's leader changes until interrupted (SIGINT or
// SIGTERM, exit 0), or until --count events were printed.
func cmdWatch(args []string, stdout, stderr io.Writer) int {
	count := 0
	o, err := opsclient.ParseFlags("watch", args, true, func(fs *flag.FlagSet) {
		fs.IntVar(&count, "count", 0, "exit after this many events (0: run until interrupted)")
	})
	if err == nil && count < 0 {
		err = fmt.Errorf("watch: --count must not be negative")
	}
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	return opsExit(stderr, "watch", opsclient.Watch(context.Background(), o, count, stdout, stderr))
}

// opsExit reports err of command cmd and returns the exit status.
func opsExit(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: %v\n", cmd, err)
		return exitFailure
	}
	return exitOK
}
