package opsclient

import (
	"testing"

	"github.com/edge-agent/edge-agent/config/configtest"
	"github.com/edge-agent/edge-agent/edge"
)

// TestOpsFlagsFromConfig: status, resign and transfer can take the bus, the
// credentials, the group and the prefix from the agent's config file, with
// the gateway's own embedded server first; flags override.
func TestOpsFlagsFromConfig(t *testing.T) {
	path := configtest.Write(t, configtest.ClusterYAML)
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
