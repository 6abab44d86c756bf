package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/edge"
)

// Defaults of the embedded server's cluster.
const defaultClusterListen = "0.0.0.0:6222"

// natsSettings are the NATS security, cluster and leaf node settings: how
// the agent's connection authenticates (to an external deployment or to the
// site's embedded servers) and how the embedded server clusters with the
// other gateways'. They follow the core settings in the documentation.
var natsSettings = []setting{
	{key: "nats.creds", flag: "nats-creds", usage: "JWT creds `FILE` for an operator-mode NATS deployment",
		set: func(rc *runConfig, s string) error { rc.NATSClient.Creds = s; return nil }},
	{key: "nats.nkey_seed", flag: "nats-nkey-seed", usage: "`FILE` holding a user nkey seed (SU...); an embedded server requires its public key",
		set: func(rc *runConfig, s string) error { rc.NATSClient.NKeySeed = s; return nil }},
	{key: "nats.user", flag: "nats-user", usage: "NATS `USER` (with nats.password); an embedded server requires it",
		set: func(rc *runConfig, s string) error { rc.NATSClient.User = s; return nil }},
	{key: "nats.password", flag: "nats-password", usage: "NATS `PASSWORD` of nats.user (prefer the config file: flags show in ps)",
		set: func(rc *runConfig, s string) error { rc.NATSClient.Password = s; return nil }},
	{key: "nats.token", flag: "nats-token", usage: "NATS auth `TOKEN`; an embedded server requires it",
		set: func(rc *runConfig, s string) error { rc.NATSClient.Token = s; return nil }},
	{key: "nats.tls.ca", flag: "nats-tls-ca", usage: "CA `FILE` (PEM) that verifies the NATS servers; with an embedded server's TLS, the clients too",
		set: func(rc *runConfig, s string) error { rc.NATSClient.TLS.CA = s; return nil }},
	{key: "nats.tls.cert", flag: "nats-tls-cert", usage: "certificate `FILE` (PEM): the client certificate, and the embedded server's",
		set: func(rc *runConfig, s string) error { rc.NATSClient.TLS.Cert = s; return nil }},
	{key: "nats.tls.key", flag: "nats-tls-key", usage: "private key `FILE` (PEM) of nats.tls.cert",
		set: func(rc *runConfig, s string) error { rc.NATSClient.TLS.Key = s; return nil }},
	{key: "nats.monitor_port", flag: "nats-monitor-port", usage: "embedded server monitoring `PORT` on 127.0.0.1; 0 turns it off (default 0)",
		set: func(rc *runConfig, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 || n > 65535 {
				return fmt.Errorf("%q is not a port 0..65535 (0 turns monitoring off)", s)
			}
			rc.NATSMonitorPort = n
			return nil
		}},
	{key: "nats.cluster.name", flag: "nats-cluster-name", usage: "cluster `NAME` of the embedded servers, the same on every gateway (default the group)",
		set: func(rc *runConfig, s string) error { clusterOf(rc).Name = s; return nil }},
	{key: "nats.cluster.listen", flag: "nats-cluster-listen", usage: "embedded server route address `HOST:PORT` (default " + defaultClusterListen + ")",
		set: func(rc *runConfig, s string) error {
			if err := checkHostPort(s); err != nil {
				return err
			}
			clusterOf(rc).Listen = s
			return nil
		}},
	{key: "nats.cluster.routes", flag: "nats-cluster-routes", usage: "the gateways' route `URL[,URL...]` (nats-route://host:6222); this gateway's own is ignored",
		set: func(rc *runConfig, s string) error {
			routes, err := parseList(s, checkRouteURL)
			clusterOf(rc).Routes = routes
			return err
		},
		fromFile: listFromFile("nats.cluster.routes", checkRouteURL, func(rc *runConfig, l []string) { clusterOf(rc).Routes = l })},
	{key: "nats.cluster.user", flag: "nats-cluster-user", usage: "route `USER` (with nats.cluster.password), required of and presented to the other servers",
		set: func(rc *runConfig, s string) error { clusterOf(rc).User = s; return nil }},
	{key: "nats.cluster.password", flag: "nats-cluster-password", usage: "route `PASSWORD` of nats.cluster.user",
		set: func(rc *runConfig, s string) error { clusterOf(rc).Password = s; return nil }},
	{key: "nats.cluster.tls.ca", flag: "nats-cluster-tls-ca", usage: "CA `FILE` (PEM) that routes verify each other with (mutual TLS)",
		set: func(rc *runConfig, s string) error { clusterOf(rc).TLS.CA = s; return nil }},
	{key: "nats.cluster.tls.cert", flag: "nats-cluster-tls-cert", usage: "route certificate `FILE` (PEM)",
		set: func(rc *runConfig, s string) error { clusterOf(rc).TLS.Cert = s; return nil }},
	{key: "nats.cluster.tls.key", flag: "nats-cluster-tls-key", usage: "route private key `FILE` (PEM)",
		set: func(rc *runConfig, s string) error { clusterOf(rc).TLS.Key = s; return nil }},
	{key: "nats.leafnode.remotes", flag: "nats-leafnode-remotes", usage: "upstream hub leaf node `URL[,URL...]` (nats-leaf://, nats:// or tls://)",
		set: func(rc *runConfig, s string) error {
			remotes, err := parseList(s, checkLeafURL)
			leafOf(rc).Remotes = remotes
			return err
		},
		fromFile: listFromFile("nats.leafnode.remotes", checkLeafURL, func(rc *runConfig, l []string) { leafOf(rc).Remotes = l })},
	{key: "nats.leafnode.creds", flag: "nats-leafnode-creds", usage: "JWT creds `FILE` for the hub",
		set: func(rc *runConfig, s string) error { leafOf(rc).Credentials = s; return nil }},
	{key: "nats.leafnode.tls.ca", flag: "nats-leafnode-tls-ca", usage: "CA `FILE` (PEM) that verifies the hub",
		set: func(rc *runConfig, s string) error { leafOf(rc).TLS.CA = s; return nil }},
	{key: "nats.leafnode.tls.cert", flag: "nats-leafnode-tls-cert", usage: "client certificate `FILE` (PEM) for the hub",
		set: func(rc *runConfig, s string) error { leafOf(rc).TLS.Cert = s; return nil }},
	{key: "nats.leafnode.tls.key", flag: "nats-leafnode-tls-key", usage: "private key `FILE` (PEM) of nats.leafnode.tls.cert",
		set: func(rc *runConfig, s string) error { leafOf(rc).TLS.Key = s; return nil }},
}

