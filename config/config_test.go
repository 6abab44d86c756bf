package config

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/config/configtest"
	"github.com/edge-agent/edge-agent/election"
)

// fullYAML sets every key of the config file.
const fullYAML = `# edge-agent config: every key
id: gw2
group: line-3
members:
  - {id: gw1, priority: 10}
  - id: gw2
  - id: gw3
    priority: -5
algorithm: ring
quorum: 2
heartbeat: 500ms
heartbeat_misses: 4
lease: 1200ms
answer_timeout: 400ms
preemption: never
hold_down: 30s
state_dir: /var/lib/edge-agent
subject_prefix: site.election
http_addr: 0.0.0.0:9180
log_format: json
log_level: debug
nats:
  urls:
    - nats://10.0.0.1:4222
    - tls://hub.example.com:4443
  embedded: true
  listen: 0.0.0.0:4222
`

// fullConfig is what fullYAML loads to.
func fullConfig() *Config {
	return &Config{
		Agent: agent.Config{
			ID:    "gw2",
			Group: "line-3",
			Members: []election.Member{
				{ID: "gw1", Priority: 10}, {ID: "gw2"}, {ID: "gw3", Priority: -5},
			},
			Algorithm:       agent.AlgorithmRing,
			Quorum:          2,
			Heartbeat:       500 * time.Millisecond,
			HeartbeatMisses: 4,
			Lease:           1200 * time.Millisecond,
			AnswerTimeout:   400 * time.Millisecond,
			Preemption:      agent.PreemptNever,
			HoldDown:        30 * time.Second,
			StateDir:        "/var/lib/edge-agent",
			SubjectPrefix:   "site.election",
			Fence:           50 * time.Millisecond,
		},
		NATSURLs:     []string{"nats://10.0.0.1:4222", "tls://hub.example.com:4443"},
		EmbeddedNATS: true,
		NATSListen:   "0.0.0.0:4222",
		HTTPAddr:     "0.0.0.0:9180",
		LogFormat:    "json",
		LogLevel:     "debug",
	}
}

// baseFlags is a minimal valid command line without a config file.
var baseFlags = []string{"--id", "gw1", "--group", "site-a", "--members", "gw1,gw2=10,gw3", "--state-dir", "/var/lib/edge-agent", "--embedded-nats"}

// withFlags returns baseFlags followed by more (later flags win).
func withFlags(more ...string) []string { return append(append([]string(nil), baseFlags...), more...) }

