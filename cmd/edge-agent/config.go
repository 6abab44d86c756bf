package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/election"
)

// Defaults of the binary's own settings (the agent's defaults live in
// agent.Config.Validate).
const (
	defaultHTTPAddr   = "127.0.0.1:9180"
	defaultNATSListen = "127.0.0.1:4222"
	defaultLogFormat  = "text"
	defaultLogLevel   = "info"
)

// Bounds of a member priority, in the config file and in --members.
const (
	minPriority = -1000000
	maxPriority = 1000000
)

// runConfig is the validated configuration of `edge-agent run`: the agent's
// own Config (defaults filled by agent.Config.Validate) plus what the binary
// needs around it.
type runConfig struct {
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

	// Push is the Pushgateway push (config_ops.go); URL "" pushes nothing.
	Push edge.PushConfig
	// Duty is the leader duty (config_ops.go); zero when there is none.
	Duty agent.DutyConfig
}

// configError is a mistake in the configuration (flags or file). Its message
// is one line that names the config key or the flag at fault; main exits
// with status 2 on it.
type configError struct {
	// Key is the config-file key the error is about ("heartbeat",
	// "nats.urls", ...), or "" when it is about no single key (an unreadable
	// file, a YAML syntax error, a misplaced argument).
	Key string
	msg string
	err error
}

// Error returns the one-line message.
func (e *configError) Error() string { return e.msg }

// Unwrap returns the underlying cause (an fs error, flag.ErrHelp), if any.
func (e *configError) Unwrap() error { return e.err }

// setting is one configurable value: its config-file key, its flag of
// `edge-agent run`, and how a textual value is applied to a runConfig.
type setting struct {
	key    string // as the config file spells it ("nats.urls" for urls under nats)
	flag   string // the flag name, without dashes
	usage  string // flag help; a `QUOTED` word names the value
	isBool bool   // a boolean flag: "--flag" alone means true
	// set applies a value given as text (a flag, or a scalar in the file).
	// Its error does not name the key: the caller prefixes where the value
	// came from.
	set func(rc *runConfig, s string) error
	// fromFile, when not nil, applies a file node that may also be a list.
	// Its errors are *configError naming the key.
	fromFile func(l *loader, rc *runConfig, n *yaml.Node) error
}

// settings lists every setting, in the order of the documentation.
var settings = append(coreSettings, natsSettings...)