// clusterOf returns rc's cluster settings, creating them on first use: any
// nats.cluster key turns clustering on.
func clusterOf(rc *runConfig) *edge.ClusterConfig {
	if rc.NATSCluster == nil {
		rc.NATSCluster = &edge.ClusterConfig{}
	}
	return rc.NATSCluster
}

// leafOf returns rc's leaf node settings, creating them on first use.
func leafOf(rc *runConfig) *edge.LeafNodeConfig {
	if rc.NATSLeafNode == nil {
		rc.NATSLeafNode = &edge.LeafNodeConfig{}
	}
	return rc.NATSLeafNode
}

func checkRouteURL(s string) error { _, err := edge.ParseRouteURL(s); return err }

func checkLeafURL(s string) error { _, err := edge.ParseLeafURL(s); return err }

// parseList parses "A[,B...]", checking each item. An empty string gives
// no items.
func parseList(s string, check func(string) error) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%q: empty item between commas", s)
		}
		if err := check(item); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// listFromFile returns a fromFile that reads key as a list of strings, or
// one comma-separated string, checking each item.
func listFromFile(key string, check func(string) error, assign func(*runConfig, []string)) func(*loader, *runConfig, *yaml.Node) error {
	return func(l *loader, rc *runConfig, n *yaml.Node) error {
		switch n.Kind {
		case yaml.ScalarNode:
			items, err := parseList(n.Value, check)
			if err != nil {
				return l.fileErrorf(n, key, "%v", err)
			}
			assign(rc, items)
			return nil
		case yaml.SequenceNode:
		default:
			return l.fileErrorf(n, key, "must be a list of URLs, not a %s", kindName(n))
		}
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return l.fileErrorf(item, key, "each URL must be a string, not a %s", kindName(item))
			}
			v := strings.TrimSpace(item.Value)
			if err := check(v); err != nil {
				return l.fileErrorf(item, key, "%v", err)
			}
			items = append(items, v)
		}
		assign(rc, items)
		return nil
	}
}

