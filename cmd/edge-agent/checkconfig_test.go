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
