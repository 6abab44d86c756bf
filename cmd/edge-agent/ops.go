package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/edge-agent/edge-agent/opsclient"
)

// The commands that talk to a running group (package opsclient): a usage
// error exits 2, a failure 1, each with one line naming the command; -h
// prints the command's usage and exits 0.

// opsSynopsis is the first line of each command's -h.
var opsSynopsis = map[string]string{
	"status":   "edge-agent status [--json] [--wait D] (--config FILE | --nats-url URL --group G) [flags]",
	"resign":   "edge-agent resign (--config FILE | --nats-url URL --group G) [flags]",
	"transfer": "edge-agent transfer ID (--config FILE | --nats-url URL --group G) [flags]",
	"drain":    "edge-agent drain ID (--config FILE | --nats-url URL --group G) [flags]",
	"undrain":  "edge-agent undrain ID (--config FILE | --nats-url URL --group G) [flags]",
	"watch":    "edge-agent watch [--json] [--count N] (--config FILE | --nats-url URL --group G) [flags]",
}

// parseOps parses the flags of an ops command; done is true when it
// printed the usage (-h) or an error, with the exit status in code.
func parseOps(cmd string, args []string, withJSON bool, stdout, stderr io.Writer, extra ...func(*flag.FlagSet)) (o *opsclient.Options, code int, done bool) {
	o, err := opsclient.ParseFlags(cmd, args, withJSON, extra...)
	var help *opsclient.HelpError
	if errors.As(err, &help) {
		return nil, printHelp(stdout, opsSynopsis[cmd], help.Flags, nil), true
	}
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return nil, exitUsage, true
	}
	return o, exitOK, false
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	var wait time.Duration
	o, code, done := parseOps("status", args, true, stdout, stderr, func(fs *flag.FlagSet) {
		fs.DurationVar(&wait, "wait", 0, "wait up to this long for the agents that answer to agree on a leader (0: ask once)")
	})
	if done {
		return code
	}
	if wait < 0 {
		fmt.Fprintln(stderr, "edge-agent status: --wait must not be negative")
		return exitUsage
	}
	return opsExit(stderr, "status", opsclient.Status(o, wait, stdout, stderr))
}

// cmdRequest asks the leader to resign, or to transfer to member id; or
// asks member id to stop standing for election (drain) or to stand again
// (undrain).
func cmdRequest(args []string, verb, id string, stdout, stderr io.Writer) int {
	o, code, done := parseOps(verb, args, false, stdout, stderr)
	if done {
		return code
	}
	if verb == "drain" || verb == "undrain" {
		return opsExit(stderr, verb, opsclient.Drain(o, id, verb == "drain", stdout, stderr))
	}
	return opsExit(stderr, verb, opsclient.Handover(o, id, stdout, stderr))
}

// cmdWatch streams the group's leader changes until interrupted (SIGINT or
// SIGTERM, exit 0), or until --count leader changes were seen.
func cmdWatch(args []string, stdout, stderr io.Writer) int {
	count := 0
	o, code, done := parseOps("watch", args, true, stdout, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&count, "count", 0, "exit once the group's leader changed this many times and the new leader is known (0: run until interrupted)")
	})
	if done {
		return code
	}
	if count < 0 {
		fmt.Fprintln(stderr, "edge-agent watch: --count must not be negative")
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
