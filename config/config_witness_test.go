package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/config/configtest"
)

func TestLoadWitnesses(t *testing.T) {
	for name, args := range map[string][]string{
		"flag":        withFlags("--witnesses", "gw3"),
		"file list":   {"--config", configtest.Write(t, configtest.BaseYAML(nil, "witnesses: [gw3]"))},
		"file string": {"--config", configtest.Write(t, configtest.BaseYAML(nil, "witnesses: gw3"))},
	} {
		rc, err := Load(args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := []string{"gw3"}; !reflect.DeepEqual(rc.Agent.Witnesses, want) {
			t.Errorf("%s: witnesses %v, want %v", name, rc.Agent.Witnesses, want)
		}
		if rc.Agent.IsWitness("gw1") || !rc.Agent.IsWitness("gw3") {
			t.Errorf("%s: IsWitness wrong", name)
		}
	}
}

// TestWitnessDutyIgnored: the same site file on the witness (its own id is
// the witness's) drops the leader duty and the VIP unchecked (the witness
// box has no eth7), and check-config says so.
func TestWitnessDutyIgnored(t *testing.T) {
	file := configtest.BaseYAML(map[string]string{"id": "id: gw3"}, "witnesses: [gw3]",
		"leader: {command: [/usr/bin/poller], vip: [{address: 192.0.2.10/24, interface: eth7}]}")
	rc, err := LoadFile(configtest.Write(t, file))
	if err != nil {
		t.Fatalf("witness: %v", err)
	}
	if !rc.DutyIgnored || len(rc.Duty.Command) != 0 || len(rc.Duty.VIP) != 0 {
		t.Errorf("witness: DutyIgnored %v, duty %+v; want the duty dropped", rc.DutyIgnored, rc.Duty)
	}
	var b bytes.Buffer
	rc.Describe(&b)
	for _, want := range []string{"witnesses: gw3 (this member is a witness", "note: this member is a witness: the leader duty and virtual IPs (leader.*) are ignored"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("check-config output lacks %q:\n%s", want, b.String())
		}
	}
	// On a gateway the same file keeps its duty (and checks its VIP's
	// interface).
	gw := configtest.BaseYAML(nil, "witnesses: [gw3]", "leader: {command: [/usr/bin/poller]}")
	rc, err = LoadFile(configtest.Write(t, gw))
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	if rc.DutyIgnored || len(rc.Duty.Command) != 1 {
		t.Errorf("gateway: DutyIgnored %v, duty %+v; want the duty kept", rc.DutyIgnored, rc.Duty)
	}
	b.Reset()
	rc.Describe(&b)
	if !strings.Contains(b.String(), "witnesses: gw3 (this member is a gateway)") {
		t.Errorf("check-config output on a gateway:\n%s", b.String())
	}
}
