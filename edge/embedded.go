package edge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// readyTimeout bounds the wait for the embedded server to accept clients.
const readyTimeout = 10 * time.Second

// EmbeddedConfig describes an embedded nats-server: standalone, clustered
// with the other gateways' servers through routes, and optionally a leaf node
// of an upstream hub. Errors about it name the config key at fault.
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
	// Auth is what the server requires of every client (the agent's own
	// connection included). The zero value requires nothing.
	Auth ClientAuth
	// TLS, when it has a certificate, makes the client port TLS only. With a
	// CA as well, clients must present a certificate signed by it.
	TLS TLSFiles
	// MonitorPort, when not 0, serves the nats-server monitoring endpoints
	// (/varz, /routez, ...) on 127.0.0.1 at that port; -1 picks a free
	// port. It is never bound beyond loopback.
	MonitorPort int
	// Cluster, when not nil, clusters the server with the other gateways'.
	Cluster *ClusterConfig
	// LeafNode, when not nil, connects the server to an upstream hub as a
	// leaf node.
	LeafNode *LeafNodeConfig
	// Members, when not nil, authorizes each member of the group by its
	// nkey with MemberPermissions (it may publish election messages only in
	// its own name) and each operator key with OperatorPermissions; the
	// Auth credential, if any, then admits other clients with
	// BusClientPermissions (no election subjects, no control subjects).
	Members *MemberAuthz
	// System, when not nil, gives the server a system account reachable
	// with these credentials, so that agents can read its client
	// disconnect advisories (the fast failover); clients without
	// credentials land in an application account. It is for a server with
	// no other authentication (the demo, a lab); a site with credentials
	// configures its accounts in an external nats-server.
	System *SystemUser
}

// SystemUser is a user of the embedded server's system account.
type SystemUser struct{ User, Password string }

// MemberAuthz lists the members and operators whose nkeys the server admits.
type MemberAuthz struct {
	Prefix, Group string
	// Keys maps member id to its nkey user public key.
	Keys map[string]string
	// Operators maps an operator's name to its nkey user public key.
	Operators map[string]string
}

// ClientAuth is the authentication the embedded server requires of
// clients: at most one of a user and password, a token or an nkey.
type ClientAuth struct {
	User     string
	Password string
	Token    string
	// NKey is a user's public nkey (U...); clients prove it by signing the
	// server's nonce with the seed.
	NKey string
}

// TLSFiles names PEM files for one kind of connection. Cert and Key go
// together; CA alone is only meaningful for a client.
type TLSFiles struct {
	CA   string
	Cert string
	Key  string
}

// IsZero reports whether no file is set.
func (t TLSFiles) IsZero() bool { return t == TLSFiles{} }

// ClusterConfig clusters the embedded server with the servers of the other
// gateways of the site (nats.cluster in the config file).
type ClusterConfig struct {
	// Name is the cluster name; every server of the cluster uses the same.
	Name string
	// Listen is the route address host:port (nats.cluster.listen); port 0
	// picks a free port.
	Listen string
	// Routes are the other servers' route URLs, nats-route://host:port. A
	// route to this server itself is allowed and ignored, so every gateway
	// can share one list.
	Routes []string
	// User and Password, when set, are required of routes and presented on
	// the routes this server opens.
	User     string
	Password string
	// TLS, when it has a certificate, makes routes mutual TLS: each side
	// presents Cert and verifies the other against CA.
	TLS TLSFiles
}

// LeafNodeConfig connects the embedded server to an upstream hub as a leaf
// node (nats.leafnode in the config file).
type LeafNodeConfig struct {
	// Remotes are the hub's leaf node URLs (nats-leaf://, nats://, tls://).
	Remotes []string
	// Credentials is a JWT creds file for the hub, "" for none.
	Credentials string
	// TLS verifies the hub against CA and presents Cert/Key if given.
	TLS TLSFiles
}

// EmbeddedServer is a running embedded nats-server. Its methods are safe for
// concurrent use.
type EmbeddedServer struct {
	srv        *server.Server
	clientURL  string
	routeURL   string
	monitorURL string
	once       sync.Once
}

