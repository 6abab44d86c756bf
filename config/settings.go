package config

import (
	"strings"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge"
)

// setting is one configurable value, declared once: its key in the file
// (dotted: "nats.urls" is urls under nats), its flag of `edge-agent run`,
// the flag's help (a `QUOTED` word names the value), and where its value
// goes. The file's sections are the keys' prefixes.
type setting struct {
	key, flag, usage string
	val              value
}

// settings returns every setting, in the order of the documentation, with
// its value bound to l's Config (the cluster and leaf node settings to l's
// own, which finish attaches when one of their keys is set).
func (l *loader) settings() []setting {
	return append(append(l.coreSettings(), l.natsSettings()...), l.opsSettings()...)
}

// coreSettings are the election, bus and process settings.
func (l *loader) coreSettings() []setting {
	c, a := l.c, &l.c.Agent
	return []setting{
		{"id", "id", "this gateway's member `ID` (must be in members)", text(&a.ID)},
		{"group", "group", "election group `NAME`", text(&a.Group)},
		{"members", "members", "the group's members, `ID[=PRIORITY],...` (priority defaults to 0)", members{&a.Members}},
		{"witnesses", "witnesses", "the members that vote but never lead (a two-gateway site's third vote), `ID[,ID...]`; the same on every member", idList{&a.Witnesses}},
		{"algorithm", "algorithm", "election `ALGORITHM`: bully or ring (default bully)", text(&a.Algorithm)},
		{"quorum", "quorum", "quorum `SIZE`, or none for island mode (default a majority of members)", quorum{a}},
		{"nats.urls", "nats-url", "NATS server `URL[,URL...]` (nats:// or tls://)", urls{&c.NATSURLs, checkNATSURL, "URL"}},
		{"nats.embedded", "embedded-nats", "run an embedded NATS server", boolean{p: &c.EmbeddedNATS}},
		{"nats.listen", "nats-listen", "embedded NATS server client address `HOST:PORT` (default " + DefaultNATSListen + ")", hostPort(&c.NATSListen, "")},
		{"heartbeat", "heartbeat", "leader heartbeat period `DURATION` (default 1s)", duration(&a.Heartbeat)},
		{"heartbeat_misses", "heartbeat-misses", "missed heartbeats `N` before the leader is suspected (default 3)", integer(&a.HeartbeatMisses)},
		{"lease", "lease", "leader lease `DURATION` (default heartbeat_misses*heartbeat - heartbeat - 2 ticks)", duration(&a.Lease)},
		{"answer_timeout", "answer-timeout", "wait for an answer, a coordinator or votes, `DURATION` (default heartbeat)", duration(&a.AnswerTimeout)},
		{"preemption", "preemption", "how a returning higher-ranked member takes over, `POLICY`: hold-down, never or immediate (default hold-down)", text(&a.Preemption)},
		{"hold_down", "hold-down", "healthy `DURATION` before a hold-down handover (default 10*heartbeat)", duration(&a.HoldDown)},
		{"state_dir", "state-dir", "`DIR` where the term and vote are persisted", text(&a.StateDir)},
		{"subject_prefix", "subject-prefix", "NATS subject `PREFIX` (default " + agent.DefaultSubjectPrefix + ")", text(&a.SubjectPrefix)},
		{"http_addr", "http-addr", "HTTP `HOST:PORT` for /metrics, /healthz, /readyz, /status; \"\" or off disables (default " + DefaultHTTPAddr + ")", hostPort(&c.HTTPAddr, "", "off")},
		{"log_format", "log-format", "log `FORMAT`: text or json (default text)", oneOf(&c.LogFormat, "text", "json")},
		{"log_level", "log-level", "log `LEVEL`: debug, info, warn or error (default info)", oneOf(&c.LogLevel, "debug", "info", "warn", "error")},
		{"fast_failover", "fast-failover", "elect at once when the NATS server reports the leader's connection closed (default true)", boolean{&a.DisableFastFailover, true}},
		{"fast_failover_fence", "fast-failover-fence", "how long a leader elected on such a report waits before it acts, `DURATION` (default one tick, heartbeat/10; none after a leader without leader.* work, unless set above one tick)", duration(&a.Fence)},
		{"nats.system_user", "nats-system-user", "`USER` of the NATS system account, to read disconnect advisories", text(&c.SystemUser)},
		{"nats.system_password", "nats-system-password", "`PASSWORD` of nats.system_user", text(&c.SystemPassword)},
		{"nats.system_creds", "nats-system-creds", "credentials `FILE` of a system account user, to read disconnect advisories", text(&c.SystemCreds)},
		{"signing_seed", "signing-seed", "this member's nkey seed `FILE`: sign every election message and accept only signed ones", text(&a.SigningSeedFile)},
		{"member_keys", "member-keys", "pinned nkey public keys of the members, `ID=KEY,...`", keyMap{&a.MemberKeys, "ID"}},
		{"operator_keys", "operator-keys", "nkey public keys of the operators' tools allowed on the control subjects, `NAME=KEY,...` (needs signing_seed and member_keys)", keyMap{&a.OperatorKeys, "NAME"}},
		{"journal", "journal", "append leadership intervals and votes as JSON lines to `FILE` (an audit log; fault tests read it)", text(&c.Journal)},
	}
}

