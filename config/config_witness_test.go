package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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

// LoadWitness: the groups from --groups or a groups file (comments and blank
// lines skipped), the config's group without either; one-line errors for a
// group listed twice, a bad line, an empty file, a member that is not a
// witness and an embedded server.
func TestLoadWitness(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "groups")
	if err := os.WriteFile(file, []byte("# sites\nsite-1\n\n  site-2   # the second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("site-1\nsite-2 site-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--members", "gw1=1,gw2=2,wit=3", "--witnesses", "wit", "--state-dir", dir, "--nats-url", "nats://127.0.0.1:4222"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{append([]string{"--id", "wit", "--groups", "a, b,c"}, base...), []string{"a", "b", "c"}},
		{append([]string{"--id", "wit", "--groups-file=" + file}, base...), []string{"site-1", "site-2"}},
		{append([]string{"--id", "wit", "--group", "only"}, base...), []string{"only"}},
	} {
		rc, groups, err := LoadWitness(c.args)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if !slices.Equal(groups, c.want) || rc.Agent.ID != "wit" {
			t.Errorf("%v: groups %v, want %v", c.args, groups, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"--id", "wit", "--groups", "a,b,a"}, base...), `groups: group "a" is listed twice`},
		{append([]string{"--id", "wit", "--groups-file", bad}, base...), bad + `:2: "site-2 site-3": one group name per line`},
		{append([]string{"--id", "wit", "--groups", "a", "--groups-file", file}, base...), "give one of them"},
		{append([]string{"--id", "wit", "--groups"}, base[:0]...), "--groups: needs a value"},
		{append([]string{"--id", "gw1", "--groups", "a"}, base...), `id: "gw1" is not one of witnesses [wit]`},
		{append([]string{"--id", "wit", "--groups", "a", "--heartbeat", "soon"}, base...), "--heartbeat"},
		{append([]string{"--id", "wit", "--group", "a", "--read-batch", "soon"}, base...), `--read-batch: "soon" is not a duration`},
		{append([]string{"--id", "wit", "--group", "a", "--read-batch=101ms"}, base...), "--read-batch: 101ms is outside 0..100ms"},
		{append([]string{"--id", "wit", "--group", "a", "--read-batch", "-1ms"}, base...), "--read-batch: -1ms is outside"},
		{append(append([]string{"--id", "wit"}, base...), "--read-batch"), "--read-batch: needs a value"},
	} {
		_, _, err := LoadWitness(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// --read-batch: heartbeat/200 and at most 5 ms by default, as given
// otherwise (0 turns it off); run has no such flag.
func TestLoadWitnessReadBatch(t *testing.T) {
	base := []string{"--id", "wit", "--group", "site", "--members", "gw1=1,gw2=2,wit=3", "--witnesses", "wit", "--state-dir", t.TempDir(), "--nats-url", "nats://127.0.0.1:4222"}
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 5 * time.Millisecond},
		{[]string{"--heartbeat", "100ms"}, 500 * time.Microsecond},
		{[]string{"--heartbeat", "10s"}, 5 * time.Millisecond},
		{[]string{"--read-batch", "0"}, 0},
		{[]string{"--read-batch=20ms", "--groups", "a,b"}, 20 * time.Millisecond},
	} {
		rc, _, err := LoadWitness(append(slices.Clone(base), c.args...))
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if rc.ReadBatch != c.want {
			t.Errorf("%v: read batch %s, want %s", c.args, rc.ReadBatch, c.want)
		}
	}
	if _, err := Load(append(slices.Clone(base), "--read-batch", "1ms")); err == nil {
		t.Error("run accepted --read-batch")
	}
}