func TestLoadCheckConfigFull(t *testing.T) {
	path := configtest.Write(t, fullYAML)
	got, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	if want := fullConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("LoadFile:\n got %+v\nwant %+v", got, want)
	}
	// run --config FILE loads the same.
	got, err = Load([]string{"--config", path})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := fullConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadRunConfigFlagsOverrideFile(t *testing.T) {
	path := configtest.Write(t, fullYAML)
	got, err := Load([]string{
		"--config=" + path,
		"--heartbeat", "1s",
		"--members", "gw2, gw9=3",
		"--quorum", "none",
		"--http-addr", "off",
		"--log-level", "warn",
		"--embedded-nats=false",
		"--nats-url", "nats://a:1,nats://b:2",
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := fullConfig()
	want.Agent.Heartbeat = time.Second
	want.Agent.Fence = 100 * time.Millisecond // one tick of the new heartbeat
	want.Agent.Members = []election.Member{{ID: "gw2"}, {ID: "gw9", Priority: 3}}
	want.Agent.Quorum, want.Agent.IslandMode = 1, true
	want.HTTPAddr = ""
	want.LogLevel = "warn"
	want.EmbeddedNATS = false
	want.NATSListen = "" // only meaningful with an embedded server
	want.NATSURLs = []string{"nats://a:1", "nats://b:2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadRunConfigFlagsOnlyDefaults(t *testing.T) {
	got, err := Load(baseFlags)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Agent: agent.Config{
			ID: "gw1", Group: "site-a",
			Members:         []election.Member{{ID: "gw1"}, {ID: "gw2", Priority: 10}, {ID: "gw3"}},
			Algorithm:       agent.AlgorithmBully,
			Quorum:          2,
			Heartbeat:       time.Second,
			HeartbeatMisses: 3,
			Lease:           1800 * time.Millisecond,
			AnswerTimeout:   time.Second,
			Preemption:      agent.PreemptHoldDown,
			HoldDown:        10 * time.Second,
			StateDir:        "/var/lib/edge-agent",
			SubjectPrefix:   agent.DefaultSubjectPrefix,
			Fence:           100 * time.Millisecond,
		},
		EmbeddedNATS: true,
		NATSListen:   DefaultNATSListen,
		HTTPAddr:     DefaultHTTPAddr,
		LogFormat:    "text",
		LogLevel:     "info",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadConfigForms(t *testing.T) {
	tests := []struct {
		name  string
		file  string   // config file content, "" for none
		args  []string // flags after --config
		check func(t *testing.T, rc *Config)
	}{
		{
			name: "members string form",
			file: configtest.BaseYAML(map[string]string{"members": `members: "gw1, gw2=10,gw3=-1000000"`}),
			check: func(t *testing.T, rc *Config) {
				want := []election.Member{{ID: "gw1"}, {ID: "gw2", Priority: 10}, {ID: "gw3", Priority: -1000000}}
				if !reflect.DeepEqual(rc.Agent.Members, want) {
					t.Errorf("members = %+v, want %+v", rc.Agent.Members, want)
				}
			},
		},
		{
			name: "members list of strings and maps",
			file: configtest.BaseYAML(map[string]string{"members": "members:\n  - gw1\n  - gw2=1000000\n  - {id: gw3, priority: 7}"}),
			check: func(t *testing.T, rc *Config) {
				want := []election.Member{{ID: "gw1"}, {ID: "gw2", Priority: 1000000}, {ID: "gw3", Priority: 7}}
				if !reflect.DeepEqual(rc.Agent.Members, want) {
					t.Errorf("members = %+v, want %+v", rc.Agent.Members, want)
				}
			},
		},
		{
			name: "quorum none",
			file: configtest.BaseYAML(nil, "quorum: none"),
			check: func(t *testing.T, rc *Config) {
				if !rc.Agent.IslandMode || rc.Agent.Quorum != 1 {
					t.Errorf("IslandMode, Quorum = %v, %d; want true, 1", rc.Agent.IslandMode, rc.Agent.Quorum)
				}
			},
		},
		{
			name: "quorum flag overrides none",
			file: configtest.BaseYAML(nil, "quorum: none"),
			args: []string{"--quorum", "3"},
			check: func(t *testing.T, rc *Config) {
				if rc.Agent.IslandMode || rc.Agent.Quorum != 3 {
					t.Errorf("IslandMode, Quorum = %v, %d; want false, 3", rc.Agent.IslandMode, rc.Agent.Quorum)
				}
			},
		},
		{
			name: "quorum default is a majority",
			file: configtest.BaseYAML(nil),
			check: func(t *testing.T, rc *Config) {
				if rc.Agent.IslandMode || rc.Agent.Quorum != 2 {
					t.Errorf("IslandMode, Quorum = %v, %d; want false, 2", rc.Agent.IslandMode, rc.Agent.Quorum)
				}
			},
		},
		{
			name: "embedded with default listen and urls as a string",
			file: configtest.BaseYAML(map[string]string{"nats": "nats:\n  urls: nats://a:4222, tls://b\n  embedded: yes"}),
			check: func(t *testing.T, rc *Config) {
				if !rc.EmbeddedNATS || rc.NATSListen != DefaultNATSListen {
					t.Errorf("EmbeddedNATS, NATSListen = %v, %q; want true, %q", rc.EmbeddedNATS, rc.NATSListen, DefaultNATSListen)
				}
				if want := []string{"nats://a:4222", "tls://b"}; !reflect.DeepEqual(rc.NATSURLs, want) {
					t.Errorf("NATSURLs = %q, want %q", rc.NATSURLs, want)
				}
			},
		},
		{
			name: "listen without embedded is dropped",
			file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: [nats://a], listen: 0.0.0.0:4222}"}),
			check: func(t *testing.T, rc *Config) {
				if rc.EmbeddedNATS || rc.NATSListen != "" {
					t.Errorf("EmbeddedNATS, NATSListen = %v, %q; want false, \"\"", rc.EmbeddedNATS, rc.NATSListen)
				}
			},
		},
		{
			name: "http_addr empty disables, absent defaults",
			file: configtest.BaseYAML(nil, `http_addr: ""`),
			check: func(t *testing.T, rc *Config) {
				if rc.HTTPAddr != "" {
					t.Errorf("HTTPAddr = %q, want \"\"", rc.HTTPAddr)
				}
			},
		},
		{
			name: "http_addr flag overrides off",
			file: configtest.BaseYAML(nil, "http_addr: off"),
			args: []string{"--http-addr", ":0"},
			check: func(t *testing.T, rc *Config) {
				if rc.HTTPAddr != ":0" {
					t.Errorf("HTTPAddr = %q, want \":0\"", rc.HTTPAddr)
				}
			},
		},
		{
			name: "null values keep defaults",
			file: configtest.BaseYAML(nil, "heartbeat:", "log_level: ~", "http_addr:"),
			check: func(t *testing.T, rc *Config) {
				if rc.Agent.Heartbeat != time.Second || rc.LogLevel != "info" || rc.HTTPAddr != DefaultHTTPAddr {
					t.Errorf("heartbeat, log_level, http_addr = %s, %q, %q; want the defaults", rc.Agent.Heartbeat, rc.LogLevel, rc.HTTPAddr)
				}
			},
		},
		{
			name: "aliases are followed",
			file: configtest.BaseYAML(map[string]string{"id": "id: &me gw3", "members": "members: [gw1, *me]"}),
			check: func(t *testing.T, rc *Config) {
				want := []election.Member{{ID: "gw1"}, {ID: "gw3"}}
				if rc.Agent.ID != "gw3" || !reflect.DeepEqual(rc.Agent.Members, want) {
					t.Errorf("id, members = %q, %+v; want gw3, %+v", rc.Agent.ID, rc.Agent.Members, want)
				}
			},
		},
		{
			name: "members flag without a file",
			args: withFlags("--members", "gw1=5,gw2", "--quorum", "none"),
			check: func(t *testing.T, rc *Config) {
				want := []election.Member{{ID: "gw1", Priority: 5}, {ID: "gw2"}}
				if !reflect.DeepEqual(rc.Agent.Members, want) || !rc.Agent.IslandMode {
					t.Errorf("members, island = %+v, %v; want %+v, true", rc.Agent.Members, rc.Agent.IslandMode, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", configtest.Write(t, tt.file)}, args...)
			}
			rc, err := Load(args)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, rc)
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string   // config file content; "" for no --config
		args    []string // flags (after --config FILE when file is set)
		want    []string // substrings of the message; FILE stands for the path
		wantKey string   // Error.Key, when not ""
	}{
		// The file.
		{name: "unknown key", file: configtest.BaseYAML(nil, "foo: 1"),
			want: []string{"config FILE: line 6: field foo not found"}, wantKey: "foo"},
		{name: "unknown nats key", file: configtest.BaseYAML(map[string]string{"nats": "nats:\n  url: nats://a"}),
			want: []string{"config FILE: line 6: field nats.url not found"}, wantKey: "nats.url"},
		{name: "nats not a mapping", file: configtest.BaseYAML(map[string]string{"nats": "nats: nats://a"}),
			want: []string{"line 5: nats: must be a mapping"}, wantKey: "nats"},
		{name: "file not a mapping", file: "- id: a\n",
			want: []string{"config FILE: line 1: the file must be a mapping"}},
		{name: "syntax error", file: configtest.BaseYAML(nil, "heartbeat: 1s: 2s"),
			want: []string{"config FILE: line 6: mapping values are not allowed"}},
		{name: "duplicate key", file: configtest.BaseYAML(nil, "id: gw2"),
			want: []string{"config FILE: line 6: mapping key \"id\" already defined at line 1"}},
		{name: "two documents", file: configtest.BaseYAML(nil, "---", "id: gw2"),
			want: []string{"config FILE: line 6: a second YAML document"}},
		{name: "missing file", file: "", args: []string{"--config", "/nonexistent/edge-agent.yaml"},
			want: []string{"config /nonexistent/edge-agent.yaml: cannot read:"}},
		{name: "bad duration", file: configtest.BaseYAML(nil, "heartbeat: abc"),
			want: []string{`config FILE: line 6: heartbeat: "abc" is not a duration`}, wantKey: "heartbeat"},
		{name: "duration without unit", file: configtest.BaseYAML(nil, "hold_down: 10"),
			want: []string{`line 6: hold_down: "10" is not a duration`}, wantKey: "hold_down"},
		{name: "bad lease", file: configtest.BaseYAML(nil, "lease: soon"),
			want: []string{`line 6: lease: "soon" is not a duration`}, wantKey: "lease"},
		{name: "bad answer timeout", file: configtest.BaseYAML(nil, "answer_timeout: 1"),
			want: []string{`line 6: answer_timeout: "1" is not a duration`}, wantKey: "answer_timeout"},
		{name: "bad heartbeat misses", file: configtest.BaseYAML(nil, "heartbeat_misses: three"),
			want: []string{`line 6: heartbeat_misses: "three" is not an integer`}, wantKey: "heartbeat_misses"},
		{name: "value where list expected", file: configtest.BaseYAML(map[string]string{"id": "id: [gw1]"}),
			want: []string{"line 1: id: must be a single value, not a list"}, wantKey: "id"},
		{name: "members bad priority", file: configtest.BaseYAML(map[string]string{"members": "members: a,b=x,c"}),
			want: []string{`line 3: members: "b=x": priority must be an integer`}, wantKey: "members"},
		{name: "members priority out of range", file: configtest.BaseYAML(map[string]string{"members": "members: gw1=1000001,gw2"}),
			want: []string{`members: "gw1=1000001": priority 1000001 is outside -1000000..1000000`}, wantKey: "members"},
		{name: "members empty entry", file: configtest.BaseYAML(map[string]string{"members": "members: gw1,,gw2"}),
			want: []string{`members: "gw1,,gw2": empty member`}, wantKey: "members"},
		{name: "members map bad priority", file: configtest.BaseYAML(map[string]string{"members": "members:\n  - {id: gw1, priority: high}"}),
			want: []string{`line 4: members: member "gw1": priority must be an integer`}, wantKey: "members"},
		{name: "members map priority out of range", file: configtest.BaseYAML(map[string]string{"members": "members:\n  - {id: gw1}\n  - {id: gw2, priority: -1000001}"}),
			want: []string{`line 5: members: member "gw2": priority -1000001 is outside -1000000..1000000`}, wantKey: "members"},
		{name: "members map unknown key", file: configtest.BaseYAML(map[string]string{"members": "members:\n  - {id: gw1, prio: 3}"}),
			want: []string{"line 4: members: field prio not found in a member"}, wantKey: "members"},
		{name: "members map without id", file: configtest.BaseYAML(map[string]string{"members": "members:\n  - {priority: 3}"}),
			want: []string{"line 4: members: a member has no id"}, wantKey: "members"},
		{name: "witness not a member", file: configtest.BaseYAML(nil, "witnesses: [gw3, gw9]"),
			want: []string{`line 6: witnesses: "gw9" is not in members`}, wantKey: "witnesses"},
		{name: "witness flag not a member", args: withFlags("--witnesses", "gw9"),
			want: []string{`--witnesses: "gw9" is not in members`}, wantKey: "witnesses"},
		{name: "every member a witness", file: configtest.BaseYAML(nil, "witnesses: gw1,gw2,gw3"),
			want: []string{"line 6: witnesses: every member is a witness: a witness never leads"}, wantKey: "witnesses"},
		{name: "the only member a witness", file: configtest.BaseYAML(map[string]string{"members": "members: [gw1]"}, "witnesses: [gw1]"),
			want: []string{`line 6: witnesses: "gw1" is the only member: a witness never leads`}, wantKey: "witnesses"},
		{name: "witness listed twice", file: configtest.BaseYAML(nil, "witnesses: [gw3, gw3]"),
			want: []string{`line 6: witnesses: "gw3" is listed twice`}, wantKey: "witnesses"},
		{name: "witnesses as a mapping", file: configtest.BaseYAML(nil, "witnesses: {gw3: 1}"),
			want: []string{"line 6: witnesses: must be a list of member ids"}, wantKey: "witnesses"},
		{name: "witnesses empty entry", args: withFlags("--witnesses", "gw3,,gw2"),
			want: []string{`--witnesses: "gw3,,gw2": empty member id between commas`}, wantKey: "witnesses"},
		{name: "members as a mapping", file: configtest.BaseYAML(map[string]string{"members": "members: {gw1: 3}"}),
			want: []string{"line 3: members: must be a list of {id, priority}"}, wantKey: "members"},
		{name: "members invalid id", file: configtest.BaseYAML(map[string]string{"members": "members: gw1,gw 2"}),
			want: []string{`line 3: members: "gw 2" is not a valid member id`}, wantKey: "members"},
		{name: "members duplicate", file: configtest.BaseYAML(map[string]string{"members": "members: gw1,gw1=3"}),
			want: []string{`line 3: members: "gw1" is listed twice`}, wantKey: "members"},
		{name: "members missing", file: configtest.BaseYAML(map[string]string{"members": ""}),
			want: []string{"config FILE: members: at least one member is required"}, wantKey: "members"},
		{name: "quorum not a number", file: configtest.BaseYAML(nil, "quorum: some"),
			want: []string{`line 6: quorum: "some" is not an integer or none`}, wantKey: "quorum"},
		{name: "quorum not a majority", file: configtest.BaseYAML(nil, "quorum: 1"),
			want: []string{"line 6: quorum: 1 of 3 members is not a majority"}, wantKey: "quorum"},
		{name: "missing id", file: configtest.BaseYAML(map[string]string{"id": ""}),
			want: []string{"config FILE: id: this gateway's member id is required"}, wantKey: "id"},
		{name: "invalid id", file: configtest.BaseYAML(map[string]string{"id": "id: gw.1"}),
			want: []string{`line 1: id: "gw.1" is not a valid member id`}, wantKey: "id"},
		{name: "id not in members", file: configtest.BaseYAML(map[string]string{"id": "id: gw9"}),
			want: []string{`config FILE: line 1: id: "gw9" is not in members`}, wantKey: "id"},
		{name: "missing group", file: configtest.BaseYAML(map[string]string{"group": ""}),
			want: []string{"config FILE: group: the election group name is required"}, wantKey: "group"},
		{name: "bad algorithm", file: configtest.BaseYAML(nil, "algorithm: raft"),
			want: []string{`line 6: algorithm: "raft" is not one of bully, ring`}, wantKey: "algorithm"},
		{name: "bad preemption", file: configtest.BaseYAML(nil, "preemption: always"),
			want: []string{`line 6: preemption: "always" is not one of`}, wantKey: "preemption"},
		{name: "missing state dir", file: configtest.BaseYAML(map[string]string{"state_dir": ""}),
			want: []string{"state_dir: a state directory is required"}, wantKey: "state_dir"},
		{name: "bad subject prefix", file: configtest.BaseYAML(nil, "subject_prefix: a..b"),
			want: []string{`line 6: subject_prefix: "a..b" is not a valid NATS subject prefix`}, wantKey: "subject_prefix"},
		{name: "heartbeat out of range", file: configtest.BaseYAML(nil, "heartbeat: 5ms"),
			want: []string{"line 6: heartbeat: 5ms is outside 10ms..1m"}, wantKey: "heartbeat"},
		{name: "heartbeat misses out of range", file: configtest.BaseYAML(nil, "heartbeat_misses: 1"),
			want: []string{"line 6: heartbeat_misses: 1 is outside 2..100"}, wantKey: "heartbeat_misses"},
		{name: "lease too long", file: configtest.BaseYAML(nil, "lease: 2s"),
			want: []string{"line 6: lease: 2s plus heartbeat"}, wantKey: "lease"},
		{name: "hold down negative", file: configtest.BaseYAML(nil, "hold_down: -1s"),
			want: []string{"line 6: hold_down: -1s is negative"}, wantKey: "hold_down"},
		{name: "nats missing", file: configtest.BaseYAML(map[string]string{"nats": ""}),
			want: []string{"nats: give nats.urls (--nats-url) or nats.embedded (--embedded-nats)"}, wantKey: "nats"},
		{name: "nats urls empty", file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: []}"}),
			want: []string{"nats: give nats.urls (--nats-url) or nats.embedded (--embedded-nats)"}, wantKey: "nats"},
		{name: "nats url bad scheme", file: configtest.BaseYAML(map[string]string{"nats": "nats:\n  urls:\n    - nats://a\n    - http://b:4222"}),
			want: []string{`config FILE: line 8: nats.urls: "http://b:4222": the scheme must be nats:// or tls://`}, wantKey: "nats.urls"},
		{name: "nats url no host", file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: [\"nats://:4222\"]}"}),
			want: []string{`line 5: nats.urls: "nats://:4222" has no host`}, wantKey: "nats.urls"},
		{name: "nats url bad port", file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: \"nats://a:x\"}"}),
			want: []string{`line 5: nats.urls: "nats://a:x"`}, wantKey: "nats.urls"},
		{name: "nats url with path", file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: [nats://a:4222/x]}"}),
			want: []string{`line 5: nats.urls: "nats://a:4222/x": a NATS URL has no path`}, wantKey: "nats.urls"},
		{name: "nats urls a mapping", file: configtest.BaseYAML(map[string]string{"nats": "nats: {urls: {a: b}}"}),
			want: []string{"line 5: nats.urls: must be a list of URLs"}, wantKey: "nats.urls"},
		{name: "nats embedded not a bool", file: configtest.BaseYAML(map[string]string{"nats": "nats: {embedded: maybe}"}),
			want: []string{`line 5: nats.embedded: "maybe" is not a boolean`}, wantKey: "nats.embedded"},
		{name: "nats listen not host:port", file: configtest.BaseYAML(map[string]string{"nats": "nats: {embedded: true, listen: localhost}"}),
			want: []string{`line 5: nats.listen: "localhost" is not host:port`}, wantKey: "nats.listen"},
		{name: "http addr not host:port", file: configtest.BaseYAML(nil, "http_addr: localhost"),
			want: []string{`line 6: http_addr: "localhost" is not host:port`}, wantKey: "http_addr"},
		{name: "http addr bad port", file: configtest.BaseYAML(nil, "http_addr: localhost:http"),
			want: []string{`line 6: http_addr: "localhost:http": port "http" is not a number`}, wantKey: "http_addr"},
		{name: "bad log format", file: configtest.BaseYAML(nil, "log_format: xml"),
			want: []string{`line 6: log_format: "xml" is not one of text, json`}, wantKey: "log_format"},
		{name: "bad log level", file: configtest.BaseYAML(nil, "log_level: trace"),
			want: []string{`line 6: log_level: "trace" is not one of debug, info, warn, error`}, wantKey: "log_level"},

		// Flags.
		{name: "flag bad duration", args: withFlags("--heartbeat", "abc"),
			want: []string{`--heartbeat: "abc" is not a duration`}, wantKey: "heartbeat"},
		{name: "flag bad lease", args: withFlags("--lease=1"),
			want: []string{`--lease: "1" is not a duration`}, wantKey: "lease"},
		{name: "flag bad answer timeout", args: withFlags("--answer-timeout", "x"),
			want: []string{`--answer-timeout: "x" is not a duration`}, wantKey: "answer_timeout"},
		{name: "flag bad hold down", args: withFlags("--hold-down", "x"),
			want: []string{`--hold-down: "x" is not a duration`}, wantKey: "hold_down"},
		{name: "flag bad heartbeat misses", args: withFlags("--heartbeat-misses", "x"),
			want: []string{`--heartbeat-misses: "x" is not an integer`}, wantKey: "heartbeat_misses"},
		{name: "flag bad member priority", args: withFlags("--members", "a,b=x"),
			want: []string{`--members: "b=x": priority must be an integer`}, wantKey: "members"},
		{name: "flag bad quorum", args: withFlags("--quorum", "half"),
			want: []string{`--quorum: "half" is not an integer or none`}, wantKey: "quorum"},
		{name: "flag bad nats url", args: withFlags("--nats-url", "nats://a,ws://b"),
			want: []string{`--nats-url: "ws://b": the scheme must be nats:// or tls://`}, wantKey: "nats.urls"},
		{name: "flag bad embedded", args: withFlags("--embedded-nats=maybe"),
			want: []string{`--embedded-nats: "maybe" is not a boolean`}, wantKey: "nats.embedded"},
		{name: "flag bad nats listen", args: withFlags("--nats-listen", "4222"),
			want: []string{`--nats-listen: "4222" is not host:port`}, wantKey: "nats.listen"},
		{name: "flag bad http addr", args: withFlags("--http-addr", "on"),
			want: []string{`--http-addr: "on" is not host:port`}, wantKey: "http_addr"},
		{name: "flag bad log format", args: withFlags("--log-format", "logfmt"),
			want: []string{`--log-format: "logfmt" is not one of text, json`}, wantKey: "log_format"},
		{name: "flag bad log level", args: withFlags("--log-level", "INFO"),
			want: []string{`--log-level: "INFO" is not one of`}, wantKey: "log_level"},
		{name: "flag id not in members", args: withFlags("--id", "gw9"),
			want: []string{`--id: "gw9" is not in members`}, wantKey: "id"},
		{name: "flag heartbeat out of range", args: withFlags("--heartbeat", "2m"),
			want: []string{"--heartbeat: 2m0s is outside 10ms..1m"}, wantKey: "heartbeat"},
		{name: "flag empty id", args: withFlags("--id="),
			want: []string{"--id: this gateway's member id is required"}, wantKey: "id"},
		{name: "flags without nats", args: baseFlags[:len(baseFlags)-1],
			want: []string{"nats: give nats.urls (--nats-url) or nats.embedded (--embedded-nats)"}, wantKey: "nats"},
		{name: "flag missing state dir", args: []string{"--id", "a", "--group", "g", "--members", "a", "--embedded-nats"},
			want: []string{"state_dir: a state directory is required"}, wantKey: "state_dir"},
		{name: "unknown flag", args: withFlags("--frobnicate"),
			want: []string{"--frobnicate: unknown flag"}},
		{name: "flag without value", args: withFlags("--group"),
			want: []string{"--group: needs a value"}},
		{name: "positional argument", args: withFlags("extra"),
			want: []string{`run: unexpected argument "extra"`}},
		{name: "empty config flag", args: []string{"--config="},
			want: []string{"--config: give a config file path"}},
		{name: "flag error wins over a valid file", file: configtest.BaseYAML(nil), args: []string{"--heartbeat", "1"},
			want: []string{`--heartbeat: "1" is not a duration`}, wantKey: "heartbeat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, path := tt.args, ""
			if tt.file != "" {
				path = configtest.Write(t, tt.file)
				args = append([]string{"--config", path}, args...)
			}
			check := func(fn string, rc *Config, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error; config %+v", fn, rc)
				}
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error %v is a %T, not a *Error", fn, err, err)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") {
					t.Errorf("%s: error is not one line: %q", fn, msg)
				}
				for _, w := range tt.want {
					if w = strings.ReplaceAll(w, "FILE", path); !strings.Contains(msg, w) {
						t.Errorf("%s: error %q does not contain %q", fn, msg, w)
					}
				}
				if tt.wantKey != "" && ce.Key != tt.wantKey {
					t.Errorf("%s: Error.Key = %q, want %q", fn, ce.Key, tt.wantKey)
				}
			}
			rc, err := Load(args)
			check("Load", rc, err)
			if tt.file != "" && len(tt.args) == 0 {
				rc, err := LoadFile(path)
				check("LoadFile", rc, err)
			}
		})
	}
}

func TestLoadRunConfigHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		_, err := Load([]string{arg})
		var ce *Error
		if !errors.Is(err, flag.ErrHelp) || !errors.As(err, &ce) {
			t.Errorf("Load(%s) = %v, want a *Error wrapping flag.ErrHelp", arg, err)
		}
	}
}

