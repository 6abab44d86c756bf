package chaos

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// RoutePingInterval is how often the clustered servers of a Bus ping each
// other over their route, and RouteMaxPingsOut how many unanswered pings
// close it. A route that is cut (reset) is noticed at once; a black-holed
// route only after about RoutePingInterval*(RouteMaxPingsOut+1). Agents never
// depend on either: a leader keeps its lease only on acknowledgements from a
// quorum, so how fast the servers notice a split changes recovery times,
// never safety.
const (
	RoutePingInterval = 2 * time.Second
	RouteMaxPingsOut  = 2
)

// SystemUser and SystemPassword log in to the system account of a server
// started with ServerConfig.SystemAccount, where its client disconnect
// advisories are published (the agents' fast failover path). Clients
// without credentials land in an application account.
const (
	SystemUser     = "sys"
	SystemPassword = "sys-secret"
)

// ServerConfig describes a Server.
type ServerConfig struct {
	Name string
	// Clustered servers listen for routes and solicit Routes
	// (nats-route://host:port).
	Clustered bool
	Routes    []string
	// SystemAccount gives the server a system account (SystemUser) beside
	// the application account that clients without credentials land in.
	SystemAccount bool
	// RouteAdvertise, if set, is the route address (host:port) the server
	// tells its peers, which they dial for an implicit route (one learned
	// from another server's gossip rather than configured). A Mesh points
	// it at a sink that closes every connection, so that no server walks
	// around a cut route proxy straight to a peer's cluster port.
	RouteAdvertise string
}

// Server is an in-process nats-server on loopback ports that stay the same
// across restarts, so that clients and routes reconnect to it.
type Server struct {
	name   string
	routes []*url.URL
	sys    bool

	mu          sync.Mutex
	srv         *server.Server
	clientPort  int
	clusterPort int // 0 when not clustered
	clustered   bool
	advertise   string
}

// StartServer starts a nats-server on free loopback ports, reserved below
// the ephemeral range (harness.FreePorts) so that a restart finds them free.
func StartServer(c ServerConfig) (*Server, error) {
	ports, err := harness.FreePorts(2)
	if err != nil {
		return nil, fmt.Errorf("chaos: server %s: %w", c.Name, err)
	}
	s := &Server{name: c.Name, clustered: c.Clustered, sys: c.SystemAccount, clientPort: ports[0], advertise: c.RouteAdvertise}
	if c.Clustered {
		s.clusterPort = ports[1]
	}
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("chaos: server %s: route %q: %w", c.Name, r, err)
		}
		s.routes = append(s.routes, u)
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the server (again) on its ports.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return fmt.Errorf("chaos: server %s already running", s.name)
	}
	opts := &server.Options{
		ServerName: s.name,
		Host:       "127.0.0.1",
		Port:       s.clientPort,
		NoLog:      true,
		NoSigs:     true,
	}
	if s.sys {
		app, sys := server.NewAccount("APP"), server.NewAccount("SYS")
		opts.Accounts = []*server.Account{app, sys}
		opts.SystemAccount = "SYS"
		opts.Users = []*server.User{
			{Username: "app", Password: "app", Account: app},
			{Username: SystemUser, Password: SystemPassword, Account: sys},
		}
		opts.NoAuthUser = "app"
	}
	if s.clustered {
		opts.Cluster = server.ClusterOpts{
			Name:         "chaos",
			Host:         "127.0.0.1",
			Port:         s.clusterPort,
			PingInterval: RoutePingInterval,
			MaxPingsOut:  RouteMaxPingsOut,
			// A clustered server advertises its peers' client URLs
			// (connect_urls in INFO), and a client reconnects to them
			// when its own server is unreachable: an agent whose proxy
			// is cut would walk around the fault straight to a server.
			NoAdvertise: true,
			Advertise:   s.advertise,
		}
		opts.Routes = s.routes
	}
	// A restart reuses the server's ports; they lie outside the ephemeral
	// range, but a start that does not come up (a socket of the last run
	// not yet gone) is still retried a few times before it counts as a
	// failure.
	var srv *server.Server
	for attempt := 1; ; attempt++ {
		var err error
		srv, err = server.NewServer(opts)
		if err != nil {
			return fmt.Errorf("chaos: server %s: %w", s.name, err)
		}
		go srv.Start()
		if srv.ReadyForConnections(5*time.Second) && (!s.clustered || srv.ClusterAddr() != nil) {
			break
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		if attempt == 5 {
			return fmt.Errorf("chaos: server %s not ready after %d attempts", s.name, attempt)
		}
		time.Sleep(500 * time.Millisecond) // let a transient holder of the port go
	}
	s.srv = srv
	s.clientPort = srv.Addr().(*net.TCPAddr).Port
	if s.clustered {
		ca := srv.ClusterAddr()
		if ca == nil {
			srv.Shutdown()
			s.srv = nil
			return fmt.Errorf("chaos: server %s has no cluster listener", s.name)
		}
		s.clusterPort = ca.Port
	}
	return nil
}

