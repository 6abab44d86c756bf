package edge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// connectVia connects to s the way the agent does: in-process through its
// dialer, with the given extra options.
func connectVia(t *testing.T, s *EmbeddedServer, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), append([]nats.Option{nats.SetCustomDialer(s.Dialer(2 * time.Second)), nats.DontRandomize()}, opts...)...)
	if err != nil {
		t.Fatalf("connect in-process to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// awaitDelivery publishes on pub until sub receives it: interest crosses
// routes and leaf connections asynchronously.
func awaitDelivery(t *testing.T, pub, sub *nats.Conn, subject string) {
	t.Helper()
	s, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a message on "+subject+" across the cluster", func() bool {
		if err := pub.Publish(subject, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		_, err := s.NextMsg(20 * time.Millisecond)
		return err == nil
	})
}

func TestEmbeddedClusterRoutes(t *testing.T) {
	cluster := func(routes ...string) *ClusterConfig {
		return &ClusterConfig{Name: "site", Listen: "127.0.0.1:0", Routes: routes}
	}
	s1 := startTestServer(t, EmbeddedConfig{ServerName: "gw1", Cluster: cluster()})
	if !strings.HasPrefix(s1.RouteURL(), "nats-route://127.0.0.1:") {
		t.Fatalf("RouteURL() = %q", s1.RouteURL())
	}
	// Every gateway may list every route, its own included.
	s2 := startTestServer(t, EmbeddedConfig{ServerName: "gw2", Cluster: cluster(s1.RouteURL())})
	s3 := startTestServer(t, EmbeddedConfig{ServerName: "gw3", Cluster: cluster(s1.RouteURL(), s2.RouteURL())})
	poll.Until(t, 5*time.Second, "a full mesh", func() bool { return s1.NumRoutes() >= 2 && s2.NumRoutes() >= 2 && s3.NumRoutes() >= 2 })
	// One route connection per peer, no pool: a peer listed by
	// RoutedServers carries every account (see applyCluster).
	for _, s := range []*EmbeddedServer{s1, s2, s3} {
		rz, err := s.srv.Routez(&server.RoutezOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rz.Routes) != 2 || len(s.RoutedServers()) != 2 {
			t.Errorf("%s: %d route connections to %d servers, want one to each of 2", s.ServerID(), len(rz.Routes), len(s.RoutedServers()))
		}
	}

	c1, c3 := connectVia(t, s1), connectVia(t, s3)
	awaitDelivery(t, c1, c3, "site.a")

	// gw1's server dies: gw2 and gw3 still carry messages between them.
	s1.Shutdown()
	c2 := connectVia(t, s2)
	awaitDelivery(t, c2, c3, "site.b")
}

func TestEmbeddedInProcessDialerFailsOver(t *testing.T) {
	own := startTestServer(t, EmbeddedConfig{ServerName: "own", Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0"}})
	peer := startTestServer(t, EmbeddedConfig{ServerName: "peer", Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0", Routes: []string{own.RouteURL()}}})
	nc, err := nats.Connect(own.ClientURL()+","+peer.ClientURL(),
		nats.SetCustomDialer(own.Dialer(time.Second)), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.ConnectedUrl(); got != own.ClientURL() {
		t.Fatalf("connected to %s, want its own server %s first", got, own.ClientURL())
	}
	if n := own.NumClients(); n != 1 {
		t.Fatalf("own server has %d clients, want the in-process one", n)
	}
	own.Shutdown()
	poll.Until(t, 5*time.Second, "failover to the peer", func() bool { return nc.IsConnected() && nc.ConnectedUrl() == peer.ClientURL() })
}

func TestEmbeddedClientAuthAndTLS(t *testing.T) {
	pki := newTestPKI(t)
	s := startTestServer(t, EmbeddedConfig{
		Auth: ClientAuth{User: "site", Password: "s3cret"},
		TLS:  TLSFiles{Cert: pki.cert, Key: pki.key},
	})
	// The agent's own connection: in-process, no TLS handshake even though
	// it trusts a CA (which makes nats.go want TLS), with the password.
	nc := connectVia(t, s, nats.UserInfo("site", "s3cret"), nats.RootCAs(pki.ca))
	if _, err := nc.TLSConnectionState(); err == nil {
		t.Error("the in-process connection went through TLS")
	}
	// Over TCP: TLS verified against the CA, and the password is required.
	tcp, err := nats.Connect(s.ClientURL(), nats.UserInfo("site", "s3cret"), nats.RootCAs(pki.ca))
	if err != nil {
		t.Fatalf("TLS client with the password: %v", err)
	}
	if _, err := tcp.TLSConnectionState(); err != nil {
		t.Errorf("TCP client not on TLS: %v", err)
	}
	tcp.Close()
	if nc, err := nats.Connect(s.ClientURL(), nats.RootCAs(pki.ca)); err == nil {
		nc.Close()
		t.Error("a client without the password was let in")
	}
}

func TestEmbeddedNKeyFromSeed(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	path := filepath.Join(t.TempDir(), "agent.nk")
	if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cc := ClientConfig{NKeySeed: path}
	auth, err := cc.ServerAuth()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	if auth.NKey != pub {
		t.Fatalf("ServerAuth().NKey = %q, want %q", auth.NKey, pub)
	}
	s := startTestServer(t, EmbeddedConfig{Auth: auth})
	opts, err := cc.Options()
	if err != nil {
		t.Fatal(err)
	}
	connectVia(t, s, opts...)
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Error("a client without the nkey was let in")
	}
}

func TestEmbeddedRouteTLS(t *testing.T) {
	pki := newTestPKI(t)
	tlsFiles := TLSFiles{CA: pki.ca, Cert: pki.cert, Key: pki.key}
	s1 := startTestServer(t, EmbeddedConfig{Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0", TLS: tlsFiles, User: "route", Password: "pw"}})
	s2 := startTestServer(t, EmbeddedConfig{Cluster: &ClusterConfig{Name: "site", Listen: "127.0.0.1:0", TLS: tlsFiles, User: "route", Password: "pw", Routes: []string{s1.RouteURL()}}})
	poll.Until(t, 5*time.Second, "a TLS route", func() bool { return s1.NumRoutes() >= 1 && s2.NumRoutes() >= 1 })
	awaitDelivery(t, connectVia(t, s1), connectVia(t, s2), "site.tls")
}

func TestEmbeddedLeafNode(t *testing.T) {
	// The server does not tell its leaf port: pick a free one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leafPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	hub, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}})
	if err != nil {
		t.Fatal(err)
	}
	go hub.Start()
	defer hub.Shutdown()
	if !hub.ReadyForConnections(10 * time.Second) {
		t.Fatal("hub not ready")
	}
	leafURL := fmt.Sprintf("nats-leaf://127.0.0.1:%d", leafPort)
	s := startTestServer(t, EmbeddedConfig{LeafNode: &LeafNodeConfig{Remotes: []string{leafURL}}})
	poll.Until(t, 5*time.Second, "the leaf connection", func() bool { return s.Server().NumLeafNodes() == 1 })
	hc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	awaitDelivery(t, connectVia(t, s), hc, "upstream.data")
}

func TestEmbeddedMonitorLoopbackOnly(t *testing.T) {
	off := startTestServer(t, EmbeddedConfig{})
	if off.MonitorURL() != "" {
		t.Errorf("monitoring on by default: %s", off.MonitorURL())
	}
	// Even a server listening on every interface monitors on loopback only.
	on := startTestServer(t, EmbeddedConfig{Listen: "0.0.0.0:0", MonitorPort: -1})
	if !strings.HasPrefix(on.MonitorURL(), "http://127.0.0.1:") {
		t.Fatalf("MonitorURL() = %q, want loopback", on.MonitorURL())
	}
	if ip := on.Server().MonitorAddr().IP; !ip.IsLoopback() {
		t.Fatalf("monitor bound to %s", ip)
	}
	resp, err := http.Get(on.MonitorURL() + "/varz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/varz: %s", resp.Status)
	}
}

func TestEmbeddedConfigErrorsNameKeys(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		cfg  EmbeddedConfig
		want string
	}{
		{EmbeddedConfig{Cluster: &ClusterConfig{Listen: "127.0.0.1:0"}}, "nats.cluster.name"},
		{EmbeddedConfig{Cluster: &ClusterConfig{Name: "a.b", Listen: "127.0.0.1:0"}}, "nats.cluster.name"},
		{EmbeddedConfig{Cluster: &ClusterConfig{Name: "s", Listen: "6222"}}, "nats.cluster.listen"},
		{EmbeddedConfig{Cluster: &ClusterConfig{Name: "s", Listen: "127.0.0.1:0", Routes: []string{"http://gw2:6222"}}}, "nats.cluster.routes"},
		{EmbeddedConfig{Cluster: &ClusterConfig{Name: "s", Listen: "127.0.0.1:0", User: "u"}}, "nats.cluster.user"},
		{EmbeddedConfig{Cluster: &ClusterConfig{Name: "s", Listen: "127.0.0.1:0", TLS: TLSFiles{Cert: pki.cert, Key: pki.key}}}, "nats.cluster.tls.ca"},
		{EmbeddedConfig{LeafNode: &LeafNodeConfig{}}, "nats.leafnode.remotes"},
		{EmbeddedConfig{LeafNode: &LeafNodeConfig{Remotes: []string{"gw:7422"}}}, "nats.leafnode.remotes"},
		{EmbeddedConfig{TLS: TLSFiles{CA: pki.ca}}, "nats.tls"},
		{EmbeddedConfig{TLS: TLSFiles{Cert: "/nonexistent.pem", Key: "/nonexistent.key"}}, "nats.tls"},
		{EmbeddedConfig{MonitorPort: 70000}, "nats.monitor_port"},
		{EmbeddedConfig{Auth: ClientAuth{User: "u", Token: "t"}}, "nats"},
		{EmbeddedConfig{Auth: ClientAuth{User: "u"}}, "nats.user"},
		{EmbeddedConfig{Auth: ClientAuth{NKey: "not-a-key"}}, "nats.nkey_seed"},
	} {
		if tc.cfg.Listen == "" {
			tc.cfg.Listen = "127.0.0.1:0"
		}
		s, err := StartEmbedded(tc.cfg)
		if err == nil {
			s.Shutdown()
			t.Errorf("StartEmbedded(%+v) succeeded", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartEmbedded(%+v): %q does not name %s", tc.cfg, err, tc.want)
		}
	}
}

func TestEmbeddedRouteListenInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	s, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", Cluster: &ClusterConfig{Name: "s", Listen: l.Addr().String()}})
	if err == nil {
		s.Shutdown()
		t.Fatal("a busy route port was accepted")
	}
	if !strings.Contains(err.Error(), "nats.cluster.listen") {
		t.Errorf("error %q does not name nats.cluster.listen", err)
	}
	if d := time.Since(start); d > readyTimeout/2 {
		t.Errorf("route port-in-use error took %s", d)
	}
}

func TestClientConfigRules(t *testing.T) {
	for _, tc := range []struct {
		c    ClientConfig
		want string
	}{
		{ClientConfig{Creds: "a", Token: "t"}, "at most one"},
		{ClientConfig{User: "u"}, "nats.user"},
		{ClientConfig{TLS: TLSFiles{Cert: "c"}}, "nats.tls"},
		{ClientConfig{Creds: "/nonexistent.creds"}, "nats.creds"},
		{ClientConfig{NKeySeed: "/nonexistent.nk"}, "nats.nkey_seed"},
	} {
		if _, err := tc.c.Options(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Options(%+v) = %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
	if _, err := (ClientConfig{Creds: "x.creds"}).ServerAuth(); err == nil || !strings.Contains(err.Error(), "nats.creds") {
		t.Errorf("ServerAuth with creds: %v, want an error naming nats.creds", err)
	}
}

// testPKI is a CA and one certificate, for 127.0.0.1 and localhost, good
// for both server and client authentication, as a site's gateway
// certificates would be.
type testPKI struct{ ca, cert, key string }

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "site CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gw"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "gw.pem"), key: filepath.Join(dir, "gw.key")}
	for path, block := range map[string]*pem.Block{
		p.ca:   {Type: "CERTIFICATE", Bytes: caDER},
		p.cert: {Type: "CERTIFICATE", Bytes: der},
		p.key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
