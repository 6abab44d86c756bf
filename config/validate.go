package config

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/duty"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/edge"
)

// PlaceholderID is the id of the packaged config file: not a gateway's id,
// so that a gateway whose id was never set refuses to start (and
// check-config says so) instead of joining its group as another gateway.
const PlaceholderID = "CHANGE-ME"

// finish validates l's Config once every source has been applied: the
// agent's Config (which fills its defaults) and then the binary's own
// rules.
func (l *loader) finish() (*Config, error) {
	c := l.c
	if l.setUnder("nats.cluster.") {
		c.NATSCluster = &l.cluster // any nats.cluster key turns clustering on
	}
	if l.setUnder("nats.leafnode.") {
		c.NATSLeafNode = &l.leaf
	}
	if c.Agent.ID == "" {
		return nil, l.errorf("id", "this gateway's member id is required")
	}
	if c.Agent.ID == PlaceholderID {
		ids := make([]string, len(c.Agent.Members))
		for i, m := range c.Agent.Members {
			ids[i] = m.ID
		}
		return nil, l.errorf("id", "%q is the packaged placeholder: set id to this gateway's member id (one of members: %s), or give --id", PlaceholderID, strings.Join(ids, ", "))
	}
	if c.Agent.Group == "" {
		return nil, l.errorf("group", "the election group name is required")
	}
	if err := c.Agent.Validate(); err != nil {
		return nil, l.keyedError(err)
	}
	if err := bus.CheckSigning(c.Agent); err != nil {
		return nil, l.keyedError(err)
	}
	if len(c.NATSURLs) == 0 && !c.EmbeddedNATS {
		return nil, l.errorf("nats", "give nats.urls (--nats-url) or nats.embedded (--embedded-nats)")
	}
	if c.EmbeddedNATS && ErrNoEmbeddedNATS != nil {
		return nil, l.errorf("nats.embedded", "%v", ErrNoEmbeddedNATS)
	}
	if !c.EmbeddedNATS {
		c.NATSListen = ""
	} else if c.NATSListen == "" {
		c.NATSListen = DefaultNATSListen
	}
	if err := l.finishNATS(); err != nil {
		return nil, err
	}
	if c.HTTPAddr == "off" {
		c.HTTPAddr = ""
	}
	if err := l.checkSecretFiles(); err != nil {
		return nil, err
	}
	if err := l.finishOps(); err != nil {
		return nil, err
	}
	return c, nil
}