func TestLoadCheckConfigNoPath(t *testing.T) {
	_, err := LoadFile("")
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--config FILE") {
		t.Errorf("LoadFile(\"\") = %v, want a *Error asking for --config FILE", err)
	}
}

func TestLoadCheckConfigEmptyFile(t *testing.T) {
	path := configtest.Write(t, "# nothing yet\n")
	_, err := LoadFile(path)
	if err == nil || !strings.Contains(err.Error(), "config "+path+": id:") {
		t.Errorf("LoadFile(empty) = %v, want the missing id named", err)
	}
}

// TestSettingsMatchSchema keeps the settings table, the file schema and the
// flags in step: every setting has one key and one flag, each used once,
// and a file that sets every key under its sections loads without an
// unknown-key error, naming each key of a section in that section's list.
func TestSettingsMatchSchema(t *testing.T) {
	l := newLoader()
	keys, flags := map[string]bool{}, map[string]bool{configFlag: true}
	for _, s := range l.table {
		if keys[s.key] || flags[s.flag] {
			t.Errorf("setting %s/--%s is listed twice", s.key, s.flag)
		}
		keys[s.key], flags[s.flag] = true, true
		if s.val == nil {
			t.Errorf("setting %s has no value", s.key)
		}
		if l.setting(s.key) == nil {
			t.Errorf("setting %s is not found by its key", s.key)
		}
		// Every key of the file, under its sections, is collected as itself.
		parts := strings.Split(s.key, ".")
		var b strings.Builder
		for i, p := range parts {
			b.WriteString(strings.Repeat("  ", i) + p + ":")
			if i < len(parts)-1 {
				b.WriteString("\n")
			}
		}
		b.WriteString(" x\n")
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(b.String()), &doc); err != nil {
			t.Fatalf("%s: %v", s.key, err)
		}
		nodes := map[string]*yaml.Node{}
		if errs := l.collect(doc.Content[0], "", nodes); len(errs) > 0 || nodes[s.key] == nil || len(nodes) != 1 {
			t.Errorf("file key %s: errors %v, collected %v", s.key, errs, nodes)
		}
		if len(parts) > 1 {
			section := strings.Join(parts[:len(parts)-1], ".")
			if !slices.Contains(l.sectionKeys(section), parts[len(parts)-1]) {
				t.Errorf("section %s does not list %s: %v", section, parts[len(parts)-1], l.sectionKeys(section))
			}
		}
	}
	if len(keys) != len(l.table) || len(flags) != len(l.table)+1 {
		t.Errorf("%d keys, %d flags, %d settings; want one of each per setting", len(keys), len(flags)-1, len(l.table))
	}
}

