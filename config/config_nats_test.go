package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/config/configtest"
	"github.com/edge-agent/edge-agent/edge"
)

func TestLoadConfigNATSCluster(t *testing.T) {
	rc, err := LoadFile(configtest.Write(t, configtest.ClusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	gw := edge.TLSFiles{CA: "/etc/edge-agent/ca.pem", Cert: "/etc/edge-agent/gw.pem", Key: "/etc/edge-agent/gw.key"}
	if want := (edge.ClientConfig{User: "site", Password: "s3cret", TLS: gw}); rc.NATSClient != want {
		t.Errorf("NATSClient = %+v, want %+v", rc.NATSClient, want)
	}
	if rc.NATSMonitorPort != 8222 {
		t.Errorf("NATSMonitorPort = %d", rc.NATSMonitorPort)
	}
	wantCluster := &edge.ClusterConfig{
		Name: "site-a", Listen: "0.0.0.0:6222",
		Routes: []string{"nats-route://gw1.site.lan:6222", "nats-route://gw2.site.lan:6222", "nats-route://gw3.site.lan"},
		User:   "route", Password: "r0ute", TLS: gw,
	}
	if !reflect.DeepEqual(rc.NATSCluster, wantCluster) {
		t.Errorf("NATSCluster = %+v, want %+v", rc.NATSCluster, wantCluster)
	}
	wantLeaf := &edge.LeafNodeConfig{Remotes: []string{"tls://hub.example.com:7422"}, Credentials: "/etc/edge-agent/hub.creds", TLS: edge.TLSFiles{CA: "/etc/edge-agent/hub-ca.pem"}}
	if !reflect.DeepEqual(rc.NATSLeafNode, wantLeaf) {
		t.Errorf("NATSLeafNode = %+v, want %+v", rc.NATSLeafNode, wantLeaf)
	}
	// Every file the config names is listed for check-config.
	if got := len(rc.Files()); got != 8 {
		t.Errorf("files() lists %d files, want 8: %v", got, rc.Files())
	}
}

func TestLoadConfigNATSFlags(t *testing.T) {
	rc, err := Load(withFlags(
		"--nats-listen", "127.0.0.1:4222",
		"--nats-cluster-routes", "nats-route://127.0.0.1:6222, nats-route://127.0.0.1:6223",
		"--nats-token", "t0ken",
		"--nats-monitor-port", "0",
	))
	if err != nil {
		t.Fatal(err)
	}
	// The cluster name defaults to the group, the route listener to :6222.
	want := &edge.ClusterConfig{Name: "site-a", Listen: DefaultClusterListen, Routes: []string{"nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223"}}
	if !reflect.DeepEqual(rc.NATSCluster, want) || rc.NATSClient.Token != "t0ken" {
		t.Errorf("cluster %+v, token %q; want %+v, t0ken", rc.NATSCluster, rc.NATSClient.Token, want)
	}
}

func TestLoadConfigNATSServerSettingsNeedEmbedded(t *testing.T) {
	// As with listen: the server side is kept in the file but dropped while
	// embedded is off; the client side (auth, TLS) stays.
	rc, err := LoadFile(configtest.Write(t, strings.Replace(configtest.ClusterYAML, "embedded: true", "embedded: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if rc.NATSCluster != nil || rc.NATSLeafNode != nil || rc.NATSMonitorPort != 0 || rc.NATSListen != "" {
		t.Errorf("server settings kept without an embedded server: %+v %+v %d %q", rc.NATSCluster, rc.NATSLeafNode, rc.NATSMonitorPort, rc.NATSListen)
	}
	if rc.NATSClient.User != "site" {
		t.Errorf("client settings dropped: %+v", rc.NATSClient)
	}
}

func TestLoadConfigNATSErrors(t *testing.T) {
	base := configtest.BaseYAML(map[string]string{"nats": ""})
	for _, tc := range []struct {
		name, nats string
		want       string
		key        string
	}{
		{"unknown cluster key", "nats:\n  embedded: true\n  cluster: {nam: x}", "field nats.cluster.nam not found (nats.cluster takes name, listen, routes, user, password, tls)", "nats.cluster.nam"},
		{"unknown tls key", "nats:\n  urls: nats://a\n  tls: {cafile: x}", "field nats.tls.cafile not found", "nats.tls.cafile"},
		{"cluster not a mapping", "nats:\n  embedded: true\n  cluster: gw1", "nats.cluster: must be a mapping with name", "nats.cluster"},
		{"bad route scheme", "nats:\n  embedded: true\n  cluster: {routes: [\"http://gw2:6222\"]}", `nats.cluster.routes: "http://gw2:6222": the scheme must be one of`, "nats.cluster.routes"},
		{"route without host", "nats:\n  embedded: true\n  cluster: {routes: \"nats-route://:6222\"}", "nats.cluster.routes", "nats.cluster.routes"},
		{"bad cluster listen", "nats:\n  embedded: true\n  cluster: {listen: gw1}", `nats.cluster.listen: "gw1" is not host:port`, "nats.cluster.listen"},
		{"bad cluster name", "nats:\n  embedded: true\n  cluster: {name: a.b}", "nats.cluster.name", "nats.cluster.name"},
		{"route user alone", "nats:\n  embedded: true\n  cluster: {user: r}", "nats.cluster.user and nats.cluster.password go together", "nats.cluster.user"},
		{"route tls partial", "nats:\n  embedded: true\n  cluster: {tls: {cert: c, key: k}}", "routes are mutual TLS", "nats.cluster.tls"},
		{"bad monitor port", "nats:\n  embedded: true\n  monitor_port: 99999", `nats.monitor_port: "99999" is not a port`, "nats.monitor_port"},
		{"two credentials", "nats:\n  urls: nats://a\n  user: u\n  password: p\n  token: t", "at most one of nats.creds", "nats"},
		{"password alone", "nats:\n  urls: nats://a\n  password: p", "nats.password: needs nats.user", "nats.password"},
		{"tls cert alone", "nats:\n  urls: nats://a\n  tls: {cert: c}", "nats.tls.cert and nats.tls.key go together", "nats.tls.cert"},
		{"creds with embedded", "nats:\n  embedded: true\n  creds: /etc/x.creds", "nats.creds: a creds file (JWT) needs an operator-mode", "nats.creds"},
		{"server tls needs cert", "nats:\n  embedded: true\n  tls: {ca: ca.pem}", "nats.tls.cert: an embedded server that verifies clients", "nats.tls.cert"},
		{"system user with embedded", "nats:\n  embedded: true\n  system_user: sys\n  system_password: x", "nats.system_user: fast failover through disconnect advisories needs an external", "nats.system_user"},
		{"leafnode without remotes", "nats:\n  embedded: true\n  leafnode: {creds: x}", "nats.leafnode.remotes: give the hub's leaf node URLs", "nats.leafnode.remotes"},
		{"bad leaf url", "nats:\n  embedded: true\n  leafnode: {remotes: [\"hub:7422\"]}", "nats.leafnode.remotes", "nats.leafnode.remotes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(configtest.Write(t, base+tc.nats+"\n"))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q does not contain %q on one line", err, tc.want)
			}
			if ce.Key != tc.key {
				t.Errorf("Key = %q, want %q", ce.Key, tc.key)
			}
		})
	}
}

// TestShippedConfigPasses: the config the .deb installs as a conffile is
// refused as shipped, naming id and telling to set it (a gateway whose id
// was forgotten must not join as another gateway); with an id it is valid,
// names no file, and needs no network: its hosts are examples that resolve
// nowhere.
func TestShippedConfigPasses(t *testing.T) {
	const shipped = "../deploy/arm64/edge-agent.yaml"
	_, err := LoadFile(shipped)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "id" || !strings.Contains(err.Error(), `"CHANGE-ME" is the packaged placeholder: set id to this gateway's member id (one of members: gw1, gw2, gw3), or give --id`) {
		t.Fatalf("shipped config as is: %v; want the placeholder id refused", err)
	}
	rc, err := Load([]string{"--config", shipped, "--id", "gw2"})
	if err != nil {
		t.Fatal(err)
	}
	if !rc.EmbeddedNATS || rc.NATSCluster == nil || len(rc.NATSCluster.Routes) != 3 || rc.NATSMonitorPort != 0 {
		t.Errorf("shipped config: embedded %v, cluster %+v, monitor %d; want an embedded cluster of 3 routes, monitoring off", rc.EmbeddedNATS, rc.NATSCluster, rc.NATSMonitorPort)
	}
	if f := rc.Files(); len(f) != 0 {
		t.Errorf("shipped config names files: %v", f)
	}
}
