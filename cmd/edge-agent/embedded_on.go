//go:build !noembed

package main

import "github.com/edge-agent/edge-agent/edge"

// buildFlavor names what this build leaves out ("" for the full build).
const buildFlavor = ""

// withEmbeddedNATS: this build can run an embedded nats-server.
const withEmbeddedNATS = true

func startServer(cfg edge.EmbeddedConfig) (*edge.EmbeddedServer, error) {
	return edge.StartEmbedded(cfg)
}

// errNoEmbeddedNATS is nil here: only a client-only build refuses
// nats.embedded.
var errNoEmbeddedNATS error