// Stop shuts the server down; its clients and routes see the connection
// close.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server, keeps it down for down, and starts it again on
// the same ports.
func (s *Server) Restart(down time.Duration) error {
	s.Stop()
	time.Sleep(down) // holding the fault for a chosen time
	return s.Start()
}

// ClientAddr is host:port for clients.
func (s *Server) ClientAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))
}

// ClientURL is the client address as a NATS URL.
func (s *Server) ClientURL() string { return "nats://" + s.ClientAddr() }

// ClusterAddr is host:port for routes.
func (s *Server) ClusterAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clusterPort))
}

// NumRoutes is the number of route connections (0 while stopped).
func (s *Server) NumRoutes() int {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return 0
	}
	return srv.NumRoutes()
}

// NumClients is the number of client connections (0 while stopped).
func (s *Server) NumClients() int {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return 0
	}
	return srv.NumClients()
}

// RoutedTo returns the names of the servers this one has a route to (none
// while stopped).
func (s *Server) RoutedTo() []string {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	rz, err := srv.Routez(&server.RoutezOptions{})
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var names []string
	for _, r := range rz.Routes {
		if !seen[r.RemoteName] {
			seen[r.RemoteName] = true
			names = append(names, r.RemoteName)
		}
	}
	sort.Strings(names)
	return names
}

// Bus is the NATS side of a split-able site: two servers, A and B,
// clustered by one route that B solicits through Route, a raw Proxy. Cutting
// Route splits the bus in two while every client stays connected to its own
// server.
type Bus struct {
	A, B  *Server
	Route *Proxy
}

// NewBus starts A, the route proxy and B, and waits until the route is up.
// With systemAccount both servers have a system account (see ServerConfig),
// and the disconnect advisories of either reach clients of both.
func NewBus(seed uint64, systemAccount bool) (*Bus, error) {
	a, err := StartServer(ServerConfig{Name: "A", Clustered: true, SystemAccount: systemAccount})
	if err != nil {
		return nil, err
	}
	route, err := NewProxy(ProxyConfig{Name: "route", Target: a.ClusterAddr(), Mode: Raw, Seed: seed})
	if err != nil {
		a.Stop()
		return nil, err
	}
	b, err := StartServer(ServerConfig{Name: "B", Clustered: true, SystemAccount: systemAccount,
		Routes: []string{"nats-route://" + route.Addr()}})
	if err != nil {
		route.Close()
		a.Stop()
		return nil, err
	}
	bus := &Bus{A: a, B: b, Route: route}
	if err := bus.WaitRouted(10 * time.Second); err != nil {
		bus.Close()
		return nil, err
	}
	return bus, nil
}

// Routed reports whether both servers have a route to each other.
func (b *Bus) Routed() bool { return b.A.NumRoutes() > 0 && b.B.NumRoutes() > 0 }

