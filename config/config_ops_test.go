package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/config/configtest"
	"github.com/edge-agent/edge-agent/edge"
)

func TestLoadOpsConfig(t *testing.T) {
	path := configtest.Write(t, configtest.BaseYAML(nil, strings.Split(strings.TrimSpace(configtest.OpsYAML), "\n")...))
	rc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantPush := edge.PushConfig{URL: "http://pgw.example:9091", Job: "edge", Interval: 30 * time.Second,
		Timeout: 10 * time.Second, RetryMin: time.Second, RetryMax: 30 * time.Second}
	if !reflect.DeepEqual(rc.Push, wantPush) {
		t.Errorf("push:\n got %+v\nwant %+v", rc.Push, wantPush)
	}
	d := rc.Duty
	if strings.Join(d.Command, "|") != "/usr/bin/plc-poller|--bus|line 3" ||
		strings.Join(d.OnElected, "|") != "/usr/lib/edge/vip|up" || strings.Join(d.OnDemoted, "|") != "/usr/lib/edge/vip|down" ||
		d.Grace != 500*time.Millisecond || d.HookTimeout != 5*time.Second || d.MaxFailures != 3 || d.FailureWindow != 2*time.Minute ||
		strings.Join(d.Env, "|") != "PLC_ADDR=10.0.0.5|TZ" {
		t.Errorf("duty: %+v", d)
	}

	// Flags override the file; a command flag is a list or words.
	rc, err = Load([]string{"--config", path, "--pushgateway-url", "https://other:9091", "--push-interval", "5s",
		"--leader-command", `["/bin/sh", "-c", "exec poller --x"]`, "--leader-grace", "1s", "--leader-on-elected", "logger elected",
		"--leader-env", "A=1 B"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Push.URL != "https://other:9091" || rc.Push.Interval != 5*time.Second || rc.Push.Job != "edge" ||
		strings.Join(rc.Duty.Command, "|") != "/bin/sh|-c|exec poller --x" || rc.Duty.Grace != time.Second ||
		strings.Join(rc.Duty.OnElected, "|") != "logger|elected" || strings.Join(rc.Duty.Env, "|") != "A=1|B" {
		t.Errorf("flags: %+v %+v", rc.Push, rc.Duty)
	}

	// Virtual IPs: a list of mappings or strings in the file, a list of
	// ADDR/LEN@IFACE on the command line; enough for a duty on their own.
	vpath := configtest.Write(t, configtest.BaseYAML(nil, "leader:", "  vip:", "    - {address: 10.0.0.3/24, interface: lo}", "    - fd00::3/64@lo"))
	if rc, err = LoadFile(vpath); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rc.Duty.VIP); got != "[10.0.0.3/24@lo fd00::3/64@lo]" || rc.Duty.Grace == 0 {
		t.Errorf("leader.vip from the file: %s (grace %s)", got, rc.Duty.Grace)
	}
	if rc, err = Load(withFlags("--leader-vip", "10.0.0.4/32@lo, 10.0.0.5/24@lo")); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rc.Duty.VIP); got != "[10.0.0.4/32@lo 10.0.0.5/24@lo]" {
		t.Errorf("--leader-vip: %s", got)
	}

	// Nothing configured: no push, no duty (zero values).
	rc, err = Load(baseFlags)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rc.Push, edge.PushConfig{}) || !reflect.DeepEqual(rc.Duty, agent.DutyConfig{}) {
		t.Errorf("defaults: %+v %+v", rc.Push, rc.Duty)
	}
	// The default grace fits in the lease.
	rc, err = Load(withFlags("--leader-command", "poller"))
	if err != nil {
		t.Fatal(err)
	}
	if g := rc.Duty.Grace; g <= 0 || g >= rc.Agent.Lease {
		t.Errorf("default grace %s, lease %s", g, rc.Agent.Lease)
	}
}

func TestOpsConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string // config file lines after the base ones (line 6 on)
		args  []string // flags after --config
		want  string
	}{
		{name: "grace not shorter than the lease", extra: []string{"leader: {command: [x], grace: 5s}"},
			want: "line 6: leader.grace: 5s must be positive and shorter than the lease"},
		{name: "grace flag", args: []string{"--leader-command", "x", "--leader-grace", "1h"}, want: "--leader-grace: 1h0m0s must be positive and shorter"},
		{name: "bad grace", extra: []string{"leader:", "  grace: soon"}, want: "line 7: leader.grace: \"soon\" is not a duration"},
		{name: "unknown leader key", extra: []string{"leader:", "  commandd: [x]"},
			want: "line 7: field leader.commandd not found (leader takes command, grace, on_elected"},
		{name: "leader not a mapping", extra: []string{"leader: run-this"}, want: "leader: must be a mapping"},
		{name: "command element", extra: []string{"leader:", "  command: [x, [y]]"}, want: "line 7: leader.command: each element must be a string"},
		{name: "empty program", args: []string{"--leader-command", `["", "x"]`}, want: "--leader-command: "},
		{name: "bad list", args: []string{"--leader-command", `[x, "y`}, want: "--leader-command: "},
		{name: "env notify socket", args: []string{"--leader-command", "x", "--leader-env", "NOTIFY_SOCKET"},
			want: "--leader-env: NOTIFY_SOCKET belongs to the agent's own process and is never passed to the duty"},
		{name: "env election variable", extra: []string{"leader: {command: [x], env: [EDGE_ELECTION_TERM=7]}"},
			want: "line 6: leader.env: EDGE_ELECTION_TERM is set by the agent itself"},
		{name: "env bad entry", args: []string{"--leader-command", "x", "--leader-env", `["=x"]`}, want: "--leader-env: \"=x\" is not KEY=VALUE or KEY"},
		{name: "env not a list", extra: []string{"leader:", "  command: [x]", "  env: {A: 1}"}, want: "line 8: leader.env: must be a list"},
		{name: "max failures", args: []string{"--leader-command", "x", "--leader-max-failures", "-2"}, want: "--leader-max-failures: -2 is not positive"},
		{name: "push url scheme", extra: []string{"pushgateway: {url: 'pgw:9091'}"}, want: "line 6: pushgateway.url: \"pgw:9091\": the scheme must be http:// or https://"},
		{name: "push url path", args: []string{"--pushgateway-url", "http://pgw:9091/metrics/job/x"}, want: "--pushgateway-url: "},
		{name: "push interval", args: []string{"--pushgateway-url", "http://pgw:9091", "--push-interval", "1ms"},
			want: "--push-interval: 1ms is outside 100ms..1h"},
		{name: "unknown push key", extra: []string{"pushgateway:", "  url: http://x", "  intervall: 1s"}, want: "line 8: field pushgateway.intervall not found"},
		{name: "vip address", args: []string{"--leader-vip", "10.0.0.300/24@lo"}, want: "--leader-vip: address \"10.0.0.300/24\": want ADDRESS/PREFIXLEN"},
		{name: "vip no interface", args: []string{"--leader-vip", "10.0.0.3/24"}, want: "--leader-vip: \"10.0.0.3/24\": want ADDRESS/PREFIXLEN@INTERFACE"},
		{name: "vip no prefix length", extra: []string{"leader:", "  vip: [{address: 10.0.0.3, interface: lo}]"}, want: "line 7: leader.vip: address \"10.0.0.3\""},
		{name: "vip missing field", extra: []string{"leader:", "  vip:", "    - address: 10.0.0.3/24"}, want: "line 8: leader.vip: a virtual IP needs both address and interface"},
		{name: "vip unknown field", extra: []string{"leader:", "  vip:", "    - {address: 10.0.0.3/24, iface: lo}"}, want: "line 8: leader.vip: field iface not found in a virtual IP"},
		{name: "vip not a list", extra: []string{"leader:", "  vip: {address: 10.0.0.3/24, interface: lo}"}, want: "line 7: leader.vip: must be a list"},
		{name: "vip twice", args: []string{"--leader-vip", "10.0.0.3/24@lo,10.0.0.3/32@lo"}, want: "--leader-vip: 10.0.0.3 is given twice"},
		{name: "vip multicast", args: []string{"--leader-vip", "224.0.0.5/24@lo"}, want: "a virtual IP must be a unicast address"},
		{name: "vip interface missing", args: []string{"--leader-vip", "10.0.0.3/24@nosuchif0"}, want: "--leader-vip: 10.0.0.3/24@nosuchif0: no interface \"nosuchif0\" on this gateway"},
		{name: "push job", args: []string{"--pushgateway-url", "http://pgw:9091", "--pushgateway-job", "a/b"}, want: "--pushgateway-job: \"a/b\" contains a '/'"},
	} {
		path := configtest.Write(t, configtest.BaseYAML(nil, tc.extra...))
		_, err := Load(append([]string{"--config", path}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tc.name, err)
		}
	}
}