// StartEmbedded starts a nats-server as described by cfg and returns once it
// accepts client connections. It never installs signal handlers. If the
// server cannot listen (a bad address, a port in use) or is not ready within
// 10 seconds, StartEmbedded shuts it down and returns an error. Routes and
// leaf node connections are made in the background: a peer that is down is
// retried for as long as the server runs.
func StartEmbedded(cfg EmbeddedConfig) (*EmbeddedServer, error) {
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
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
	fail := func(reason string) (*EmbeddedServer, error) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("edge: embedded nats-server (%s) cannot start: %s", listenKeys(cfg), reason)
	}
	if srv.Addr() == nil || (cfg.MonitorPort != 0 && srv.MonitorAddr() == nil) {
		// A listener never came up, so waiting would only burn the
		// timeout: fail now, with the reason the server logged.
		reason := log.fatal()
		if reason == "" {
			reason = "the server did not open its listeners"
		}
		return fail(reason)
	}
	// The route listener comes up in the server's own goroutine; a failure
	// there is logged as fatal, which ends the wait at once.
	deadline := time.Now().Add(readyTimeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		if reason := log.fatal(); reason != "" {
			return fail(reason)
		}
		if time.Now().After(deadline) {
			return fail(fmt.Sprintf("not ready for connections after %s", readyTimeout))
		}
	}
	tcp, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		return fail(fmt.Sprintf("unexpected listener address %v", srv.Addr()))
	}
	e := &EmbeddedServer{
		srv:       srv,
		clientURL: "nats://" + net.JoinHostPort(dialHost(opts.Host), strconv.Itoa(tcp.Port)),
	}
	if a := srv.ClusterAddr(); a != nil {
		e.routeURL = "nats-route://" + net.JoinHostPort(dialHost(opts.Cluster.Host), strconv.Itoa(a.Port))
	}
	if a := srv.MonitorAddr(); a != nil {
		e.monitorURL = "http://" + net.JoinHostPort(opts.HTTPHost, strconv.Itoa(a.Port))
	}
	return e, nil
}

// listenKeys names the config keys of the listeners cfg opens, for an error
// about one that did not come up.
func listenKeys(cfg EmbeddedConfig) string {
	keys := "nats_listen " + cfg.Listen
	if cfg.Cluster != nil {
		keys += ", nats.cluster.listen " + cfg.Cluster.Listen
	}
	if cfg.MonitorPort != 0 {
		keys += ", nats.monitor_port " + strconv.Itoa(cfg.MonitorPort)
	}
	return keys
}