// coreSettings are the election, bus and process settings.
var coreSettings = []setting{
	{key: "id", flag: "id", usage: "this gateway's member `ID` (must be in members)",
		set: func(rc *runConfig, s string) error { rc.Agent.ID = s; return nil }},
	{key: "group", flag: "group", usage: "election group `NAME`",
		set: func(rc *runConfig, s string) error { rc.Agent.Group = s; return nil }},
	{key: "members", flag: "members", usage: "the group's members, `ID[=PRIORITY],...` (priority defaults to 0)",
		set: func(rc *runConfig, s string) error {
			ms, err := parseMemberList(s)
			if err != nil {
				return err
			}
			rc.Agent.Members = ms
			return nil
		},
		fromFile: (*loader).membersFromFile},
	{key: "algorithm", flag: "algorithm", usage: "election `ALGORITHM`: bully or ring (default bully)",
		set: func(rc *runConfig, s string) error { rc.Agent.Algorithm = s; return nil }},
	{key: "quorum", flag: "quorum", usage: "quorum `SIZE`, or none for island mode (default a majority of members)",
		set: setQuorum},
	{key: "nats.urls", flag: "nats-url", usage: "NATS server `URL[,URL...]` (nats:// or tls://)",
		set: func(rc *runConfig, s string) error {
			urls, err := parseURLList(s)
			if err != nil {
				return err
			}
			rc.NATSURLs = urls
			return nil
		},
		fromFile: (*loader).urlsFromFile},
	{key: "nats.embedded", flag: "embedded-nats", isBool: true, usage: "run an embedded NATS server",
		set: func(rc *runConfig, s string) error {
			b, err := parseBool(s)
			rc.EmbeddedNATS = b
			return err
		}},
	{key: "nats.listen", flag: "nats-listen", usage: "embedded NATS server client address `HOST:PORT` (default " + defaultNATSListen + ")",
		set: func(rc *runConfig, s string) error {
			if s != "" {
				if err := checkHostPort(s); err != nil {
					return err
				}
			}
			rc.NATSListen = s
			return nil
		}},
	{key: "heartbeat", flag: "heartbeat", usage: "leader heartbeat period `DURATION` (default 1s)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Agent.Heartbeat })},
	{key: "heartbeat_misses", flag: "heartbeat-misses", usage: "missed heartbeats `N` before the leader is suspected (default 3)",
		set: func(rc *runConfig, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("%q is not an integer", s)
			}
			rc.Agent.HeartbeatMisses = n
			return nil
		}},
	{key: "lease", flag: "lease", usage: "leader lease `DURATION` (default heartbeat_misses*heartbeat - heartbeat - 2 ticks)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Agent.Lease })},
	{key: "answer_timeout", flag: "answer-timeout", usage: "wait for an answer, a coordinator or votes, `DURATION` (default heartbeat)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Agent.AnswerTimeout })},
	{key: "preemption", flag: "preemption", usage: "how a returning higher-ranked member takes over, `POLICY`: hold-down, never or immediate (default hold-down)",
		set: func(rc *runConfig, s string) error { rc.Agent.Preemption = s; return nil }},
	{key: "hold_down", flag: "hold-down", usage: "healthy `DURATION` before a hold-down handover (default 10*heartbeat)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Agent.HoldDown })},
	{key: "state_dir", flag: "state-dir", usage: "`DIR` where the term and vote are persisted",
		set: func(rc *runConfig, s string) error { rc.Agent.StateDir = s; return nil }},
	{key: "subject_prefix", flag: "subject-prefix", usage: "NATS subject `PREFIX` (default " + agent.DefaultSubjectPrefix + ")",
		set: func(rc *runConfig, s string) error { rc.Agent.SubjectPrefix = s; return nil }},
	{key: "http_addr", flag: "http-addr", usage: "HTTP `HOST:PORT` for /metrics, /healthz, /readyz, /status; \"\" or off disables (default " + defaultHTTPAddr + ")",
		set: func(rc *runConfig, s string) error {
			if s != "" && s != "off" {
				if err := checkHostPort(s); err != nil {
					return err
				}
			}
			rc.HTTPAddr = s
			return nil
		}},
	{key: "log_format", flag: "log-format", usage: "log `FORMAT`: text or json (default text)",
		set: func(rc *runConfig, s string) error {
			if s != "text" && s != "json" {
				return fmt.Errorf("%q is not one of text, json", s)
			}
			rc.LogFormat = s
			return nil
		}},
	{key: "log_level", flag: "log-level", usage: "log `LEVEL`: debug, info, warn or error (default info)",
		set: func(rc *runConfig, s string) error {
			switch s {
			case "debug", "info", "warn", "error":
			default:
				return fmt.Errorf("%q is not one of debug, info, warn, error", s)
			}
			rc.LogLevel = s
			return nil
		}},
	{key: "fast_failover", flag: "fast-failover", isBool: true, usage: "elect at once when the NATS server reports the leader's connection closed (default true)",
		set: func(rc *runConfig, s string) error {
			b, err := parseBool(s)
			rc.Agent.DisableFastFailover = !b
			return err
		}},
	{key: "fast_failover_fence", flag: "fast-failover-fence", usage: "how long a leader elected on such a report waits before it acts, `DURATION` (default one tick, heartbeat/10)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Agent.Fence })},
	{key: "nats.system_user", flag: "nats-system-user", usage: "`USER` of the NATS system account, to read disconnect advisories",
		set: func(rc *runConfig, s string) error { rc.SystemUser = s; return nil }},
	{key: "nats.system_password", flag: "nats-system-password", usage: "`PASSWORD` of nats.system_user",
		set: func(rc *runConfig, s string) error { rc.SystemPassword = s; return nil }},
	{key: "nats.system_creds", flag: "nats-system-creds", usage: "credentials `FILE` of a system account user, to read disconnect advisories",
		set: func(rc *runConfig, s string) error { rc.SystemCreds = s; return nil }},
	{key: "signing_seed", flag: "signing-seed", usage: "this member's nkey seed `FILE`: sign every election message and accept only signed ones",
		set: func(rc *runConfig, s string) error { rc.Agent.SigningSeedFile = s; return nil }},
	{key: "member_keys", flag: "member-keys", usage: "pinned nkey public keys of the members, `ID=KEY,...`",
		set: func(rc *runConfig, s string) error {
			keys, err := agent.ParseMemberKeys(s)
			rc.Agent.MemberKeys = keys
			return err
		},
		fromFile: keyMapFromFile("member_keys", "ID", func(rc *runConfig, m map[string]string) { rc.Agent.MemberKeys = m })},
	{key: "operator_keys", flag: "operator-keys", usage: "nkey public keys of the operators' tools allowed on the control subjects, `NAME=KEY,...` (needs signing_seed and member_keys)",
		set: func(rc *runConfig, s string) error {
			keys, err := agent.ParseMemberKeys(s)
			rc.Agent.OperatorKeys = keys
			return err
		},
		fromFile: keyMapFromFile("operator_keys", "NAME", func(rc *runConfig, m map[string]string) { rc.Agent.OperatorKeys = m })},
	{key: "journal", flag: "journal", usage: "append leadership intervals and votes as JSON lines to `FILE` (an audit log; fault tests read it)",
		set: func(rc *runConfig, s string) error { rc.Journal = s; return nil }},
}

// configFlag is the flag that names the config file.
const configFlag = "config"

// fileConfig is the config file's schema. Every value is kept as a node so
// that the loader, not the YAML library, reports bad values, naming the key;
// KnownFields makes the decoder reject unknown keys.
type fileConfig struct {
	ID              yaml.Node `yaml:"id"`
	Group           yaml.Node `yaml:"group"`
	Members         yaml.Node `yaml:"members"`
	Algorithm       yaml.Node `yaml:"algorithm"`
	Quorum          yaml.Node `yaml:"quorum"`
	Heartbeat       yaml.Node `yaml:"heartbeat"`
	HeartbeatMisses yaml.Node `yaml:"heartbeat_misses"`
	Lease           yaml.Node `yaml:"lease"`
	AnswerTimeout   yaml.Node `yaml:"answer_timeout"`
	Preemption      yaml.Node `yaml:"preemption"`
	HoldDown        yaml.Node `yaml:"hold_down"`
	StateDir        yaml.Node `yaml:"state_dir"`
	SubjectPrefix   yaml.Node `yaml:"subject_prefix"`
	HTTPAddr        yaml.Node `yaml:"http_addr"`
	LogFormat       yaml.Node `yaml:"log_format"`
	LogLevel        yaml.Node `yaml:"log_level"`
	Journal         yaml.Node `yaml:"journal"`
	FastFailover    yaml.Node `yaml:"fast_failover"`
	SigningSeed     yaml.Node `yaml:"signing_seed"`
	MemberKeys      yaml.Node `yaml:"member_keys"`
	OperatorKeys    yaml.Node `yaml:"operator_keys"`
	Fence           yaml.Node `yaml:"fast_failover_fence"`
	NATS            *fileNATS `yaml:"nats"`

	// The operations sections, config_ops.go.
	Pushgateway *filePushgateway `yaml:"pushgateway"`
	Leader      *fileLeader      `yaml:"leader"`
}

// fileNATS is the `nats:` section of the config file.
type fileNATS struct {
	URLs           yaml.Node     `yaml:"urls"`
	Embedded       yaml.Node     `yaml:"embedded"`
	Listen         yaml.Node     `yaml:"listen"`
	SystemUser     yaml.Node     `yaml:"system_user"`
	SystemPassword yaml.Node     `yaml:"system_password"`
	SystemCreds    yaml.Node     `yaml:"system_creds"`
	Creds          yaml.Node     `yaml:"creds"`
	NKeySeed       yaml.Node     `yaml:"nkey_seed"`
	User           yaml.Node     `yaml:"user"`
	Password       yaml.Node     `yaml:"password"`
	Token          yaml.Node     `yaml:"token"`
	TLS            *fileNATSTLS  `yaml:"tls"`
	MonitorPort    yaml.Node     `yaml:"monitor_port"`
	Cluster        *fileCluster  `yaml:"cluster"`
	LeafNode       *fileLeafNode `yaml:"leafnode"`
}

// nodes maps each setting key to its node in the file (a zero node when the
// key is absent).
func (f *fileConfig) nodes() map[string]*yaml.Node {
	m := map[string]*yaml.Node{
		"id":                  &f.ID,
		"group":               &f.Group,
		"members":             &f.Members,
		"algorithm":           &f.Algorithm,
		"quorum":              &f.Quorum,
		"heartbeat":           &f.Heartbeat,
		"heartbeat_misses":    &f.HeartbeatMisses,
		"lease":               &f.Lease,
		"answer_timeout":      &f.AnswerTimeout,
		"preemption":          &f.Preemption,
		"hold_down":           &f.HoldDown,
		"state_dir":           &f.StateDir,
		"subject_prefix":      &f.SubjectPrefix,
		"http_addr":           &f.HTTPAddr,
		"log_format":          &f.LogFormat,
		"log_level":           &f.LogLevel,
		"journal":             &f.Journal,
		"fast_failover":       &f.FastFailover,
		"signing_seed":        &f.SigningSeed,
		"member_keys":         &f.MemberKeys,
		"operator_keys":       &f.OperatorKeys,
		"fast_failover_fence": &f.Fence,
	}
	n := f.NATS
	if n == nil {
		n = &fileNATS{}
	}
	m["nats.urls"] = &n.URLs
	m["nats.embedded"] = &n.Embedded
	m["nats.listen"] = &n.Listen
	m["nats.system_user"] = &n.SystemUser
	m["nats.system_password"] = &n.SystemPassword
	m["nats.system_creds"] = &n.SystemCreds
	n.natsNodes(m)
	f.opsNodes(m)
	return m
}

// loader loads one configuration and remembers where each value came from,
// so that an error found later (by agent.Config.Validate) can name the flag
// or the file line that set it.
type loader struct {
	path string            // the config file, "" when none
	src  map[string]string // key -> "--flag" or "config FILE: line N: key"
}

// newLoader returns a loader with no file and no sources yet.
func newLoader() *loader { return &loader{src: map[string]string{}} }

// newRunConfig returns a runConfig holding the binary's own defaults.
func newRunConfig() *runConfig {
	return &runConfig{HTTPAddr: defaultHTTPAddr, LogFormat: defaultLogFormat, LogLevel: defaultLogLevel}
}

// loadRunConfig builds the configuration of `edge-agent run` from its
// arguments (the flags after "run"): the --config file if any, then every
// flag actually given, which overrides the file; then it validates the
// result. Every error is a *configError with a one-line message naming the
// flag or config key at fault; -h/--help gives one that wraps flag.ErrHelp.
func loadRunConfig(args []string) (*runConfig, error) {
	fset := newRunFlagSet(io.Discard)
	if err := fset.Parse(args); err != nil {
		return nil, flagParseError(err)
	}
	if fset.NArg() > 0 {
		return nil, &configError{msg: fmt.Sprintf("run: unexpected argument %q (every setting is a flag, e.g. --config FILE)", fset.Arg(0))}
	}
	var given []*flag.Flag
	fset.Visit(func(f *flag.Flag) { given = append(given, f) })

	rc := newRunConfig()
	l := newLoader()
	for _, f := range given {
		if f.Name != configFlag {
			continue
		}
		path := f.Value.String()
		if path == "" {
			return nil, &configError{msg: "--config: give a config file path"}
		}
		if err := l.loadFile(rc, path); err != nil {
			return nil, err
		}
	}
	byFlag := map[string]*setting{}
	for i := range settings {
		byFlag[settings[i].flag] = &settings[i]
	}
	for _, f := range given {
		s := byFlag[f.Name]
		if s == nil {
			continue // --config
		}
		where := "--" + f.Name
		if err := s.set(rc, f.Value.String()); err != nil {
			return nil, &configError{Key: s.key, msg: where + ": " + err.Error()}
		}
		l.src[s.key] = where
	}
	if err := l.finish(rc); err != nil {
		return nil, err
	}
	return rc, nil
}

// loadCheckConfig loads and validates the config file at path alone, as
// `edge-agent check-config` does: the same rules as loadRunConfig, no flags.
func loadCheckConfig(path string) (*runConfig, error) {
	if path == "" {
		return nil, &configError{msg: "check-config: give a config file (--config FILE)"}
	}
	rc := newRunConfig()
	l := newLoader()
	if err := l.loadFile(rc, path); err != nil {
		return nil, err
	}
	if err := l.finish(rc); err != nil {
		return nil, err
	}
	return rc, nil
}

// rawFlag is a flag.Value that keeps the text as given, so that the loader,
// not the flag package, parses and reports it.
type rawFlag struct {
	val    string
	isBool bool
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
func (f *rawFlag) IsBoolFlag() bool { return f.isBool }

// newRunFlagSet returns the flag set of `edge-agent run`, writing its usage
// and errors to out. Every value is a *rawFlag.
func newRunFlagSet(out io.Writer) *flag.FlagSet {
	fset := flag.NewFlagSet("run", flag.ContinueOnError)
	fset.SetOutput(out)
	fset.Var(&rawFlag{}, configFlag, "YAML config `FILE`; flags override its values")
	for _, s := range settings {
		fset.Var(&rawFlag{isBool: s.isBool}, s.flag, s.usage+" [config: "+s.key+"]")
	}
	return fset
}

// runUsage writes the flags of `edge-agent run` and their help to w.
func runUsage(w io.Writer) {
	fset := newRunFlagSet(w)
	fset.PrintDefaults()
}

// flagParseError turns an error of flag.FlagSet.Parse into a *configError
// that names the flag the way users type it (--name).
func flagParseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return &configError{msg: "run: help requested", err: err}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return &configError{msg: "--" + strings.TrimLeft(name, "-") + ": unknown flag"}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return &configError{msg: "--" + strings.TrimLeft(name, "-") + ": needs a value"}
	}
	return &configError{msg: msg, err: err}
}

// loadFile reads the YAML config file at path into rc.
func (l *loader) loadFile(rc *runConfig, path string) error {
	l.path = path
	if err := checkConfigFileMode(path); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &configError{msg: fmt.Sprintf("config %s: cannot read: %v", path, pe.Err), err: err}
		}
		return &configError{msg: fmt.Sprintf("config %s: cannot read: %v", path, err), err: err}
	}
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return l.yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return l.yamlError(err)
		}
		return &configError{msg: fmt.Sprintf("config %s: line %d: a second YAML document; the file must hold one", path, extra.Line)}
	}
	nodes := fc.nodes()
	for i := range settings {
		s := &settings[i]
		n := resolve(nodes[s.key])
		if n.Kind == 0 || n.Tag == "!!null" {
			continue // absent or empty: keep the default
		}
		where := l.fileWhere(n, s.key)
		var err error
		switch {
		case s.fromFile != nil:
			err = s.fromFile(l, rc, n)
		case n.Kind != yaml.ScalarNode:
			err = &configError{Key: s.key, msg: where + ": must be a single value, not a " + kindName(n)}
		default:
			if e := s.set(rc, n.Value); e != nil {
				err = &configError{Key: s.key, msg: where + ": " + e.Error()}
			}
		}
		if err != nil {
			return err
		}
		l.src[s.key] = where
	}
	return nil
}

