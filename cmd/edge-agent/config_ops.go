package main

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge"
)

// The operations settings: the Pushgateway push and the leader duty. They
// live apart from config.go's table so that each part can grow on its own;
// init appends them to settings, after the election and NATS settings.

// filePushgateway is the `pushgateway:` section of the config file.
type filePushgateway struct {
	URL      yaml.Node `yaml:"url"`
	Interval yaml.Node `yaml:"interval"`
	Job      yaml.Node `yaml:"job"`
}

// fileLeader is the `leader:` section of the config file: the leader duty.
type fileLeader struct {
	Command       yaml.Node `yaml:"command"`
	Grace         yaml.Node `yaml:"grace"`
	OnElected     yaml.Node `yaml:"on_elected"`
	OnDemoted     yaml.Node `yaml:"on_demoted"`
	HookTimeout   yaml.Node `yaml:"hook_timeout"`
	MaxFailures   yaml.Node `yaml:"max_failures"`
	FailureWindow yaml.Node `yaml:"failure_window"`
	Env           yaml.Node `yaml:"env"`
}

// opsNodes adds the nodes of the operations keys to m.
func (f *fileConfig) opsNodes(m map[string]*yaml.Node) {
	p := f.Pushgateway
	if p == nil {
		p = &filePushgateway{}
	}
	m["pushgateway.url"] = &p.URL
	m["pushgateway.interval"] = &p.Interval
	m["pushgateway.job"] = &p.Job
	d := f.Leader
	if d == nil {
		d = &fileLeader{}
	}
	m["leader.command"] = &d.Command
	m["leader.grace"] = &d.Grace
	m["leader.on_elected"] = &d.OnElected
	m["leader.on_demoted"] = &d.OnDemoted
	m["leader.hook_timeout"] = &d.HookTimeout
	m["leader.max_failures"] = &d.MaxFailures
	m["leader.failure_window"] = &d.FailureWindow
	m["leader.env"] = &d.Env
}

// opsSettings are the settings of the Pushgateway push and the leader duty.
var opsSettings = []setting{
	{key: "pushgateway.url", flag: "pushgateway-url", usage: "push metrics to the Prometheus Pushgateway at `URL` (http:// or https://); none by default",
		set: func(rc *runConfig, s string) error {
			s = strings.TrimSpace(s)
			if s != "" {
				if err := edge.CheckPushURL(s); err != nil {
					return err
				}
			}
			rc.Push.URL = s
			return nil
		}},
	{key: "pushgateway.interval", flag: "push-interval", usage: "time between pushes, `DURATION` (default 15s); a leader change pushes at once",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Push.Interval })},
	{key: "pushgateway.job", flag: "pushgateway-job", usage: "job label of the pushed metrics, `NAME` (default " + edge.DefaultPushJob + ")",
		set: func(rc *runConfig, s string) error { rc.Push.Job = strings.TrimSpace(s); return nil }},
	{key: "leader.command", flag: "leader-command", usage: "the leader duty: `COMMAND` run while this gateway leads, as a list [\"prog\", \"arg\"] or words split at spaces",
		set: argvSetter(func(rc *runConfig) *[]string { return &rc.Duty.Command }), fromFile: argvFromFile("leader.command", func(rc *runConfig) *[]string { return &rc.Duty.Command })},
	{key: "leader.grace", flag: "leader-grace", usage: "time between SIGTERM and SIGKILL of the duty, `DURATION`, shorter than the lease (default lease - heartbeat - 1 tick)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Duty.Grace })},
	{key: "leader.on_elected", flag: "leader-on-elected", usage: "one-shot `COMMAND` run when this gateway becomes leader, before the duty starts",
		set: argvSetter(func(rc *runConfig) *[]string { return &rc.Duty.OnElected }), fromFile: argvFromFile("leader.on_elected", func(rc *runConfig) *[]string { return &rc.Duty.OnElected })},
	{key: "leader.on_demoted", flag: "leader-on-demoted", usage: "one-shot `COMMAND` run when this gateway stops leading, after the duty stopped",
		set: argvSetter(func(rc *runConfig) *[]string { return &rc.Duty.OnDemoted }), fromFile: argvFromFile("leader.on_demoted", func(rc *runConfig) *[]string { return &rc.Duty.OnDemoted })},
	{key: "leader.hook_timeout", flag: "leader-hook-timeout", usage: "time limit of on_elected and on_demoted, `DURATION` (default 10s)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Duty.HookTimeout })},
	{key: "leader.max_failures", flag: "leader-max-failures", usage: "duty exits within failure_window, `N`, after which the leader resigns (default 5)",
		set: func(rc *runConfig, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("%q is not an integer", s)
			}
			rc.Duty.MaxFailures = n
			return nil
		}},
	{key: "leader.failure_window", flag: "leader-failure-window", usage: "period over which duty failures count, `DURATION` (default 1m)",
		set: durationSetter(func(rc *runConfig) *time.Duration { return &rc.Duty.FailureWindow })},
	{key: "leader.env", flag: "leader-env", usage: "environment of the duty and hooks besides the documented one: `LIST` of KEY=VALUE (set) or KEY (pass the agent's value), as [\"A=1\", \"B\"] or words split at spaces",
		set: envSetter(func(rc *runConfig) *[]string { return &rc.Duty.Env }), fromFile: envFromFile("leader.env", func(rc *runConfig) *[]string { return &rc.Duty.Env })},
}

