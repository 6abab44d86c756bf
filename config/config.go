package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge"
)

// Defaults of the binary's own settings (the agent's defaults live in
// agent.Config.Validate).
const (
	DefaultHTTPAddr      = "127.0.0.1:9180"
	DefaultNATSListen    = "127.0.0.1:4222"
	DefaultClusterListen = "0.0.0.0:6222"
	defaultLogFormat     = "text"
	defaultLogLevel      = "info"
)

// Bounds of a member priority, in the config file and in --members.
const (
	minPriority = -1000000
	maxPriority = 1000000
)

// configFlag is the flag that names the config file.
const configFlag = "config"

// Config is the validated configuration of `edge-agent run`: the agent's
// own Config (defaults filled by agent.Config.Validate) plus what the binary
// needs around it.
type Config struct {
	// Agent is the election agent's configuration, already validated.
	Agent agent.Config
	// NATSURLs are the NATS servers to connect to (nats:// or tls://). It may
	// be empty when EmbeddedNATS is set.
	NATSURLs []string
	// EmbeddedNATS runs a nats-server inside the agent.
	EmbeddedNATS bool
	// NATSListen is the embedded server's client address (host:port). It is
	// "" exactly when EmbeddedNATS is false: a listen address given without
	// an embedded server is ignored.
	NATSListen string
	// NATSClient is how the agent's NATS connection authenticates and
	// secures itself; an embedded server requires the same of its clients.
	NATSClient edge.ClientConfig
	// NATSMonitorPort is the embedded server's monitoring port on
	// 127.0.0.1; 0 is off. It is 0 without an embedded server.
	NATSMonitorPort int
	// NATSCluster clusters the embedded server with the other gateways'
	// (nil: standalone). It is nil without an embedded server.
	NATSCluster *edge.ClusterConfig
	// NATSLeafNode connects the embedded server to an upstream hub (nil:
	// none). It is nil without an embedded server.
	NATSLeafNode *edge.LeafNodeConfig
	// HTTPAddr is the host:port of /metrics, /healthz, /readyz and /status;
	// "" disables the HTTP server (the config says "" or "off").
	HTTPAddr string
	// LogFormat is "text" or "json".
	LogFormat string
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string
	// Journal, when set, is a file the agent appends its leadership
	// intervals and persisted votes to (JSON lines, see agent.JournalEntry).
	Journal string
	// SystemUser/SystemPassword or SystemCreds authenticate a second NATS
	// connection in the server's system account, from which the agent reads
	// client disconnect advisories (fast failover).
	SystemUser, SystemPassword, SystemCreds string

	// Push is the Pushgateway push; URL "" pushes nothing.
	Push edge.PushConfig
	// Duty is the leader duty; zero when there is none.
	Duty agent.DutyConfig
	// DutyIgnored is set when this member is a witness and the config
	// names a leader duty or virtual IPs: a witness never leads, so they
	// are dropped (Duty is zero) and the agent warns at start. The same
	// site config file can then serve every member, the witness included.
	DutyIgnored bool
	// ReadBatch is `edge-agent witness`'s --read-batch: how long the
	// witness process lets messages gather in its connection's socket
	// before it reads them (witness.Config.ReadBatch). Set by LoadWitness
	// only (Load leaves it 0).
	ReadBatch time.Duration
}

// Error is a mistake in the configuration (flags or file). Its message is
// one line that names the config key or the flag at fault, and for a value
// of the file its line; the binary exits with status 2 on it.
type Error struct {
	// Key is the config-file key the error is about ("heartbeat",
	// "nats.urls", ...), or "" when it is about no single key (an unreadable
	// file, a YAML syntax error, a misplaced argument).
	Key string
	msg string
	err error
}

// Error returns the one-line message.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the underlying cause (an fs error, flag.ErrHelp), if any.
func (e *Error) Unwrap() error { return e.err }

// loader loads one configuration and remembers where each value came from,
// so that an error found later (by agent.Config.Validate) can name the flag
// or the file line that set it.
type loader struct {
	c     *Config
	table []setting
	path  string            // the config file, "" when none
	src   map[string]string // key -> "--flag" or "config FILE: line N: key"
	// cluster and leaf receive the nats.cluster and nats.leafnode settings;
	// finish attaches them to c if any of their keys was set.
	cluster edge.ClusterConfig
	leaf    edge.LeafNodeConfig
}

// newLoader returns a loader of a Config holding the binary's defaults.
func newLoader() *loader {
	l := &loader{
		c:   &Config{HTTPAddr: DefaultHTTPAddr, LogFormat: defaultLogFormat, LogLevel: defaultLogLevel},
		src: map[string]string{},
	}
	l.table = l.settings()
	return l
}

