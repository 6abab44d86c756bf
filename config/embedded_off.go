//go:build noembed

package config

import "errors"

// ErrNoEmbeddedNATS: a client-only build (go build -tags noembed) leaves the
// embedded nats-server out, and refuses nats.embedded with this error.
var ErrNoEmbeddedNATS = errors.New("this edge-agent is a client-only build (-tags noembed) without the embedded NATS server: give nats.urls (--nats-url), or install the full build")
