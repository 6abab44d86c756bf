//go:build noembed

package main

import (
	"github.com/edge-agent/edge-agent/config/configtest"
	"strings"
	"testing"
)

// TestClientOnlyBuild: a client-only build says so in its version, refuses
// an embedded server with a clear error naming the setting, and still
// accepts a gateway that joins a site bus. CI runs it:
// go test -tags noembed -run TestClientOnlyBuild ./cmd/edge-agent
func TestClientOnlyBuild(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"version"}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "client-only") {
		t.Fatalf("version: exit %d, %q; want it to say client-only", code, out.String())
	}
	embedded := configtest.Write(t, configtest.BaseYAML(map[string]string{"nats": "nats:\n  embedded: true"}))
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check-config", embedded}, &out, &errOut); code != exitUsage ||
		!strings.Contains(errOut.String(), "nats.embedded") || !strings.Contains(errOut.String(), "client-only build") {
		t.Fatalf("check-config with nats.embedded: exit %d, %q; want 2 naming nats.embedded and the client-only build", code, errOut.String())
	}
	external := configtest.Write(t, configtest.BaseYAML(map[string]string{"nats": "nats:\n  urls: nats://127.0.0.1:4222"}))
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check-config", external}, &out, &errOut); code != exitOK {
		t.Fatalf("check-config with nats.urls: exit %d, %q", code, errOut.String())
	}
}