// WaitRouted polls every 5 ms until both servers are routed, or fails after
// timeout. The interval is fixed (poll.Every): the partition scenario dates
// the bus whole again by its return.
func (b *Bus) WaitRouted(timeout time.Duration) error {
	err := poll.Every(5*time.Millisecond, timeout, "servers A and B to be routed", func() (bool, string) {
		return b.Routed(), fmt.Sprintf("routes: A %d, B %d", b.A.NumRoutes(), b.B.NumRoutes())
	})
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// Close stops both servers and the route proxy.
func (b *Bus) Close() {
	b.B.Stop()
	b.A.Stop()
	b.Route.Close()
}

// Mesh is the NATS side of a site where every member has its own server:
// n servers clustered in a full mesh of routes, each route through its own
// raw Proxy. NATS does not forward between two servers through a third
// (a full mesh is its only cluster topology), so cutting the route between
// two servers separates their clients while both still reach every other
// server. No server can walk around a cut route: every server advertises a
// sink as its route address (see ServerConfig.RouteAdvertise), so the
// implicit routes that gossip would otherwise make straight to a peer's
// cluster port are refused, and only the configured routes, through the
// proxies, carry traffic.
type Mesh struct {
	names   []string
	servers map[string]*Server
	routes  map[[2]string]*Proxy
	sink    net.Listener
	refused atomic.Uint64
}

func pairKey(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// NewMesh starts one server per name, in order, each soliciting a route to
// every server started before it through a new route proxy, and waits until
// every pair is routed.
func NewMesh(seed uint64, names ...string) (*Mesh, error) {
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: mesh sink: %w", err)
	}
	m := &Mesh{names: names, servers: map[string]*Server{}, routes: map[[2]string]*Proxy{}, sink: sink}
	go m.refuse()
	for i, name := range names {
		var urls []string
		for j, peer := range names[:i] {
			p, err := NewProxy(ProxyConfig{Name: "route " + peer + "-" + name, Target: m.servers[peer].ClusterAddr(),
				Mode: Raw, Seed: seed + uint64(100*i+j)})
			if err != nil {
				m.Close()
				return nil, err
			}
			m.routes[pairKey(peer, name)] = p
			urls = append(urls, "nats-route://"+p.Addr())
		}
		s, err := StartServer(ServerConfig{Name: name, Clustered: true, Routes: urls, RouteAdvertise: sink.Addr().String()})
		if err != nil {
			m.Close()
			return nil, err
		}
		m.servers[name] = s
	}
	if err := m.WaitRouted(10 * time.Second); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// refuse closes every connection to the sink, counting them.
func (m *Mesh) refuse() {
	for {
		c, err := m.sink.Accept()
		if err != nil {
			return
		}
		m.refused.Add(1)
		c.Close()
	}
}

// Server returns the server of name.
func (m *Mesh) Server(name string) *Server { return m.servers[name] }

// Route returns the proxy on the route between the servers a and b.
func (m *Mesh) Route(a, b string) *Proxy { return m.routes[pairKey(a, b)] }

// ImplicitRefused is how many route connections the sink refused: implicit
// routes the servers tried after gossip.
func (m *Mesh) ImplicitRefused() uint64 { return m.refused.Load() }

// Routed reports whether every pair of servers has a route.
func (m *Mesh) Routed() bool {
	ok, _ := m.routed()
	return ok
}

func (m *Mesh) routed() (bool, string) {
	var why []string
	ok := true
	for _, name := range m.names {
		to := m.servers[name].RoutedTo()
		if len(to) != len(m.names)-1 {
			ok = false
		}
		why = append(why, fmt.Sprintf("%s->%v", name, to))
	}
	return ok, strings.Join(why, " ")
}

// WaitRouted polls every 5 ms until every pair is routed, or fails after
// timeout.
func (m *Mesh) WaitRouted(timeout time.Duration) error {
	err := poll.Every(5*time.Millisecond, timeout, "every pair of servers to be routed", m.routed)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// Heal lifts every fault on every route.
func (m *Mesh) Heal() {
	for _, p := range m.routes {
		p.Heal()
	}
}

// Close stops the servers, the route proxies and the sink.
func (m *Mesh) Close() {
	for i := len(m.names) - 1; i >= 0; i-- {
		if s := m.servers[m.names[i]]; s != nil {
			s.Stop()
		}
	}
	for _, p := range m.routes {
		p.Close()
	}
	m.sink.Close()
}
