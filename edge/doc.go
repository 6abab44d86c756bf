// Package edge holds the concerns of running edge-agent on a site's
// gateways rather than the election itself: the embedded nats-server that
// lets an offline site work with no other infrastructure, and (as they are
// added) systemd notify and watchdog support, the Prometheus Pushgateway
// pusher and config files on disk.
//
// Nothing here knows about elections. The agent package uses edge to obtain
// a NATS URL to connect to; the election protocol never sees any of it.
//
// # Embedded server
//
// StartEmbedded runs a nats-server inside the agent's process, listening on
// a TCP address so the other gateways (and operators with the nats CLI) can
// reach it. The agent connects to it through ClientURL like any other
// client, so the code path is the same whether the bus is embedded or an
// external NATS deployment. The server never installs signal handlers
// (the agent owns SIGTERM for the graceful handover) and logs only through
// the slog.Logger it is given.
package edge