// fileNATSTLS, fileClusterTLS and fileLeafTLS are the tls: sections under
// nats, nats.cluster and nats.leafnode. They are distinct types so that a
// YAML error about an unknown key can name the section.
type fileNATSTLS struct {
	CA   yaml.Node `yaml:"ca"`
	Cert yaml.Node `yaml:"cert"`
	Key  yaml.Node `yaml:"key"`
}

type fileClusterTLS struct {
	CA   yaml.Node `yaml:"ca"`
	Cert yaml.Node `yaml:"cert"`
	Key  yaml.Node `yaml:"key"`
}

type fileLeafTLS struct {
	CA   yaml.Node `yaml:"ca"`
	Cert yaml.Node `yaml:"cert"`
	Key  yaml.Node `yaml:"key"`
}

// fileCluster is the `nats: cluster:` section.
type fileCluster struct {
	Name     yaml.Node       `yaml:"name"`
	Listen   yaml.Node       `yaml:"listen"`
	Routes   yaml.Node       `yaml:"routes"`
	User     yaml.Node       `yaml:"user"`
	Password yaml.Node       `yaml:"password"`
	TLS      *fileClusterTLS `yaml:"tls"`
}

// fileLeafNode is the `nats: leafnode:` section.
type fileLeafNode struct {
	Remotes yaml.Node    `yaml:"remotes"`
	Creds   yaml.Node    `yaml:"creds"`
	TLS     *fileLeafTLS `yaml:"tls"`
}

// natsNodes adds the nodes of the nats section's security, cluster and leaf
// node keys to m.
func (n *fileNATS) natsNodes(m map[string]*yaml.Node) {
	m["nats.creds"] = &n.Creds
	m["nats.nkey_seed"] = &n.NKeySeed
	m["nats.user"] = &n.User
	m["nats.password"] = &n.Password
	m["nats.token"] = &n.Token
	m["nats.monitor_port"] = &n.MonitorPort
	t := n.TLS
	if t == nil {
		t = &fileNATSTLS{}
	}
	m["nats.tls.ca"], m["nats.tls.cert"], m["nats.tls.key"] = &t.CA, &t.Cert, &t.Key
	c := n.Cluster
	if c == nil {
		c = &fileCluster{}
	}
	m["nats.cluster.name"] = &c.Name
	m["nats.cluster.listen"] = &c.Listen
	m["nats.cluster.routes"] = &c.Routes
	m["nats.cluster.user"] = &c.User
	m["nats.cluster.password"] = &c.Password
	ct := c.TLS
	if ct == nil {
		ct = &fileClusterTLS{}
	}
	m["nats.cluster.tls.ca"], m["nats.cluster.tls.cert"], m["nats.cluster.tls.key"] = &ct.CA, &ct.Cert, &ct.Key
	lf := n.LeafNode
	if lf == nil {
		lf = &fileLeafNode{}
	}
	m["nats.leafnode.remotes"] = &lf.Remotes
	m["nats.leafnode.creds"] = &lf.Creds
	lt := lf.TLS
	if lt == nil {
		lt = &fileLeafTLS{}
	}
	m["nats.leafnode.tls.ca"], m["nats.leafnode.tls.cert"], m["nats.leafnode.tls.key"] = &lt.CA, &lt.Cert, &lt.Key
}

// sections maps the Go type of each nested section of the file to its key,
// for YAML errors about a key the section does not have.
var sections = []struct {
	typ reflect.Type
	key string
}{
	{reflect.TypeFor[fileNATS](), "nats"},
	{reflect.TypeFor[fileNATSTLS](), "nats.tls"},
	{reflect.TypeFor[fileCluster](), "nats.cluster"},
	{reflect.TypeFor[fileClusterTLS](), "nats.cluster.tls"},
	{reflect.TypeFor[fileLeafNode](), "nats.leafnode"},
	{reflect.TypeFor[fileLeafTLS](), "nats.leafnode.tls"},
}

// sectionKeys lists the keys a section type takes, "urls, embedded, ...".
func sectionKeys(typ reflect.Type) string {
	var keys []string
	for f := range typ.Fields() {
		keys = append(keys, f.Tag.Get("yaml"))
	}
	return strings.Join(keys, ", ")
}

