//go:build noembed

package main

import (
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
)

// A client-only build (go build -tags noembed, make build-arm64-client)
// leaves the embedded nats-server out: about 3.5 MB less binary, for
// gateways that join a site bus (nats.urls) and never run a server. Its
// config loader refuses nats.embedded (config.ErrNoEmbeddedNATS).

// buildFlavor names what this build leaves out.
const buildFlavor = ", client-only: no embedded NATS server"

func startServer(edge.EmbeddedConfig) (*edge.EmbeddedServer, error) {
	return nil, config.ErrNoEmbeddedNATS
}