// natsSettings are how the agent's connection authenticates (to an
// external deployment or to the site's embedded servers), and how the
// embedded server clusters with the other gateways' and joins a hub.
func (l *loader) natsSettings() []setting {
	c, cl, lf := l.c, &l.cluster, &l.leaf
	return []setting{
		{"nats.creds", "nats-creds", "JWT creds `FILE` for an operator-mode NATS deployment", text(&c.NATSClient.Creds)},
		{"nats.nkey_seed", "nats-nkey-seed", "`FILE` holding a user nkey seed (SU...); an embedded server requires its public key", text(&c.NATSClient.NKeySeed)},
		{"nats.user", "nats-user", "NATS `USER` (with nats.password); an embedded server requires it", text(&c.NATSClient.User)},
		{"nats.password", "nats-password", "NATS `PASSWORD` of nats.user (prefer the config file: flags show in ps)", text(&c.NATSClient.Password)},
		{"nats.token", "nats-token", "NATS auth `TOKEN`; an embedded server requires it", text(&c.NATSClient.Token)},
		{"nats.tls.ca", "nats-tls-ca", "CA `FILE` (PEM) that verifies the NATS servers; with an embedded server's TLS, the clients too", text(&c.NATSClient.TLS.CA)},
		{"nats.tls.cert", "nats-tls-cert", "certificate `FILE` (PEM): the client certificate, and the embedded server's", text(&c.NATSClient.TLS.Cert)},
		{"nats.tls.key", "nats-tls-key", "private key `FILE` (PEM) of nats.tls.cert", text(&c.NATSClient.TLS.Key)},
		{"nats.monitor_port", "nats-monitor-port", "embedded server monitoring `PORT` on 127.0.0.1; 0 turns it off (default 0)", port(&c.NATSMonitorPort)},
		{"nats.cluster.name", "nats-cluster-name", "cluster `NAME` of the embedded servers, the same on every gateway (default the group)", text(&cl.Name)},
		{"nats.cluster.listen", "nats-cluster-listen", "embedded server route address `HOST:PORT` (default " + DefaultClusterListen + ")", hostPort(&cl.Listen)},
		{"nats.cluster.routes", "nats-cluster-routes", "the gateways' route `URL[,URL...]` (nats-route://host:6222); this gateway's own is ignored", urls{&cl.Routes, checkRouteURL, "item"}},
		{"nats.cluster.user", "nats-cluster-user", "route `USER` (with nats.cluster.password), required of and presented to the other servers", text(&cl.User)},
		{"nats.cluster.password", "nats-cluster-password", "route `PASSWORD` of nats.cluster.user", text(&cl.Password)},
		{"nats.cluster.tls.ca", "nats-cluster-tls-ca", "CA `FILE` (PEM) that routes verify each other with (mutual TLS)", text(&cl.TLS.CA)},
		{"nats.cluster.tls.cert", "nats-cluster-tls-cert", "route certificate `FILE` (PEM)", text(&cl.TLS.Cert)},
		{"nats.cluster.tls.key", "nats-cluster-tls-key", "route private key `FILE` (PEM)", text(&cl.TLS.Key)},
		{"nats.leafnode.remotes", "nats-leafnode-remotes", "upstream hub leaf node `URL[,URL...]` (nats-leaf://, nats:// or tls://)", urls{&lf.Remotes, checkLeafURL, "item"}},
		{"nats.leafnode.creds", "nats-leafnode-creds", "JWT creds `FILE` for the hub", text(&lf.Credentials)},
		{"nats.leafnode.tls.ca", "nats-leafnode-tls-ca", "CA `FILE` (PEM) that verifies the hub", text(&lf.TLS.CA)},
		{"nats.leafnode.tls.cert", "nats-leafnode-tls-cert", "client certificate `FILE` (PEM) for the hub", text(&lf.TLS.Cert)},
		{"nats.leafnode.tls.key", "nats-leafnode-tls-key", "private key `FILE` (PEM) of nats.leafnode.tls.cert", text(&lf.TLS.Key)},
	}
}

