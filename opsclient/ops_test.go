package opsclient

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edge-agent/edge-agent/edge"
)

// TestOpsFlagsFromConfig: status, resign and transfer can take the bus, the
// credentials, the group and the prefix from the agent's config file, with
// the gateway's own embedded server first; flags override.
func TestOpsFlagsFromConfig(t *testing.T) {
	path := writeConfig(t, clusterYAML)
	o, err := ParseFlags("status", []string{"--config", path}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nats://127.0.0.1:4222,nats://gw1.site.lan:4222,nats://gw3.site.lan:4222"; o.urls != want {
		t.Errorf("urls = %q, want %q", o.urls, want)
	}
	if o.group != "line-3" || o.prefix != "edge.election" {
		t.Errorf("group, prefix = %q, %q", o.group, o.prefix)
	}
	if o.auth.User != "site" || o.auth.Password != "s3cret" || o.auth.TLS.CA != "/etc/edge-agent/ca.pem" {
		t.Errorf("auth = %+v, want the agent's", o.auth)
	}

	o, err = ParseFlags("status", []string{"--config", path, "--group", "other", "--nats-url", "nats://10.0.0.9:4222", "--nats-token", "t"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if o.group != "other" || o.urls != "nats://10.0.0.9:4222" || o.auth != (edge.ClientConfig{Token: "t"}) {
		t.Errorf("flags did not override the file: %+v", o)
	}

	if _, err := ParseFlags("status", []string{"--config", "/nonexistent.yaml"}, true); err == nil {
		t.Error("a missing config file was accepted")
	}
}

// writeConfig writes content to a fresh config file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge-agent.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterYAML is gw2's file of a three-gateway offline site: every key of
// the nats section that an embedded, clustered site uses.
const clusterYAML = `id: gw2
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