// serverOptions turns cfg into nats-server options. It reads the TLS files
// it names but opens no connection. Errors name the config key.
func serverOptions(cfg EmbeddedConfig) (*server.Options, error) {
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
	if err := applyClientAuth(opts, cfg.Auth); err != nil {
		return nil, err
	}
	if err := applyMemberAuthz(opts, cfg.Members); err != nil {
		return nil, err
	}
	if err := applySystem(opts, cfg.System, cfg.Auth, cfg.Members); err != nil {
		return nil, err
	}
	if !cfg.TLS.IsZero() {
		tc, err := serverTLS("nats.tls", cfg.TLS, false)
		if err != nil {
			return nil, err
		}
		opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = tc, cfg.TLS.CA != "", tlsTimeout
	}
	switch {
	case cfg.MonitorPort == 0:
	case cfg.MonitorPort == -1 || (cfg.MonitorPort > 0 && cfg.MonitorPort <= 65535):
		// Monitoring tells anyone who can reach it the site's topology and
		// clients: it stays on loopback, for an operator on the gateway.
		opts.HTTPHost, opts.HTTPPort = "127.0.0.1", cfg.MonitorPort
		if cfg.MonitorPort == -1 {
			opts.HTTPPort = server.RANDOM_PORT
		}
	default:
		return nil, fmt.Errorf("edge: nats.monitor_port: %d is not a port 1..65535 (0 turns monitoring off)", cfg.MonitorPort)
	}
	if c := cfg.Cluster; c != nil {
		if err := applyCluster(opts, c); err != nil {
			return nil, err
		}
	}
	if l := cfg.LeafNode; l != nil {
		if err := applyLeafNode(opts, l); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// applySystem adds a system account with user u, and an application account
// that clients without credentials land in.
func applySystem(opts *server.Options, u *SystemUser, auth ClientAuth, members *MemberAuthz) error {
	if u == nil {
		return nil
	}
	if auth != (ClientAuth{}) || members != nil {
		return errors.New("edge: a system account user needs a server without other authentication")
	}
	if u.User == "" || u.Password == "" {
		return errors.New("edge: the system account user needs a name and a password")
	}
	app, sys := server.NewAccount("APP"), server.NewAccount("SYS")
	opts.Accounts = []*server.Account{app, sys}
	opts.SystemAccount = "SYS"
	opts.Users = []*server.User{
		{Username: "app", Password: u.Password + "-app", Account: app},
		{Username: u.User, Password: u.Password, Account: sys},
	}
	opts.NoAuthUser = "app"
	return nil
}

// tlsTimeout is the TLS handshake timeout, in seconds, of every listener.
const tlsTimeout = 2

// applyClientAuth makes the server require a of its clients.
func applyClientAuth(opts *server.Options, a ClientAuth) error {
	n := 0
	for _, set := range []bool{a.User != "" || a.Password != "", a.Token != "", a.NKey != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("edge: nats: give at most one of nats.user/nats.password, nats.token and nats.nkey_seed for the embedded server")
	}
	switch {
	case a.User != "" || a.Password != "":
		if a.User == "" || a.Password == "" {
			return errors.New("edge: nats.user: a user and a password go together")
		}
		opts.Username, opts.Password = a.User, a.Password
	case a.Token != "":
		opts.Authorization = a.Token
	case a.NKey != "":
		if !nkeys.IsValidPublicUserKey(a.NKey) {
			return fmt.Errorf("edge: nats.nkey_seed: %q is not a user public nkey", a.NKey)
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: a.NKey}}
	}
	return nil
}

// applyMemberAuthz admits the members by nkey, each with publish rights on
// its own election subjects only, and turns a site credential set by
// applyClientAuth into a restricted user for the other clients.
func applyMemberAuthz(opts *server.Options, m *MemberAuthz) error {
	if m == nil {
		return nil
	}
	if opts.Authorization != "" || len(opts.Nkeys) > 0 {
		return errors.New("edge: member_keys: with per-member authorization, admit other clients with nats.user/nats.password, not a token or an nkey")
	}
	opts.Nkeys = append(MemberUsers(m.Prefix, m.Group, m.Keys, nil), OperatorUsers(m.Prefix, m.Group, m.Operators, nil)...)
	if opts.Username != "" {
		opts.Users = []*server.User{{Username: opts.Username, Password: opts.Password, Permissions: BusClientPermissions(m.Prefix, false)}}
		opts.Username, opts.Password = "", ""
	}
	return nil
}

// applyCluster sets the route listener, the routes and their security.
func applyCluster(opts *server.Options, c *ClusterConfig) error {
	if c.Name == "" {
		return errors.New("edge: nats.cluster.name: a cluster name is required, the same on every gateway")
	}
	if strings.ContainsAny(c.Name, " \t\r\n.*>") {
		return fmt.Errorf("edge: nats.cluster.name: %q may not contain spaces, '.', '*' or '>'", c.Name)
	}
	host, port, err := parseHostPort("nats.cluster.listen", c.Listen)
	if err != nil {
		return err
	}
	opts.Cluster.Name = c.Name
	opts.Cluster.Host = host
	opts.Cluster.Port = port
	if port == 0 {
		opts.Cluster.Port = server.RANDOM_PORT
	}
	if (c.User == "") != (c.Password == "") {
		return errors.New("edge: nats.cluster.user: a route user and password go together")
	}
	opts.Cluster.Username, opts.Cluster.Password = c.User, c.Password
	// One route connection per pair of gateways, not nats-server's pool
	// (three connections, plus one pinned to the system account). The
	// pool's connections form one by one and race their twins from the
	// other side; one lost race leaves a pool slot empty for the 1 s route
	// reconnect delay, while the peer still shows as routed: the account
	// hashed to that slot then gets nothing from the peer, so a member can
	// miss a new leader's COORDINATOR and heartbeats for a second after a
	// gateway restarts (docs/DESIGN-NOTES.md, fast failover). A single
	// connection is routed or it is not, which is also what the agent's
	// route watcher assumes; a site's few messages never needed a pool.
	opts.Cluster.PoolSize = -1
	for _, r := range c.Routes {
		u, err := ParseRouteURL(r)
		if err != nil {
			return fmt.Errorf("edge: nats.cluster.routes: %w", err)
		}
		if c.User != "" {
			u.User = url.UserPassword(c.User, c.Password)
		}
		opts.Routes = append(opts.Routes, u)
	}
	if !c.TLS.IsZero() {
		tc, err := serverTLS("nats.cluster.tls", c.TLS, true)
		if err != nil {
			return err
		}
		opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = tc, tlsTimeout
	}
	return nil
}

// applyLeafNode adds the upstream hub as a leaf node remote.
func applyLeafNode(opts *server.Options, l *LeafNodeConfig) error {
	if len(l.Remotes) == 0 {
		return errors.New("edge: nats.leafnode.remotes: give the hub's leaf node URLs")
	}
	remote := &server.RemoteLeafOpts{Credentials: l.Credentials}
	for _, r := range l.Remotes {
		u, err := ParseLeafURL(r)
		if err != nil {
			return fmt.Errorf("edge: nats.leafnode.remotes: %w", err)
		}
		remote.URLs = append(remote.URLs, u)
	}
	if !l.TLS.IsZero() {
		tc, err := clientTLS("nats.leafnode.tls", l.TLS)
		if err != nil {
			return err
		}
		remote.TLS, remote.TLSConfig, remote.TLSTimeout = true, tc, tlsTimeout
	}
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	return nil
}

// serverTLS builds the tls.Config of a listener from files. mutual requires
// and verifies the peers' certificates (routes always do, since each side is
// also the other's client); otherwise a CA turns on client verification.
func serverTLS(key string, f TLSFiles, mutual bool) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("edge: %s: a listener needs both cert and key", key)
	}
	if mutual && f.CA == "" {
		return nil, fmt.Errorf("edge: %s.ca: routes verify each other: give the CA that signed the gateways' certificates", key)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: f.Cert, KeyFile: f.Key, CaFile: f.CA, Verify: f.CA != "", Timeout: tlsTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("edge: %s: %w", key, err)
	}
	if mutual {
		// The same config dials the other servers: trust the same CA.
		tc.RootCAs = tc.ClientCAs
	}
	return tc, nil
}

