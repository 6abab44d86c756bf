package opsclient

import (
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/agent"

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

// TestProtocolLine: the status table says when a rolling upgrade holds the
// site below the newest build's protocol, and who holds it.
func TestProtocolLine(t *testing.T) {
	newer := func(id string, site int, members ...agent.MemberReport) agent.StatusReport {
		return agent.StatusReport{ID: id, ProtocolVersion: 2, SiteProtocolVersion: site, Members: members}
	}
	uniform := []agent.StatusReport{newer("gw1", 2, agent.MemberReport{ID: "gw2", ProtocolMax: 2}), newer("gw2", 2)}
	if got := protocolLine(uniform); got != "" {
		t.Errorf("uniform site: %q", got)
	}
	mixed := []agent.StatusReport{
		newer("gw1", 1, agent.MemberReport{ID: "gw2", ProtocolMax: 2}, agent.MemberReport{ID: "gw3", ProtocolMax: 1}),
		newer("gw2", 1),
		{ID: "gw3"}, // a build of protocol 1 reports no protocol fields
	}
	want := "protocol: the site runs 1, below the newest build's 2, because gw3 run(s) an older build (an upgrade under way)"
	if got := protocolLine(mixed); got != want {
		t.Errorf("mixed site:\n got %q\nwant %q", got, want)
	}
	refused := []agent.StatusReport{{ID: "gw1", ProtocolVersion: 2, SiteProtocolVersion: 2, ProtocolMismatch: []string{"gw9"}}}
	if got := protocolLine(refused); !strings.Contains(got, "REFUSED (versions that do not overlap): gw9") {
		t.Errorf("refused member: %q", got)
	}
}
