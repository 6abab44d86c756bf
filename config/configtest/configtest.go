// Package configtest holds the config files the tests of several packages
// write: a minimal valid file to vary key by key, and fuller examples.
package configtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Write writes content to a fresh config file of mode 0600 and returns its
// path.
func Write(t testing.TB, content string) string {
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

// BaseYAML returns the minimal config with the lines of the keys in set
// replaced (an empty replacement drops the key) and extra lines appended.
func BaseYAML(set map[string]string, extra ...string) string {
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

// ClusterYAML is gw2's file of a three-gateway offline site: every key of
// the nats section that an embedded, clustered site uses.
const ClusterYAML = `id: gw2
group: line-3
members: gw1,gw2,gw3
state_dir: /var/lib/edge-agent
nats:
  embedded: true
  listen: 0.0.0.0:4222
  urls: [nats://gw1.site.lan:4222, nats://gw3.site.lan:4222]
  user: site
  password: s3cret
  tls: {ca: /etc/edge-agent/ca.pem, cert: /etc/edge-agent/gw.pem, key: /etc/edge-agent/gw.key}
  monitor_port: 8222
  cluster:
    name: site-a
    listen: 0.0.0.0:6222
    routes:
      - nats-route://gw1.site.lan:6222
      - nats-route://gw2.site.lan:6222
      - nats-route://gw3.site.lan
    user: route
    password: r0ute
    tls: {ca: /etc/edge-agent/ca.pem, cert: /etc/edge-agent/gw.pem, key: /etc/edge-agent/gw.key}
  leafnode:
    remotes: tls://hub.example.com:7422
    creds: /etc/edge-agent/hub.creds
    tls: {ca: /etc/edge-agent/hub-ca.pem}
`

// OpsYAML sets the pushgateway and leader sections, every key of each.
const OpsYAML = `pushgateway:
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
