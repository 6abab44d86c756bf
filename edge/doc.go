// Package edge holds the concerns of running edge-agent on a site's
// gateways rather than the election itself: the embedded nats-server that
// lets an offline site work with no other infrastructure, the credentials of
// the agent's NATS connection, systemd notify and watchdog support, bus
// permissions for the election subjects, and the Prometheus Pushgateway
// pusher.
//
// Nothing here knows about elections. The agent package uses edge to obtain
// a NATS connection to carry its messages; the election protocol never sees
// any of it.
//
// # Embedded server
//
// StartEmbedded runs a nats-server inside the agent's process, listening on
// a TCP address so the other gateways' agents (for failover) and operators
// with the nats CLI can reach it. With a ClusterConfig the server routes to
// the other gateways' servers, so the site's bus survives any one gateway;
// with a LeafNodeConfig it also joins an upstream hub. It can require the
// site's client credentials (ClientAuth) and TLS, and serves monitoring only
// on loopback. The agent reaches its own server in-process through
// EmbeddedServer.Dialer and fails over to the peers' servers over TCP. The
// server never installs signal handlers (the agent owns SIGTERM for the
// graceful handover) and logs only through the slog.Logger it is given.
//
// # systemd
//
// SystemdNotifier speaks sd_notify for a Type=notify unit: READY=1 once the
// agent has joined its group, WATCHDOG=1 only while its election loop is
// healthy, STOPPING=1 on shutdown.
//
// # Pushgateway
//
// Pusher pushes a gatherer's metrics (PrefixGatherer: the agent's
// edge_election_ series) to a Pushgateway under job, group and instance:
// periodically, at once on Trigger (the binary triggers on every leader
// change), with exponential backoff while the Pushgateway cannot be reached,
// and a last time on shutdown, keeping the group rather than deleting it.
package edge