// Load builds the configuration of `edge-agent run` from its arguments (the
// flags after "run"): the --config file if any, then every flag actually
// given, which overrides the file; then it validates the result. Every error
// is an *Error with a one-line message naming the flag or config key at
// fault; -h/--help gives one that wraps flag.ErrHelp.
func Load(args []string) (*Config, error) {
	l := newLoader()
	fset := l.flagSet(io.Discard)
	if err := fset.Parse(args); err != nil {
		return nil, flagParseError(err)
	}
	if fset.NArg() > 0 {
		return nil, &Error{msg: fmt.Sprintf("run: unexpected argument %q (every setting is a flag, e.g. --config FILE)", fset.Arg(0))}
	}
	var given []*flag.Flag
	fset.Visit(func(f *flag.Flag) { given = append(given, f) })
	for _, f := range given {
		if f.Name != configFlag {
			continue
		}
		path := f.Value.String()
		if path == "" {
			return nil, &Error{msg: "--config: give a config file path"}
		}
		if err := l.loadFile(path); err != nil {
			return nil, err
		}
	}
	for _, f := range given {
		s := f.Value.(*rawFlag).s
		if s == nil {
			continue // --config
		}
		where := "--" + f.Name
		if err := s.val.set(f.Value.String()); err != nil {
			return nil, &Error{Key: s.key, msg: where + ": " + err.Error()}
		}
		l.src[s.key] = where
	}
	return l.finish()
}

// LoadFile loads and validates the config file at path alone, as `edge-agent
// check-config` does: the same rules as Load, no flags.
func LoadFile(path string) (*Config, error) {
	if path == "" {
		return nil, &Error{msg: "check-config: give a config file (--config FILE)"}
	}
	l := newLoader()
	if err := l.loadFile(path); err != nil {
		return nil, err
	}
	return l.finish()
}

// rawFlag is a flag.Value that keeps the text as given, so that the
// setting, not the flag package, parses and reports it.
type rawFlag struct {
	s   *setting // nil for --config
	val string
}

// String returns the text last given.
func (f *rawFlag) String() string {
	if f == nil {
		return ""
	}
	return f.val
}

// Set records s.
func (f *rawFlag) Set(s string) error { f.val = s; return nil }

// IsBoolFlag tells the flag package that "--flag" alone is allowed.
func (f *rawFlag) IsBoolFlag() bool {
	if f.s == nil {
		return false
	}
	b, ok := f.s.val.(interface{ isBool() bool })
	return ok && b.isBool()
}

// flagSet returns the flag set of `edge-agent run`, writing its usage and
// errors to out: --config and one flag per setting.
func (l *loader) flagSet(out io.Writer) *flag.FlagSet {
	fset := flag.NewFlagSet("run", flag.ContinueOnError)
	fset.SetOutput(out)
	fset.Var(&rawFlag{}, configFlag, "YAML config `FILE`; flags override its values")
	for i := range l.table {
		s := &l.table[i]
		fset.Var(&rawFlag{s: s}, s.flag, s.usage+" [config: "+s.key+"]")
	}
	return fset
}

// Usage writes the flags of `edge-agent run` and their help to w.
func Usage(w io.Writer) {
	newLoader().flagSet(w).PrintDefaults()
}

// flagParseError turns an error of flag.FlagSet.Parse into an *Error that
// names the flag the way users type it (--name).
func flagParseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return &Error{msg: "run: help requested", err: err}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return &Error{msg: "--" + strings.TrimLeft(name, "-") + ": unknown flag"}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return &Error{msg: "--" + strings.TrimLeft(name, "-") + ": needs a value"}
	}
	return &Error{msg: msg, err: err}
}

// errorf returns an error about key, naming the flag or file line that set
// it; for a key that nothing set, the key itself, after the config file if
// there is one (that is where the key is missing).
func (l *loader) errorf(key, format string, args ...any) *Error {
	where := l.src[key]
	switch {
	case where != "":
	case l.path != "":
		where = "config " + l.path + ": " + key
	default:
		where = key
	}
	return &Error{Key: key, msg: where + ": " + fmt.Sprintf(format, args...)}
}

// keyedError turns an error whose message starts with a setting key (as
// agent.Config.Validate's do) into one naming the flag or file line that
// set it.
func (l *loader) keyedError(err error) error {
	msg := err.Error()
	if key, rest, ok := strings.Cut(msg, ": "); ok && l.setting(key) != nil {
		e := l.errorf(key, "%s", rest)
		e.err = err
		return e
	}
	return &Error{msg: msg, err: err}
}
