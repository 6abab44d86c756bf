// Command edge-agent elects one leader among the gateways of a site over
// NATS. See README.md for the operating contract.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/witness"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultMemoryLimit is the Go runtime's soft memory limit of `run` unless
// the GOMEMLIMIT environment variable sets one.
const defaultMemoryLimit = 40 << 20

// Exit codes: 0 success, 1 runtime failure, 2 bad config or usage.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `edge-agent: leader election for the gateways of an edge site, over NATS.

Usage:
  edge-agent run --config FILE [flags]       run this gateway's agent (see run -h)
  edge-agent witness --config FILE [--groups G1,G2,... | --groups-file FILE]
                                             serve as the witness of many groups in one
                                             process (see witness -h)
  edge-agent status [--json] [--wait D] --nats-url URL --group G
                                             ask every agent of a group who leads
                                             (--wait: until they agree on a leader)
  edge-agent resign --nats-url URL --group G the leader steps down and hands over
  edge-agent transfer ID --nats-url URL --group G
                                             the leader hands over to member ID
  edge-agent drain ID --nats-url URL --group G
                                             member ID hands over if it leads and never
                                             stands, across restarts, until undrained
  edge-agent undrain ID --nats-url URL --group G
                                             member ID may stand for election again
  edge-agent watch [--json] [--count N] --nats-url URL --group G
                                             stream the group's leader changes
                                             (--count: exit after N changes)
  edge-agent demo [--gateways N] [--heartbeat D]
                                             a whole local site: election and failover
  edge-agent check-config --config FILE      validate a config file
  edge-agent reset-term --config FILE [--term N]
                                             set the stored term, with the agent stopped
                                             (the way back for a group at the term bound)
  edge-agent version

status, resign, transfer, drain, undrain and watch take --config FILE (the agent's config: its
NATS servers, credentials, group, prefix and keys) or --nats-url, --group and
the NATS credential flags of run (--nats-user, --nats-password, --nats-token,
--nats-nkey-seed, --nats-creds, --nats-tls-ca, --nats-tls-cert, --nats-tls-key);
in a group that signs (member_keys), --signing-seed FILE (a member's or an
operator's key; default --nats-nkey-seed) signs the requests and
--member-keys ID=KEY,... verifies the answers. Every command's -h lists its flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(rest, stdout, stderr)
	case "witness":
		return cmdWitness(rest, stdout, stderr)
	case "status":
		return cmdStatus(rest, stdout, stderr)
	case "resign":
		return cmdRequest(rest, "resign", "", stdout, stderr)
	case "transfer", "drain", "undrain":
		if len(rest) > 0 && isHelp(rest[0]) {
			return cmdRequest(rest, cmd, "", stdout, stderr)
		}
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintf(stderr, "edge-agent %s: give the member ID first: edge-agent %s ID --nats-url URL --group G\n", cmd, cmd)
			return exitUsage
		}
		return cmdRequest(rest[1:], cmd, rest[0], stdout, stderr)
	case "watch":
		return cmdWatch(rest, stdout, stderr)
	case "demo":
		return cmdDemo(rest, stdout, stderr)
	case "check-config":
		return cmdCheckConfig(rest, stdout, stderr)
	case "reset-term":
		return cmdResetTerm(rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "edge-agent %s (%s, %s/%s%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, buildFlavor)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "edge-agent: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// isHelp tells whether arg asks for a command's usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

// printHelp writes a command's usage for -h: its synopsis and its flags
// (flags, as flag.FlagSet.PrintDefaults prints them, or fs's).
func printHelp(w io.Writer, synopsis, flags string, fs *flag.FlagSet) int {
	if fs != nil {
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		flags = b.String()
	}
	fmt.Fprintf(w, "usage: %s\n\nflags:\n%s", synopsis, flags)
	return exitOK
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	rc, err := config.Load(args)
	return daemon(rc, err, defaultMemoryLimit, stdout, stderr, "run --config FILE [flags] (flags override the file)", config.Usage,
		func(ctx context.Context, log *slog.Logger) error { return runAgent(ctx, rc, log) })
}

// cmdWitness serves as the witness member of many groups in one process,
// over one NATS connection (package witness).
func cmdWitness(args []string, stdout, stderr io.Writer) int {
	witness.SetRuntimeDefaults()
	rc, groups, err := config.LoadWitness(args)
	return daemon(rc, err, witness.MemoryLimit(defaultMemoryLimit, len(groups)), stdout, stderr,
		"witness --config FILE [--groups G1,G2,... | --groups-file FILE] [run flags]", config.WitnessUsage,
		func(ctx context.Context, log *slog.Logger) error { return witness.Serve(ctx, rc, groups, log, version) })
}

// daemon runs a long-lived command (run, witness) with the config rc that
// loading gave, or err: its usage on -h, exit 2 on a bad config, then serve
// with the config's logger, a soft memory limit of limit bytes unless
// GOMEMLIMIT sets one, until SIGTERM or SIGINT.
func daemon(rc *config.Config, err error, limit int64, stdout, stderr io.Writer, synopsis string, usage func(io.Writer),
	serve func(context.Context, *slog.Logger) error) int {
	cmd, _, _ := strings.Cut(synopsis, " ")
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			usage(&b)
			return printHelp(stdout, "edge-agent "+synopsis, b.String(), nil)
		}
		fmt.Fprintf(stderr, "edge-agent: %v\n", err)
		return exitUsage
	}
	log := edge.NewLogger(stderr, rc.LogFormat, rc.LogLevel)
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit on the Go heap: under a flood of large messages on
		// the site bus (the embedded server reads every one), the garbage
		// is collected before the agent grows (deploy/arm64/README.md).
		debug.SetMemoryLimit(limit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, log); err != nil {
		if errors.Is(err, agent.ErrTermAtBound) {
			log.Error("edge-agent failed: the group's term reached its bound; with every agent of the group stopped, run `edge-agent reset-term --config FILE` on every gateway (docs/SECURITY.md)", "err", err)
			return exitFailure
		}
		log.Error("edge-agent failed", "command", cmd, "err", err)
		return exitFailure
	}
	return exitOK
}

func cmdCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "config file to check")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printHelp(stdout, "edge-agent check-config --config FILE | check-config FILE", "", fs)
		}
		fmt.Fprintf(stderr, "edge-agent check-config: %v\n", err)
		return exitUsage
	}
	if *path == "" && fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	rc, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent: %v\n", err)
		return exitUsage
	}
	// Files the config names must be there and readable by this user (run
	// check-config as the service user); nothing here touches the network.
	for _, f := range rc.Files() {
		fh, err := os.Open(f[1])
		if err != nil {
			fmt.Fprintf(stderr, "edge-agent: config %s: %s: %v\n", *path, f[0], err)
			return exitUsage
		}
		fh.Close()
	}
	// The state directory must be there or creatable, and writable by
	// this user; nothing is created by checking.
	note, err := agent.CheckStateDir(rc.Agent.StateDir)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent: config %s: state_dir: %v\n", *path, err)
		return exitUsage
	}
	rc.Describe(stdout)
	fmt.Fprintln(stdout, note)
	return exitOK
}

// cmdResetTerm sets the term and vote stored in a gateway's state directory,
// with its agent stopped (agent.ResetState). Setting the term back (the
// default, 0) is the way back for a group whose terms reached the bound
// (election.MaxTerm): the term is the leader's fencing token, so every agent
// of the group must be stopped and every gateway reset before any starts
// again; it is refused unless the stored term is within agent.MaxTermJump of
// the bound, or --force. Raising it (--term N above the stored term) gives a
// gateway the term of a group that ran more than MaxTermJump elections
// since it last ran.
func cmdResetTerm(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reset-term", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "the agent's config file (its state_dir)")
	dir := fs.String("state-dir", "", "the state directory, instead of --config")
	term := fs.Uint64("term", 0, "the term to store")
	force := fs.Bool("force", false, "set the term back although it is far from the bound")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(stdout, "edge-agent reset-term --config FILE | --state-dir DIR [--term N] [--force]", "", fs)
	}
	if err != nil || fs.NArg() > 0 || (*path == "") == (*dir == "") {
		fmt.Fprintln(stderr, "edge-agent reset-term: usage: edge-agent reset-term --config FILE | --state-dir DIR [--term N] [--force]")
		return exitUsage
	}
	if *path != "" {
		rc, err := config.LoadFile(*path)
		if err != nil {
			fmt.Fprintf(stderr, "edge-agent: %v\n", err)
			return exitUsage
		}
		*dir = rc.Agent.StateDir
	}
	old, err := agent.ReadState(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent reset-term: %v\n", err)
		return exitFailure
	}
	if *term < old.Term && old.Term < election.MaxTerm-agent.MaxTermJump && !*force {
		fmt.Fprintf(stderr, "edge-agent reset-term: %s holds term %d, far from the bound %d: setting it back to %d would let fencing tokens go back; use --force if every agent of the group is stopped and every gateway is being reset\n",
			*dir, old.Term, election.MaxTerm, *term)
		return exitFailure
	}
	if _, err := agent.ResetState(*dir, *term); err != nil {
		fmt.Fprintf(stderr, "edge-agent reset-term: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s: term %d -> %d, vote cleared\n", *dir, old.Term, *term)
	if *term < old.Term {
		fmt.Fprintln(stdout, "reset every gateway of the group before starting any of its agents again")
	}
	return exitOK
}