// yamlError turns an error of the YAML decoder into a one-line *configError.
func (l *loader) yamlError(err error) error {
	prefix := "config " + l.path + ": "
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return &configError{msg: prefix + strings.TrimPrefix(err.Error(), "yaml: "), err: err}
	}
	msg := te.Errors[0]
	fileType := reflect.TypeFor[fileConfig]().String()
	key := ""
	if line, rest, ok := strings.Cut(msg, ": "); ok {
		matched := false
		for _, sec := range sections {
			typ := sec.typ.String()
			switch {
			case strings.HasPrefix(rest, "field ") && strings.HasSuffix(rest, " not found in type "+typ):
				name := strings.TrimSuffix(strings.TrimPrefix(rest, "field "), " not found in type "+typ)
				key = sec.key + "." + name
				msg = line + ": field " + key + " not found (" + sec.key + " takes " + sectionKeys(sec.typ) + ")"
				matched = true
			case strings.HasPrefix(rest, "cannot unmarshal ") && strings.HasSuffix(rest, " into "+typ):
				key = sec.key
				msg = line + ": " + sec.key + ": must be a mapping with " + sectionKeys(sec.typ)
				matched = true
			}
		}
		switch {
		case matched:
		case strings.HasPrefix(rest, "field ") && strings.HasSuffix(rest, " not found in type "+fileType):
			key = strings.TrimSuffix(strings.TrimPrefix(rest, "field "), " not found in type "+fileType)
			msg = line + ": field " + key + " not found"
		case strings.HasPrefix(rest, "cannot unmarshal ") && strings.HasSuffix(rest, " into "+fileType):
			msg = line + ": the file must be a mapping of keys to values"
		}
	}
	if more := len(te.Errors) - 1; more > 0 {
		msg += fmt.Sprintf(" (and %d more)", more)
	}
	return &configError{Key: key, msg: prefix + msg, err: err}
}