// finishNATS validates the NATS settings once every source is applied. The
// server-side settings (cluster, leaf node, monitoring) are dropped without
// an embedded server, as nats.listen is, so a file can keep them while
// embedded is switched off.
func (l *loader) finishNATS(rc *runConfig) error {
	c := rc.NATSClient
	switch {
	case c.Creds != "" && (c.NKeySeed != "" || c.User != "" || c.Password != "" || c.Token != ""),
		c.NKeySeed != "" && (c.User != "" || c.Password != "" || c.Token != ""),
		(c.User != "" || c.Password != "") && c.Token != "":
		return l.errorf("nats", "give at most one of nats.creds, nats.nkey_seed, nats.user/nats.password and nats.token")
	case c.User == "" && c.Password != "":
		return l.errorf("nats.password", "needs nats.user")
	case c.User != "" && c.Password == "":
		return l.errorf("nats.user", "needs nats.password")
	case (c.TLS.Cert == "") != (c.TLS.Key == ""):
		return l.errorf("nats.tls.cert", "nats.tls.cert and nats.tls.key go together")
	}
	if !rc.EmbeddedNATS {
		rc.NATSMonitorPort, rc.NATSCluster, rc.NATSLeafNode = 0, nil, nil
		return nil
	}
	// Disconnect advisories come from the system account of an external
	// deployment. The embedded servers have no system-account users, and on
	// an embedded cluster a dead leader's server dies with it, so no
	// advisory would come anyway: refuse rather than connect to nothing.
	for _, k := range []struct{ key, val string }{{"nats.system_user", rc.SystemUser}, {"nats.system_creds", rc.SystemCreds}} {
		if k.val != "" {
			return l.errorf(k.key, "fast failover through disconnect advisories needs an external NATS deployment's system account; with nats.embedded the agents rely on missed heartbeats")
		}
	}
	if c.Creds != "" {
		return l.errorf("nats.creds", "a creds file (JWT) needs an operator-mode NATS deployment; an embedded server takes nats.nkey_seed, nats.user/nats.password or nats.token")
	}
	if c.TLS.CA != "" && c.TLS.Cert == "" {
		return l.errorf("nats.tls.cert", "an embedded server that verifies clients (nats.tls.ca) needs its own certificate and key")
	}
	if cl := rc.NATSCluster; cl != nil {
		if cl.Name == "" {
			cl.Name = rc.Agent.Group
		}
		if strings.ContainsAny(cl.Name, " \t\r\n.*>") {
			return l.errorf("nats.cluster.name", "%q may not contain spaces, '.', '*' or '>'", cl.Name)
		}
		if cl.Listen == "" {
			cl.Listen = defaultClusterListen
		}
		if (cl.User == "") != (cl.Password == "") {
			return l.errorf("nats.cluster.user", "nats.cluster.user and nats.cluster.password go together")
		}
		if !cl.TLS.IsZero() && (cl.TLS.CA == "" || cl.TLS.Cert == "" || cl.TLS.Key == "") {
			return l.errorf("nats.cluster.tls", "routes are mutual TLS: give ca, cert and key")
		}
	}
	if lf := rc.NATSLeafNode; lf != nil {
		if len(lf.Remotes) == 0 {
			return l.errorf("nats.leafnode.remotes", "give the hub's leaf node URLs (or drop nats.leafnode)")
		}
		if (lf.TLS.Cert == "") != (lf.TLS.Key == "") {
			return l.errorf("nats.leafnode.tls.cert", "nats.leafnode.tls.cert and nats.leafnode.tls.key go together")
		}
	}
	return nil
}

// files returns the files the configuration names, by key, for
// check-config to check that they are there and readable.
func (rc *runConfig) files() [][2]string {
	var out [][2]string
	add := func(key, path string) {
		if path != "" {
			out = append(out, [2]string{key, path})
		}
	}
	c := rc.NATSClient
	add("nats.creds", c.Creds)
	add("nats.nkey_seed", c.NKeySeed)
	add("nats.tls.ca", c.TLS.CA)
	add("nats.tls.cert", c.TLS.Cert)
	add("nats.tls.key", c.TLS.Key)
	if cl := rc.NATSCluster; cl != nil {
		add("nats.cluster.tls.ca", cl.TLS.CA)
		add("nats.cluster.tls.cert", cl.TLS.Cert)
		add("nats.cluster.tls.key", cl.TLS.Key)
	}
	if lf := rc.NATSLeafNode; lf != nil {
		add("nats.leafnode.creds", lf.Credentials)
		add("nats.leafnode.tls.ca", lf.TLS.CA)
		add("nats.leafnode.tls.cert", lf.TLS.Cert)
		add("nats.leafnode.tls.key", lf.TLS.Key)
	}
	return out
}
