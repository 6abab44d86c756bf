package main

import (
	"bytes"
	"github.com/edge-agent/edge-agent/config/configtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config as the binary runs it: the config package loads and checks
// the file; main opens the files it names and prints its description.

// TestCheckConfigChecksFiles: check-config finds a missing TLS file, naming
// its key, without touching the network.
func TestCheckConfigChecksFiles(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := configtest.Write(t, configtest.BaseYAML(map[string]string{"nats": "nats:\n  urls: nats://gw1.invalid:4222\n  tls: {ca: " + ca + ", cert: " + filepath.Join(dir, "gw.pem") + ", key: " + ca + "}"}))
	var out, errOut strings.Builder
	if code := run([]string{"check-config", path}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "nats.tls.cert") {
		t.Fatalf("check-config with a missing cert: exit %d, %q; want 2 naming nats.tls.cert", code, errOut.String())
	}
}

func TestCheckConfigDescribesOps(t *testing.T) {
	path := configtest.Write(t, configtest.BaseYAML(nil, strings.Split(strings.TrimSpace(configtest.OpsYAML), "\n")...))
	var out, errOut bytes.Buffer
	if code := run([]string{"check-config", "--config", path}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"pushing metrics to http://pgw.example:9091 every 30s (job edge, group site-a, instance gw1)",
		"leader duty: /usr/bin/plc-poller --bus line 3 (grace 500ms, resign after 3 failures within 2m0s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check-config output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCheckConfigStateDir: check-config refuses a state_dir that is not a
// directory, naming the key, and accepts one that does not exist yet when
// it could be created, without creating it (as root too).
func TestCheckConfigStateDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(stateDir string) (int, string, string) {
		path := configtest.Write(t, configtest.BaseYAML(map[string]string{"state_dir": "state_dir: " + stateDir}))
		var out, errOut strings.Builder
		code := run([]string{"check-config", path}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := check(file); code != exitUsage || !strings.Contains(errOut, "state_dir: "+file+" is not a directory") {
		t.Errorf("a file as state_dir: exit %d, %q; want 2 naming state_dir", code, errOut)
	}
	missing := filepath.Join(dir, "nonexistent", "edge-agent")
	code, out, errOut := check(missing)
	if code != exitOK || !strings.Contains(out, "state_dir "+missing+" does not exist yet: the agent will create it") {
		t.Errorf("a missing state_dir under a writable directory: exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "nonexistent")); !os.IsNotExist(err) {
		t.Errorf("check-config created %s (%v)", filepath.Join(dir, "nonexistent"), err)
	}
}

// TestCheckConfigPackagedID: the packaged config is refused as shipped,
// with a message that tells the operator to set the id.
func TestCheckConfigPackagedID(t *testing.T) {
	var out, errOut strings.Builder
	code := run([]string{"check-config", "../../deploy/arm64/edge-agent.yaml"}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), `id: "CHANGE-ME" is the packaged placeholder: set id to this gateway's member id`) {
		t.Errorf("exit %d, %q; want 2 and the placeholder message", code, errOut.String())
	}
}