// fileWhere names a value of the file: "config FILE: line N: key".
func (l *loader) fileWhere(n *yaml.Node, key string) string {
	return fmt.Sprintf("config %s: line %d: %s", l.path, n.Line, key)
}

// fileErrorf returns an error about node n of the file, under key.
func (l *loader) fileErrorf(n *yaml.Node, key, format string, args ...any) *configError {
	return &configError{Key: key, msg: l.fileWhere(n, key) + ": " + fmt.Sprintf(format, args...)}
}

// errorf returns an error about key, naming the flag or file line that set
// it; for a key that nothing set, the key itself, after the config file if
// there is one (that is where the key is missing).
func (l *loader) errorf(key, format string, args ...any) *configError {
	where := l.src[key]
	switch {
	case where != "":
	case l.path != "":
		where = "config " + l.path + ": " + key
	default:
		where = key
	}
	return &configError{Key: key, msg: where + ": " + fmt.Sprintf(format, args...)}
}

// membersFromFile applies `members:`, a list of {id, priority} mappings
// (or "id[=priority]" strings), or one "a,b=10,c" string.
func (l *loader) membersFromFile(rc *runConfig, n *yaml.Node) error {
	const key = "members"
	switch n.Kind {
	case yaml.ScalarNode:
		ms, err := parseMemberList(n.Value)
		if err != nil {
			return l.fileErrorf(n, key, "%v", err)
		}
		rc.Agent.Members = ms
		return nil
	case yaml.SequenceNode:
	default:
		return l.fileErrorf(n, key, "must be a list of {id, priority} or a string \"a,b=10,c\", not a %s", kindName(n))
	}
	ms := make([]election.Member, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		switch item.Kind {
		case yaml.ScalarNode:
			m, err := parseMember(strings.TrimSpace(item.Value))
			if err != nil {
				return l.fileErrorf(item, key, "%v", err)
			}
			ms = append(ms, m)
		case yaml.MappingNode:
			m, err := l.memberFromMap(item)
			if err != nil {
				return err
			}
			ms = append(ms, m)
		default:
			return l.fileErrorf(item, key, "each member must be {id: ID, priority: N} or \"ID=N\", not a %s", kindName(item))
		}
	}
	rc.Agent.Members = ms
	return nil
}

