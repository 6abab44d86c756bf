//go:build !noembed

package main

import "github.com/edge-agent/edge-agent/edge"

// buildFlavor names what this build leaves out ("" for the full build).
const buildFlavor = ""

func startServer(cfg edge.EmbeddedConfig) (*edge.EmbeddedServer, error) {
	return edge.StartEmbedded(cfg)
}