// setUnder reports whether a key under prefix was set.
func (l *loader) setUnder(prefix string) bool {
	for key := range l.src {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// finishNATS validates the NATS settings. The server-side settings
// (cluster, leaf node, monitoring) are dropped without an embedded server,
// as nats.listen is, so a file can keep them while embedded is switched off.
func (l *loader) finishNATS() error {
	c := l.c.NATSClient
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
	if !l.c.EmbeddedNATS {
		l.c.NATSMonitorPort, l.c.NATSCluster, l.c.NATSLeafNode = 0, nil, nil
		return nil
	}
	// Disconnect advisories come from the system account of an external
	// deployment. The embedded servers have no system-account users, and on
	// an embedded cluster a dead leader's server dies with it, so no
	// advisory would come anyway: refuse rather than connect to nothing.
	for _, k := range []struct{ key, val string }{{"nats.system_user", l.c.SystemUser}, {"nats.system_creds", l.c.SystemCreds}} {
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
	if err := l.finishCluster(); err != nil {
		return err
	}
	if lf := l.c.NATSLeafNode; lf != nil {
		if len(lf.Remotes) == 0 {
			return l.errorf("nats.leafnode.remotes", "give the hub's leaf node URLs (or drop nats.leafnode)")
		}
		if (lf.TLS.Cert == "") != (lf.TLS.Key == "") {
			return l.errorf("nats.leafnode.tls.cert", "nats.leafnode.tls.cert and nats.leafnode.tls.key go together")
		}
	}
	return nil
}

// finishCluster fills the embedded cluster's defaults and checks it.
func (l *loader) finishCluster() error {
	cl := l.c.NATSCluster
	if cl == nil {
		return nil
	}
	if cl.Name == "" {
		cl.Name = l.c.Agent.Group
	}
	if strings.ContainsAny(cl.Name, " \t\r\n.*>") {
		return l.errorf("nats.cluster.name", "%q may not contain spaces, '.', '*' or '>'", cl.Name)
	}
	if cl.Listen == "" {
		cl.Listen = DefaultClusterListen
	}
	if (cl.User == "") != (cl.Password == "") {
		return l.errorf("nats.cluster.user", "nats.cluster.user and nats.cluster.password go together")
	}
	if !cl.TLS.IsZero() && (cl.TLS.CA == "" || cl.TLS.Cert == "" || cl.TLS.Key == "") {
		return l.errorf("nats.cluster.tls", "routes are mutual TLS: give ca, cert and key")
	}
	return nil
}

// finishOps validates the operations settings once the agent's config is
// valid (the duty's grace is checked against its lease). With no
// Pushgateway URL nothing is pushed; with no command and no hooks there is
// no duty, and the other leader keys are ignored.
func (l *loader) finishOps() error {
	c := l.c
	if c.Push.URL == "" {
		c.Push = edge.PushConfig{}
	} else if err := c.Push.Validate(); err != nil {
		return l.keyedError(err)
	}
	d := &c.Duty
	if len(d.Command) == 0 && len(d.OnElected) == 0 && len(d.OnDemoted) == 0 && len(d.VIP) == 0 {
		c.Duty = agent.DutyConfig{}
		return nil
	}
	if c.Agent.IsWitness(c.Agent.ID) {
		// A witness never leads: its duty and VIPs would never run. They
		// are dropped unchecked (a witness box need not have the duty's
		// program or the VIP's interface), so one site file serves every
		// member; run warns, check-config says so.
		c.Duty, c.DutyIgnored = agent.DutyConfig{}, true
		return nil
	}
	if err := d.Validate(c.Agent); err != nil {
		return l.keyedError(err)
	}
	// The interfaces must exist when the agent starts: a VIP on a missing
	// one would fail only at the first election, on the leader.
	if err := duty.CheckInterfaces(d.VIP); err != nil {
		return l.keyedError(err)
	}
	return nil
}

// File permissions. The config file names the leader duty, which the agent
// runs: one that others can write lets anyone on the gateway choose what the
// agent runs. Seeds, private keys and creds files are secrets: one that
// others can read lets anyone on the gateway speak as this member. Both are
// refused, by run and by check-config, naming the setting.

// checkConfigFileMode refuses a config file that others can write.
func checkConfigFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // reading it reports the error
	}
	if m := fi.Mode().Perm(); m&0o002 != 0 {
		return &Error{msg: fmt.Sprintf("config %s: writable by others (mode %04o): anyone on the gateway could change the leader duty the agent runs; chmod o-w %s", path, m, path)}
	}
	return nil
}

// checkSecretFiles refuses a secret file that others can read or write. A
// file that is missing is left to the checks that read it.
func (l *loader) checkSecretFiles() error {
	for _, f := range l.c.secretFiles() {
		fi, err := os.Stat(f[1])
		if err != nil {
			continue
		}
		if err := agent.CheckSecretFile(f[0], f[1]); err != nil {
			return l.errorf(f[0], "%s is readable or writable by others (mode %04o): it holds a secret; chmod o-rwx %s", f[1], fi.Mode().Perm(), f[1])
		}
	}
	return nil
}

// secretFiles returns the files of c that hold secrets, by key.
func (c *Config) secretFiles() [][2]string {
	var out [][2]string
	add := func(key, path string) {
		if path != "" {
			out = append(out, [2]string{key, path})
		}
	}
	add("signing_seed", c.Agent.SigningSeedFile)
	add("nats.creds", c.NATSClient.Creds)
	add("nats.nkey_seed", c.NATSClient.NKeySeed)
	add("nats.tls.key", c.NATSClient.TLS.Key)
	add("nats.system_creds", c.SystemCreds)
	if cl := c.NATSCluster; cl != nil {
		add("nats.cluster.tls.key", cl.TLS.Key)
	}
	if lf := c.NATSLeafNode; lf != nil {
		add("nats.leafnode.creds", lf.Credentials)
		add("nats.leafnode.tls.key", lf.TLS.Key)
	}
	return out
}

// Files returns the files the configuration names, by key ({key, path}),
// for check-config to check that they are there and readable.
func (c *Config) Files() [][2]string {
	var out [][2]string
	add := func(key, path string) {
		if path != "" {
			out = append(out, [2]string{key, path})
		}
	}
	n := c.NATSClient
	add("nats.creds", n.Creds)
	add("nats.nkey_seed", n.NKeySeed)
	add("nats.tls.ca", n.TLS.CA)
	add("nats.tls.cert", n.TLS.Cert)
	add("nats.tls.key", n.TLS.Key)
	if cl := c.NATSCluster; cl != nil {
		add("nats.cluster.tls.ca", cl.TLS.CA)
		add("nats.cluster.tls.cert", cl.TLS.Cert)
		add("nats.cluster.tls.key", cl.TLS.Key)
	}
	if lf := c.NATSLeafNode; lf != nil {
		add("nats.leafnode.creds", lf.Credentials)
		add("nats.leafnode.tls.ca", lf.TLS.CA)
		add("nats.leafnode.tls.cert", lf.TLS.Cert)
		add("nats.leafnode.tls.key", lf.TLS.Key)
	}
	return out
}

// Describe writes check-config's report of a valid configuration: the
// member and its timing, the bus, island mode, the push and the duty.
func (c *Config) Describe(w io.Writer) {
	a := c.Agent
	fmt.Fprintf(w, "config OK: member %s of group %s (%d members, quorum %d, %s), heartbeat %s, suspect after %s, lease %s\n",
		a.ID, a.Group, len(a.Members), a.Quorum, a.Algorithm, a.Heartbeat, a.SuspectAfter(), a.Lease)
	switch {
	case c.EmbeddedNATS && c.NATSCluster != nil:
		fmt.Fprintf(w, "embedded NATS on %s, cluster %s on %s with %d routes\n", c.NATSListen, c.NATSCluster.Name, c.NATSCluster.Listen, len(c.NATSCluster.Routes))
	case c.EmbeddedNATS:
		fmt.Fprintf(w, "embedded NATS on %s, standalone\n", c.NATSListen)
	default:
		fmt.Fprintf(w, "NATS: %s\n", strings.Join(edge.RedactURLs(c.NATSURLs), ", "))
	}
	if a.IslandMode {
		fmt.Fprintln(w, "warning: quorum: none (island mode): a partition can elect two leaders")
	}
	if len(a.Witnesses) > 0 {
		role := "a gateway"
		if a.IsWitness(a.ID) {
			role = "a witness: it votes and acknowledges heartbeats but never leads"
		}
		fmt.Fprintf(w, "witnesses: %s (this member is %s)\n", strings.Join(a.Witnesses, ", "), role)
	}
	if c.DutyIgnored {
		fmt.Fprintln(w, "note: this member is a witness: the leader duty and virtual IPs (leader.*) are ignored")
	}
	if c.Push.URL != "" {
		fmt.Fprintf(w, "pushing metrics to %s every %s (job %s, group %s, instance %s)\n",
			edge.RedactURL(c.Push.URL), c.Push.Interval, c.Push.Job, a.Group, a.ID)
	}
	if d := c.Duty; len(d.Command) > 0 {
		fmt.Fprintf(w, "leader duty: %s (grace %s, resign after %d failures within %s)\n",
			strings.Join(d.Command, " "), d.Grace, d.MaxFailures, d.FailureWindow)
	}
	for _, v := range c.Duty.VIP {
		fmt.Fprintf(w, "virtual IP: %s (held while this gateway leads; needs CAP_NET_ADMIN and CAP_NET_RAW)\n", v)
	}
}