// memberFromMap reads one {id, priority} mapping of `members:`.
func (l *loader) memberFromMap(n *yaml.Node) (election.Member, error) {
	const key = "members"
	var m election.Member
	hasID := false
	var prio *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if v.Kind != yaml.ScalarNode {
			return m, l.fileErrorf(v, key, "%s must be a single value, not a %s", k.Value, kindName(v))
		}
		switch k.Value {
		case "id":
			m.ID, hasID = v.Value, true
		case "priority":
			prio = v
		default:
			return m, l.fileErrorf(k, key, "field %s not found in a member (a member takes id, priority)", k.Value)
		}
	}
	if !hasID {
		return m, l.fileErrorf(n, key, "a member has no id")
	}
	if prio != nil && prio.Tag != "!!null" {
		p, err := parsePriority(prio.Value)
		if err != nil {
			return m, l.fileErrorf(prio, key, "member %q: %v", m.ID, err)
		}
		m.Priority = p
	}
	return m, nil
}

// urlsFromFile applies `nats: urls:`, a list of URLs or one
// comma-separated string.
func (l *loader) urlsFromFile(rc *runConfig, n *yaml.Node) error {
	const key = "nats.urls"
	switch n.Kind {
	case yaml.ScalarNode:
		urls, err := parseURLList(n.Value)
		if err != nil {
			return l.fileErrorf(n, key, "%v", err)
		}
		rc.NATSURLs = urls
		return nil
	case yaml.SequenceNode:
	default:
		return l.fileErrorf(n, key, "must be a list of URLs, not a %s", kindName(n))
	}
	urls := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return l.fileErrorf(item, key, "each URL must be a string, not a %s", kindName(item))
		}
		u := strings.TrimSpace(item.Value)
		if err := checkNATSURL(u); err != nil {
			return l.fileErrorf(item, key, "%v", err)
		}
		urls = append(urls, u)
	}
	rc.NATSURLs = urls
	return nil
}