// opsSettings are the Pushgateway push and the leader duty.
func (l *loader) opsSettings() []setting {
	c := l.c
	return []setting{
		{"pushgateway.url", "pushgateway-url", "push metrics to the Prometheus Pushgateway at `URL` (http:// or https://); none by default", pushURL(&c.Push.URL)},
		{"pushgateway.interval", "push-interval", "time between pushes, `DURATION` (default 15s); a leader change pushes at once", duration(&c.Push.Interval)},
		{"pushgateway.job", "pushgateway-job", "job label of the pushed metrics, `NAME` (default " + edge.DefaultPushJob + ")", trimmed(&c.Push.Job)},
		{"leader.command", "leader-command", "the leader duty: `COMMAND` run while this gateway leads, as a list [\"prog\", \"arg\"] or words split at spaces", strList{&c.Duty.Command, true}},
		{"leader.grace", "leader-grace", "time between SIGTERM and SIGKILL of the duty, `DURATION`, shorter than the lease (default lease - heartbeat - 1 tick)", duration(&c.Duty.Grace)},
		{"leader.on_elected", "leader-on-elected", "one-shot `COMMAND` run when this gateway becomes leader, before the duty starts", strList{&c.Duty.OnElected, true}},
		{"leader.on_demoted", "leader-on-demoted", "one-shot `COMMAND` run when this gateway stops leading, after the duty stopped", strList{&c.Duty.OnDemoted, true}},
		{"leader.hook_timeout", "leader-hook-timeout", "time limit of on_elected and on_demoted, `DURATION` (default 10s)", duration(&c.Duty.HookTimeout)},
		{"leader.max_failures", "leader-max-failures", "duty exits within failure_window, `N`, after which the leader resigns (default 5)", integer(&c.Duty.MaxFailures)},
		{"leader.failure_window", "leader-failure-window", "period over which duty failures count, `DURATION` (default 1m)", duration(&c.Duty.FailureWindow)},
		{"leader.env", "leader-env", "environment of the duty and hooks besides the documented one: `LIST` of KEY=VALUE (set) or KEY (pass the agent's value), as [\"A=1\", \"B\"] or words split at spaces", strList{&c.Duty.Env, false}},
		{"leader.vip", "leader-vip", "virtual IPs held while this gateway leads, `ADDR/LEN@IFACE[,...]` (192.0.2.10/24@eth0), or in the file a list of {address, interface}; needs CAP_NET_ADMIN and CAP_NET_RAW", vipList{&c.Duty.VIP}},
	}
}

// setting returns the setting of key, or nil.
func (l *loader) setting(key string) *setting {
	for i := range l.table {
		if l.table[i].key == key {
			return &l.table[i]
		}
	}
	return nil
}

// sectionKeys returns the keys directly under section ("" for the top of
// the file), in the order of the table, each once: for "nats.cluster",
// "name", "listen", ..., "tls". It is empty when section is not a section.
func (l *loader) sectionKeys(section string) []string {
	prefix := section + "."
	if section == "" {
		prefix = ""
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range l.table {
		rest, ok := strings.CutPrefix(s.key, prefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}
