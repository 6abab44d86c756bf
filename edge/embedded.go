package edge

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds the wait for the embedded server to accept clients.
const readyTimeout = 10 * time.Second

// EmbeddedConfig describes an embedded nats-server.
type EmbeddedConfig struct {
	// Listen is the client address as host:port, the config file's
	// nats.listen (nats_listen). Port 0 picks a free port; an empty host
	// listens on every interface.
	Listen string
	// ServerName names the server in its INFO and in cluster routes; empty
	// lets nats-server generate one. Use the gateway's member id.
	ServerName string
	// Logger receives the server's log, adapted to slog; nil discards it.
	Logger *slog.Logger
}

// EmbeddedServer is a running embedded nats-server. Its methods are safe for
// concurrent use.
type EmbeddedServer struct {
	srv       *server.Server
	clientURL string
	once      sync.Once
}

// StartEmbedded starts a nats-server as described by cfg and returns once it
// accepts client connections. It never installs signal handlers. If the
// server cannot listen (a bad address, a port in use) or is not ready within
// 10 seconds, StartEmbedded shuts it down and returns an error.
func StartEmbedded(cfg EmbeddedConfig) (*EmbeddedServer, error) {
	host, port, err := parseListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       host,
		Port:       port,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		// MaxPayload is left at the server default (1 MiB); the wire
		// layer enforces its own, much smaller, message size limit.
	}
	if port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("edge: embedded nats-server on %s: %w", cfg.Listen, err)
	}
	// The logger is installed even without a slog.Logger: it is how a
	// failure inside Start (which only logs it, as fatal) reaches the caller.
	log := newServerLogger(cfg.Logger)
	srv.SetLogger(log, log.debugEnabled(), log.traceEnabled())

	// Start returns once it has tried to listen; the accept loop runs in
	// the server's own goroutines.
	srv.Start()
	if srv.Addr() == nil {
		// The listener never came up, so waiting would only burn the
		// timeout: fail now, with the reason the server logged.
		srv.Shutdown()
		srv.WaitForShutdown()
		reason := log.fatal()
		if reason == "" {
			reason = "the server did not open its client listener"
		}
		return nil, fmt.Errorf("edge: embedded nats-server (nats_listen %s) cannot start: %s", cfg.Listen, reason)
	}
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("edge: embedded nats-server on %s not ready for connections after %s", cfg.Listen, readyTimeout)
	}
	tcp, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("edge: embedded nats-server on %s: unexpected listener address %v", cfg.Listen, srv.Addr())
	}
	return &EmbeddedServer{
		srv:       srv,
		clientURL: "nats://" + net.JoinHostPort(dialHost(host), strconv.Itoa(tcp.Port)),
	}, nil
}

// parseListen splits a host:port listen address and checks the port range.
// Errors name the config key, nats_listen.
func parseListen(listen string) (host string, port int, err error) {
	if listen == "" {
		return "", 0, errors.New("edge: nats_listen: an address host:port is required (port 0 picks a free port)")
	}
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("edge: nats_listen: %q is not a host:port address: %w", listen, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("edge: nats_listen: %q: port %q is not a number in 0..65535", listen, p)
	}
	if h == "" {
		h = "0.0.0.0"
	}
	return h, n, nil
}

// dialHost maps a wildcard listen host to the loopback address of the same
// family: the client URL is for clients on this machine, and a wildcard is an
// address to listen on, not one to dial.
func dialHost(host string) string {
	ip := net.ParseIP(host)
	switch {
	case ip == nil || !ip.IsUnspecified():
		return host
	case ip.To4() != nil:
		return "127.0.0.1"
	default:
		return "::1"
	}
}

// ClientURL returns the URL a client on this machine connects to,
// nats://host:port, with the port the server actually listens on. A wildcard
// listen host (0.0.0.0, ::) is given as the loopback address.
func (e *EmbeddedServer) ClientURL() string { return e.clientURL }

// Server returns the underlying nats-server, for what this type does not
// wrap (monitoring, in-process connections). Callers must not shut it down
// directly; use Shutdown.
func (e *EmbeddedServer) Server() *server.Server { return e.srv }

// NumClients returns the number of client connections the server has now.
func (e *EmbeddedServer) NumClients() int { return e.srv.NumClients() }

// Shutdown stops the server, closing every client connection, and waits until
// it has fully stopped. It is idempotent and safe to call concurrently; every
// call returns after the server has stopped.
func (e *EmbeddedServer) Shutdown() {
	e.once.Do(func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	})
}