// finish validates rc once every source has been applied: the agent's
// Config (which fills its defaults) and then the binary's own rules.
func (l *loader) finish(rc *runConfig) error {
	if rc.Agent.ID == "" {
		return l.errorf("id", "this gateway's member id is required")
	}
	if rc.Agent.Group == "" {
		return l.errorf("group", "the election group name is required")
	}
	if err := rc.Agent.Validate(); err != nil {
		// agent.Config.Validate starts its messages with the config key.
		msg := err.Error()
		if key, rest, ok := strings.Cut(msg, ": "); ok && isSettingKey(key) {
			e := l.errorf(key, "%s", rest)
			e.err = err
			return e
		}
		return &configError{msg: msg, err: err}
	}
	if len(rc.NATSURLs) == 0 && !rc.EmbeddedNATS {
		return l.errorf("nats", "give nats.urls (--nats-url) or nats.embedded (--embedded-nats)")
	}
	if rc.EmbeddedNATS && !withEmbeddedNATS {
		return l.errorf("nats.embedded", "%v", errNoEmbeddedNATS)
	}
	if rc.EmbeddedNATS {
		if rc.NATSListen == "" {
			rc.NATSListen = defaultNATSListen
		}
	} else {
		rc.NATSListen = ""
	}
	if err := l.finishNATS(rc); err != nil {
		return err
	}
	if rc.HTTPAddr == "off" {
		rc.HTTPAddr = ""
	}
	if err := l.checkSecretFiles(rc); err != nil {
		return err
	}
	return l.finishOps(rc)
}

