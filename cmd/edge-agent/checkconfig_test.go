package main

import (
	"bytes"
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
	path := writeConfig(t, baseYAML(map[string]string{"nats": "nats:\n  urls: nats://gw1.invalid:4222\n  tls: {ca: " + ca + ", cert: " + filepath.Join(dir, "gw.pem") + ", key: " + ca + "}"}))
	var out, errOut strings.Builder
	if code := run([]string{"check-config", path}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "nats.tls.cert") {
		t.Fatalf("check-config with a missing cert: exit %d, %q; want 2 naming nats.tls.cert", code, errOut.String())
	}
}

func TestCheckConfigDescribesOps(t *testing.T) {
	path := writeConfig(t, baseYAML(nil, strings.Split(strings.TrimSpace(opsYAML), "\n")...))
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

const opsYAML = `pushgateway:
  url: http://pgw.example:9091
  interval: 30s
  job: edge
leader:
  command: [/usr/bin/plc-poller, --bus, "line 3"]
  grace: 500ms
  on_elected: /usr/lib/edge/vip up
  on_demoted: ["/usr/lib/edge/vip", "down"]
  hook_timeout: 5s
  max_failures: 3
  failure_window: 2m
  env: [PLC_ADDR=10.0.0.5, TZ]
`

// writeConfig writes content to a fresh config file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge-agent.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// baseLines is a minimal valid config file, one key per line, so that a
// test can replace or drop a key and know the line of what it adds (the
// first extra line is line 6).
var baseLines = []struct{ key, line string }{
	{"id", "id: gw1"},
	{"group", "group: site-a"},
	{"members", "members: gw1,gw2=10,gw3"},
	{"state_dir", "state_dir: /var/lib/edge-agent"},
	{"nats", "nats: {urls: [nats://127.0.0.1:4222]}"},
}

// baseYAML returns the minimal config with the lines of the keys in set
// replaced (an empty replacement drops the key) and extra lines appended.
func baseYAML(set map[string]string, extra ...string) string {
	var b strings.Builder
	for _, l := range baseLines {
		line, ok := set[l.key]
		if !ok {
			line = l.line
		}
		if line != "" {
			b.WriteString(line + "\n")
		}
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	return b.String()
}