// clientTLS builds the tls.Config the server uses to dial out (a leaf node
// remote): verify against CA, present Cert/Key if given.
func clientTLS(key string, f TLSFiles) (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("edge: %s: cert and key go together", key)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.Cert, KeyFile: f.Key, CaFile: f.CA, Timeout: tlsTimeout})
	if err != nil {
		return nil, fmt.Errorf("edge: %s: %w", key, err)
	}
	tc.RootCAs = tc.ClientCAs
	tc.ClientCAs = nil
	return tc, nil
}

// ParseRouteURL checks a cluster route URL: nats-route://, nats:// or tls://
// with a host and a port, and nothing else. It resolves no name.
func ParseRouteURL(s string) (*url.URL, error) {
	return parseServerURL(s, "nats-route", 6222, "nats-route", "nats", "tls")
}

// ParseLeafURL checks a leaf node remote URL: nats-leaf://, nats:// or
// tls:// with a host (the port defaults to 7422). It resolves no name.
func ParseLeafURL(s string) (*url.URL, error) {
	return parseServerURL(s, "nats-leaf", 7422, "nats-leaf", "nats", "tls")
}

// parseServerURL parses s and checks its scheme, host and port; a missing
// port is set to defPort.
func parseServerURL(s, what string, defPort int, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	shown := RedactURL(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not a %s URL (%s://host:port)", shown, what, what)
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || u.Scheme == sc
	}
	if !ok {
		return nil, fmt.Errorf("%q: the scheme must be one of %s", shown, strings.Join(schemes, "://, ")+"://")
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q has no host", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a number 1..65535", shown, p)
		}
	} else {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(defPort))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: a server URL has no path, query or fragment", shown)
	}
	return u, nil
}

// parseListen splits a host:port listen address and checks the port range.
// Errors name the config key, nats_listen.
func parseListen(listen string) (host string, port int, err error) {
	return parseHostPort("nats_listen", listen)
}

// parseHostPort splits the listen address of config key key into host and
// port; an empty host means every interface.
func parseHostPort(key, listen string) (host string, port int, err error) {
	if listen == "" {
		return "", 0, fmt.Errorf("edge: %s: an address host:port is required (port 0 picks a free port)", key)
	}
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("edge: %s: %q is not a host:port address: %w", key, listen, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("edge: %s: %q: port %q is not a number in 0..65535", key, listen, p)
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

// RouteURL returns the URL other servers route to, nats-route://host:port,
// with the port the route listener actually uses (a wildcard host is given
// as loopback), or "" when the server is not clustered.
func (e *EmbeddedServer) RouteURL() string { return e.routeURL }

// MonitorURL returns the base URL of the monitoring endpoints,
// http://127.0.0.1:port, or "" when monitoring is off.
func (e *EmbeddedServer) MonitorURL() string { return e.monitorURL }

// NumRoutes returns the number of routes to other servers open now.
func (e *EmbeddedServer) NumRoutes() int { return e.srv.NumRoutes() }

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

// ServerID returns the server's unique id, as clients see it in INFO.
func (e *EmbeddedServer) ServerID() string { return e.srv.ID() }

// RoutedServerNames returns the servers this one has a route to now, id ->
// name (the name each server was given, EmbeddedConfig.ServerName).
func (e *EmbeddedServer) RoutedServerNames() map[string]string {
	rz, err := e.srv.Routez(&server.RoutezOptions{})
	out := map[string]string{}
	if err != nil || rz == nil {
		return out
	}
	for _, r := range rz.Routes {
		out[r.RemoteID] = r.RemoteName
	}
	return out
}

// RoutedServers returns the ids of the servers this one has a route to now.
// An agent watches it to learn at once that a peer gateway's server (and so,
// at an offline site, that gateway's agent) is gone.
func (e *EmbeddedServer) RoutedServers() map[string]bool {
	rz, err := e.srv.Routez(&server.RoutezOptions{})
	out := map[string]bool{}
	if err != nil || rz == nil {
		return out
	}
	for _, r := range rz.Routes {
		out[r.RemoteID] = true
	}
	return out
}