// isSettingKey reports whether key is a config-file key.
func isSettingKey(key string) bool {
	for _, s := range settings {
		if s.key == key {
			return true
		}
	}
	return false
}

// resolve follows YAML aliases (*name) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// kindName names a node's kind for error messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// parseMemberList parses "a,b=10,c": member ids, each with an optional
// =priority (default 0). An empty string gives no members.
func parseMemberList(s string) ([]election.Member, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ms []election.Member
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q: empty member between commas", s)
		}
		m, err := parseMember(part)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// parseMember parses "id" or "id=priority". The id itself is checked by
// agent.Config.Validate.
func parseMember(s string) (election.Member, error) {
	id, prio, hasPrio := strings.Cut(s, "=")
	m := election.Member{ID: strings.TrimSpace(id)}
	if !hasPrio {
		return m, nil
	}
	p, err := parsePriority(prio)
	if err != nil {
		return m, fmt.Errorf("%q: %v", s, err)
	}
	m.Priority = p
	return m, nil
}

// parsePriority parses a member priority and checks its range.
func parsePriority(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("priority must be an integer")
	}
	if p < minPriority || p > maxPriority {
		return 0, fmt.Errorf("priority %d is outside %d..%d", p, minPriority, maxPriority)
	}
	return p, nil
}