func TestRunUsage(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	out := b.String()
	for _, s := range newLoader().table {
		if !strings.Contains(out, "-"+s.flag) {
			t.Errorf("usage does not list -%s", s.flag)
		}
	}
	if !strings.Contains(out, "-config FILE") {
		t.Errorf("usage does not list -config FILE:\n%s", out)
	}
}

// TestLoadFileStructure: what the walk of the file's nodes adds to the
// settings: merge keys are followed (the mapping's own keys win), an empty
// section sets nothing, a repeated key inside a section is refused naming
// the section's key, and several unknown keys are all counted.
func TestLoadFileStructure(t *testing.T) {
	rc, err := LoadFile(configtest.Write(t, configtest.BaseYAML(nil,
		"pushgateway:", "  <<: [{url: \"http://pgw:9091\", interval: 20s}, {job: site}]", "  interval: 30s", "leader: ~")))
	if err != nil {
		t.Fatal(err)
	}
	if rc.Push.URL != "http://pgw:9091" || rc.Push.Interval != 30*time.Second || rc.Push.Job != "site" || len(rc.Duty.Command) != 0 {
		t.Errorf("push %+v, duty %+v; want the merged url and job, the mapping's own interval, no duty", rc.Push, rc.Duty)
	}
	for _, tc := range []struct {
		name string
		file string
		want string
		key  string
	}{
		{"repeated key in a section", configtest.BaseYAML(map[string]string{"nats": "nats:\n  urls: nats://a\n  urls: nats://b"}),
			`line 7: mapping key "urls" already defined at line 6`, "nats.urls"},
		{"unknown keys counted", configtest.BaseYAML(nil, "foo: 1", "pushgateway: {bar: 2}", "baz: 3"),
			"line 6: field foo not found (and 2 more)", "foo"},
		{"unknown key under a merge", configtest.BaseYAML(nil, "leader:", "  <<: {commandd: [x]}"),
			"line 7: field leader.commandd not found (leader takes command,", "leader.commandd"},
		{"merge of a value", configtest.BaseYAML(nil, "leader:", "  <<: x"),
			"line 7: a merge (<<) takes a mapping or a list of mappings", ""},
	} {
		_, err := LoadFile(configtest.Write(t, tc.file))
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || ce.Key != tc.key {
			t.Errorf("%s: %v (key %q), want %q and key %q", tc.name, err, keyOf(ce), tc.want, tc.key)
		}
	}
}

func keyOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Key
}
