//go:build !noembed

package config

// ErrNoEmbeddedNATS is nil in the full build, which can run an embedded
// nats-server; a client-only build refuses nats.embedded with it.
var ErrNoEmbeddedNATS error
