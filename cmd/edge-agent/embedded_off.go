//go:build noembed

package main

import (
	"errors"

	"github.com/edge-agent/edge-agent/edge"
)

// A client-only build (go build -tags noembed, make build-arm64-client)
// leaves the embedded nats-server out: about 3.5 MB less binary, for
// gateways that join a site bus (nats.urls) and never run a server.

// buildFlavor names what this build leaves out.
const buildFlavor = ", client-only: no embedded NATS server"

// withEmbeddedNATS: this build cannot run an embedded nats-server.
const withEmbeddedNATS = false

var errNoEmbeddedNATS = errors.New("this edge-agent is a client-only build (-tags noembed) without the embedded NATS server: give nats.urls (--nats-url), or install the full build")

func startServer(edge.EmbeddedConfig) (*edge.EmbeddedServer, error) { return nil, errNoEmbeddedNATS }