// setQuorum applies a quorum: an integer, or "none" for island mode.
func setQuorum(rc *runConfig, s string) error {
	s = strings.TrimSpace(s)
	if s == "none" {
		rc.Agent.Quorum, rc.Agent.IslandMode = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer or none", s)
	}
	rc.Agent.Quorum, rc.Agent.IslandMode = n, false
	return nil
}

// durationSetter returns a setter that parses a Go duration into the field
// that field picks out of a runConfig.
func durationSetter(field func(*runConfig) *time.Duration) func(*runConfig, string) error {
	return func(rc *runConfig, s string) error {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 1s, 500ms, 2m)", s)
		}
		*field(rc) = d
		return nil
	}
}

// parseBool parses true or false, also spelt as strconv.ParseBool accepts
// or as YAML 1.1 did (yes/no, on/off).
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "on":
		return true, nil
	case "no", "off":
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean (true or false)", s)
	}
	return b, nil
}

// parseURLList parses "URL[,URL...]" and checks each URL. An empty string
// gives no URLs.
func parseURLList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var urls []string
	for _, u := range strings.Split(s, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, fmt.Errorf("%q: empty URL between commas", strings.Join(edge.RedactURLs(strings.Split(s, ",")), ","))
		}
		if err := checkNATSURL(u); err != nil {
			return nil, err
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// checkNATSURL checks that s is a nats:// or tls:// URL with a host and, if
// given, a numeric port.
func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	shown := edge.RedactURL(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", shown)
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return fmt.Errorf("%q: the scheme must be nats:// or tls://", shown)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", shown)
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("%q: port %q is not a number 0..65535", shown, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: empty port", shown)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a NATS URL has no path, query or fragment", shown)
	}
	return nil
}

// checkHostPort checks that s is host:port with a numeric port (the host may
// be empty, meaning every interface).
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:9180)", s)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number 0..65535", s, port)
	}
	return nil
}

// keyMapFromFile reads a map of names to public keys (member_keys,
// operator_keys), or the flag's "NAME=KEY,..." string.
func keyMapFromFile(key, name string, assign func(*runConfig, map[string]string)) func(*loader, *runConfig, *yaml.Node) error {
	return func(l *loader, rc *runConfig, n *yaml.Node) error {
		switch n.Kind {
		case yaml.ScalarNode:
			keys, err := agent.ParseMemberKeys(n.Value)
			if err != nil {
				return l.fileErrorf(n, key, "%v", err)
			}
			assign(rc, keys)
			return nil
		case yaml.MappingNode:
		default:
			return l.fileErrorf(n, key, "must map %ss to public keys, not be a %s", strings.ToLower(name), kindName(n))
		}
		keys := map[string]string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
			if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Value == "" {
				return l.fileErrorf(k, key, "each entry must be %s: PUBLIC_KEY", name)
			}
			keys[k.Value] = strings.TrimSpace(v.Value)
		}
		assign(rc, keys)
		return nil
	}
}
