package config

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// LoadWitness builds the configuration of `edge-agent witness` from its
// arguments: the groups it serves (--groups G1,G2,... or --groups-file
// FILE; without either, the config's group) and every flag of run, as Load
// reads them. The config is the witness member's, the same for every group
// but the group: its id must be one of its witnesses, and it runs no
// embedded server. Errors are *Error, like Load's; -h/--help gives one that
// wraps flag.ErrHelp.
func LoadWitness(args []string) (*Config, []string, error) {
	flags, rest, err := takeFlags(args, "groups", "groups-file", "read-batch")
	if err != nil {
		return nil, nil, err
	}
	groups, err := witnessGroups(flags["groups"], flags["groups-file"])
	if err != nil {
		return nil, nil, err
	}
	rb := flags["read-batch"]
	batch, err := time.ParseDuration(rb)
	if rb != "" && err != nil {
		return nil, nil, &Error{msg: fmt.Sprintf("--read-batch: %q is not a duration", rb)}
	}
	if len(groups) > 0 {
		// The config's group is a template; each served group replaces it.
		rest = append(rest, "--group="+groups[0])
	}
	c, err := Load(rest)
	if err != nil {
		return nil, nil, err
	}
	if len(groups) == 0 {
		groups = []string{c.Agent.Group}
	}
	if !c.Agent.IsWitness(c.Agent.ID) {
		return nil, nil, &Error{Key: "id", msg: fmt.Sprintf("id: %q is not one of witnesses %v: edge-agent witness serves only as a witness (a gateway runs edge-agent run)", c.Agent.ID, c.Agent.Witnesses)}
	}
	if c.EmbeddedNATS {
		return nil, nil, &Error{Key: "nats.embedded", msg: "embedded_nats: a witness process connects to the NATS servers the groups use (nats.urls); for a witness that runs the site's own server, use edge-agent run"}
	}
	c.ReadBatch = DefaultReadBatch(c.Agent.Heartbeat)
	if rb != "" {
		if tick := c.Agent.Tick(); batch < 0 || batch > tick {
			return nil, nil, &Error{msg: fmt.Sprintf("--read-batch: %s is outside 0..%s (one tick, heartbeat/10)", batch, tick)}
		}
		c.ReadBatch = batch
	}
	return c, groups, nil
}

// DefaultReadBatch is --read-batch's default for heartbeat period h:
// h/200, at most 5 ms (5 ms at the default 1 s; 0.5 ms at 100 ms).
func DefaultReadBatch(h time.Duration) time.Duration { return min(h/200, 5*time.Millisecond) }

// WitnessUsage writes the flags of `edge-agent witness` and their help to
// w: its own, then run's.
func WitnessUsage(w io.Writer) {
	fmt.Fprint(w, `  --groups G1,G2,...
    	the groups to serve as their witness (default: the config's group)
  --groups-file FILE
    	the groups to serve, one per line (# starts a comment)
  --read-batch DURATION
    	let messages gather this long in the connection's socket before reading
    	them, 0 to read each at once (default heartbeat/200, at most 5ms; at
    	most heartbeat/10): fewer wake-ups for many groups, each message up to
    	this much later

The config is the member's, as for run, the same for every group but the group:
its id must be one of its witnesses; each group's term and vote are kept in
state_dir/GROUP. Every other run flag applies:

`)
	Usage(w)
}

// takeFlags takes the flags names (--NAME VALUE or --NAME=VALUE, one or
// two dashes) out of args, returning the last value given of each and the
// other arguments. -h or --help gives an error wrapping flag.ErrHelp.
func takeFlags(args []string, names ...string) (vals map[string]string, rest []string, err error) {
	vals = map[string]string{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "-h" || arg == "--help" || arg == "-help" {
			return nil, nil, &Error{msg: "witness: help requested", err: flag.ErrHelp}
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || !slices.Contains(names, name) {
			rest = append(rest, arg)
			continue
		}
		if !hasVal {
			if i+1 == len(args) {
				return nil, nil, &Error{msg: "--" + name + ": needs a value"}
			}
			i++
			val = args[i]
		}
		vals[name] = val
	}
	return vals, rest, nil
}

// witnessGroups returns the groups that --groups (list) or --groups-file
// (file) name, in order, each once; none when neither is given.
func witnessGroups(list, file string) (groups []string, err error) {
	if list != "" && file != "" {
		return nil, &Error{msg: "--groups and --groups-file: give one of them"}
	}
	if list != "" {
		for g := range strings.SplitSeq(list, ",") {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			return nil, &Error{msg: "--groups: give at least one group"}
		}
	}
	if file != "" {
		if groups, err = readGroupsFile(file); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g] {
			return nil, &Error{msg: fmt.Sprintf("groups: group %q is listed twice", g)}
		}
		seen[g] = true
	}
	return groups, nil
}

// readGroupsFile reads one group name per line; blank lines and what
// follows a # are ignored.
func readGroupsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{msg: "--groups-file: " + err.Error(), err: err}
	}
	defer f.Close()
	var groups []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		g, _, _ := strings.Cut(sc.Text(), "#")
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if strings.ContainsAny(g, " \t,") {
			return nil, &Error{msg: fmt.Sprintf("--groups-file %s:%d: %q: one group name per line", path, line, g)}
		}
		groups = append(groups, g)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{msg: fmt.Sprintf("--groups-file %s: %v", path, err), err: err}
	}
	if len(groups) == 0 {
		return nil, &Error{msg: fmt.Sprintf("--groups-file %s: no group in it", path)}
	}
	return groups, nil
}