func init() {
	settings = append(settings, opsSettings...)
	sections = append(sections,
		struct {
			typ reflect.Type
			key string
		}{reflect.TypeFor[filePushgateway](), "pushgateway"},
		struct {
			typ reflect.Type
			key string
		}{reflect.TypeFor[fileLeader](), "leader"})
}

// argvSetter returns a setter for a command given as text: a YAML flow list
// (["prog", "arg with spaces"]) or words split at white space.
func argvSetter(field func(*runConfig) *[]string) func(*runConfig, string) error {
	return func(rc *runConfig, s string) error {
		argv, err := parseArgv(s)
		if err != nil {
			return err
		}
		*field(rc) = argv
		return nil
	}
}

// parseArgv parses a command: a flow list, or words split at white space
// (no quoting: use the list form, or ["sh", "-c", "..."] for a shell).
func parseArgv(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if !strings.HasPrefix(s, "[") {
		return strings.Fields(s), nil
	}
	var argv []string
	if err := yaml.Unmarshal([]byte(s), &argv); err != nil {
		return nil, fmt.Errorf("%q is not a list of strings", s)
	}
	if len(argv) > 0 && argv[0] == "" {
		return nil, fmt.Errorf("%q: the program (first element) is empty", s)
	}
	return argv, nil
}

// envSetter and envFromFile read leader.env: a list as a command is, but
// its first element may be anything.
func envSetter(field func(*runConfig) *[]string) func(*runConfig, string) error {
	return func(rc *runConfig, s string) error {
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "[") {
			*field(rc) = strings.Fields(s)
			return nil
		}
		var list []string
		if err := yaml.Unmarshal([]byte(s), &list); err != nil {
			return fmt.Errorf("%q is not a list of strings", s)
		}
		*field(rc) = list
		return nil
	}
}

func envFromFile(key string, field func(*runConfig) *[]string) func(*loader, *runConfig, *yaml.Node) error {
	return func(l *loader, rc *runConfig, n *yaml.Node) error {
		switch n.Kind {
		case yaml.ScalarNode:
			*field(rc) = strings.Fields(n.Value)
			return nil
		case yaml.SequenceNode:
		default:
			return l.fileErrorf(n, key, "must be a list of KEY=VALUE or KEY, not a %s", kindName(n))
		}
		list := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return l.fileErrorf(item, key, "each element must be a string, not a %s", kindName(item))
			}
			list = append(list, item.Value)
		}
		*field(rc) = list
		return nil
	}
}

// argvFromFile applies a command from the file: a list of strings or one
// string (parsed as parseArgv does).
func argvFromFile(key string, field func(*runConfig) *[]string) func(*loader, *runConfig, *yaml.Node) error {
	return func(l *loader, rc *runConfig, n *yaml.Node) error {
		switch n.Kind {
		case yaml.ScalarNode:
			argv, err := parseArgv(n.Value)
			if err != nil {
				return l.fileErrorf(n, key, "%v", err)
			}
			*field(rc) = argv
			return nil
		case yaml.SequenceNode:
		default:
			return l.fileErrorf(n, key, "must be a list [program, args...] or a string, not a %s", kindName(n))
		}
		argv := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return l.fileErrorf(item, key, "each element must be a string, not a %s", kindName(item))
			}
			argv = append(argv, item.Value)
		}
		if len(argv) > 0 && argv[0] == "" {
			return l.fileErrorf(n, key, "the program (first element) is empty")
		}
		*field(rc) = argv
		return nil
	}
}

// finishOps validates the operations settings once the agent's config is
// valid (the duty's grace is checked against its lease). With no
// Pushgateway URL nothing is pushed; with no command and no hooks there is
// no duty, and the other leader keys are ignored.
func (l *loader) finishOps(rc *runConfig) error {
	if rc.Push.URL == "" {
		rc.Push = edge.PushConfig{}
	} else if err := rc.Push.Validate(); err != nil {
		return l.keyedError(err)
	}
	d := &rc.Duty
	if len(d.Command) == 0 && len(d.OnElected) == 0 && len(d.OnDemoted) == 0 {
		rc.Duty = agent.DutyConfig{}
		return nil
	}
	if err := d.Validate(rc.Agent); err != nil {
		return l.keyedError(err)
	}
	return nil
}

// keyedError turns an error whose message starts with a setting key into
// one naming the flag or file line that set it.
func (l *loader) keyedError(err error) error {
	msg := err.Error()
	if key, rest, ok := strings.Cut(msg, ": "); ok && isSettingKey(key) {
		e := l.errorf(key, "%s", rest)
		e.err = err
		return e
	}
	return &configError{msg: msg, err: err}
}

// describeOps adds the push and duty settings to check-config's report.
func describeOps(w io.Writer, rc *runConfig) {
	if rc.Push.URL != "" {
		fmt.Fprintf(w, "pushing metrics to %s every %s (job %s, group %s, instance %s)\n",
			edge.RedactURL(rc.Push.URL), rc.Push.Interval, rc.Push.Job, rc.Agent.Group, rc.Agent.ID)
	}
	if d := rc.Duty; len(d.Command) > 0 {
		fmt.Fprintf(w, "leader duty: %s (grace %s, resign after %d failures within %s)\n",
			strings.Join(d.Command, " "), d.Grace, d.MaxFailures, d.FailureWindow)
	}
}
