package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/edge/site"
)

// runAgent runs one gateway's agent until ctx ends: embedded NATS server if
// configured, the NATS connections, the HTTP endpoints, systemd
// notifications and the election.
func runAgent(ctx context.Context, rc *config.Config, log *slog.Logger) error {
	notifier, err := edge.NewSystemdNotifier(log)
	if err != nil {
		return err
	}
	var undo cleanup
	defer undo.run()
	var b *bus.Bus // the agent's bus, for the site page
	opts, err := agentOptions(rc, log, &undo, &b)
	if err != nil {
		return err
	}
	if rc.DutyIgnored {
		log.Warn("this member is a witness: it never leads, so the leader duty and virtual IPs of the config (leader.*) are ignored")
	}
	duty, dutyOpts := dutyFor(rc)
	// A duty that starts or stops is pushed at once: the push of the leader
	// change itself comes before the duty runs.
	var pushNow lateTrigger
	if duty != nil {
		dutyOpts = append(dutyOpts, agent.WithDutyHook(func(bool) { pushNow.fire() }))
	} else {
		// Nothing but /status and the metrics says this gateway leads, and
		// both read IsLeader: a successor elected on the server's report of
		// this agent's closed connection need not wait the fence.
		dutyOpts = append(dutyOpts, agent.WithNoLeaderWork())
	}
	a, err := agent.New(rc.Agent, append(opts, dutyOpts...)...)
	if err != nil {
		return err
	}
	// After Run returns: the duty's processes are gone, then the last push.
	stopPush, err := startPusher(rc, a, log, &pushNow)
	if err != nil {
		return err
	}
	undo.add(stopPush)
	if duty != nil {
		undo.add(duty.Wait)
	}
	if rc.HTTPAddr != "" {
		ln, err := net.Listen("tcp", rc.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http_addr %s: %w", rc.HTTPAddr, err)
		}
		srv := &http.Server{Handler: sitePage(a, b, log).Handler(a.Handler()), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		undo.add(func() { srv.Close() })
		log.Info("http listening", "addr", ln.Addr().String())
	}
	if notifier.Enabled() {
		if wd := notifier.Watchdog(); wd > 0 && wd <= 3*rc.Agent.Heartbeat {
			log.Warn("WatchdogSec is not above 3 heartbeats: a healthy but slow loop may be restarted", "watchdog", wd, "heartbeat", rc.Agent.Heartbeat)
		}
		done := make(chan struct{})
		go func() { defer close(done); notifier.Run(ctx, a) }()
		undo.add(func() { <-done })
	}
	return a.Run(ctx)
}

// sitePage is the site page of agent a at the HTTP address: a's view,
// with the other members' own answers asked over a's bus b.
func sitePage(a *agent.Agent, b *bus.Bus, log *slog.Logger) *site.Site {
	c := site.Config{Status: a.Status, Watch: a.Watch, Log: log}
	if b != nil {
		c.Ask = func(ctx context.Context, timeout time.Duration, wait []string) ([]site.Answer, error) {
			answers, err := b.GroupStatus(ctx, timeout, wait)
			out := make([]site.Answer, len(answers))
			for i, ans := range answers {
				out[i] = site.Answer{Report: ans.Report, At: ans.At}
			}
			return out, err
		}
	}
	return site.New(c)
}

// cleanup is what runAgent undoes when it returns, last first.
type cleanup []func()

func (c *cleanup) add(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// agentOptions connects the agent to NATS, starting the embedded server if
// configured, and opens the journal: the options of agent.New.
func agentOptions(rc *config.Config, log *slog.Logger, undo *cleanup, exposed **bus.Bus) ([]agent.Option, error) {
	client := rc.NATSClient
	if rc.EmbeddedNATS && len(rc.Agent.MemberKeys) > 0 {
		// Per-member authorization: the agent logs in to the bus with its
		// own nkey (the signing seed); the site credential is for others.
		client.User, client.Password, client.Token, client.Creds = "", "", "", ""
		client.NKeySeed = rc.Agent.SigningSeedFile
	}
	clientOpts, err := client.Options()
	if err != nil {
		return nil, err
	}
	urls := append([]string(nil), rc.NATSURLs...)
	var routeWatch agent.RouteWatcher
	if rc.EmbeddedNATS {
		srv, err := startEmbedded(rc, log)
		if err != nil {
			return nil, err
		}
		undo.add(srv.Shutdown)
		if rc.NATSCluster != nil {
			routeWatch = srv // a peer gateway's route closing is the fast failure report
		}
		// The agent's own server first, reached in-process; the peers'
		// servers (nats.urls) only if it ever goes away.
		urls = append([]string{srv.ClientURL()}, urls...)
		clientOpts = append(clientOpts, nats.SetCustomDialer(srv.Dialer(2*time.Second)), nats.DontRandomize())
	}
	// The connection name lets members match the server's disconnect
	// advisories to a member (fast failover).
	name := agent.ConnName(rc.Agent.Group, rc.Agent.ID)
	nc, err := nats.Connect(strings.Join(urls, ","), append(bus.NATSOptions(name), clientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", strings.Join(edge.RedactURLs(urls), ","), err)
	}
	undo.add(nc.Close)
	opts := []agent.Option{agent.WithLogger(log), agent.WithVersion(version)}
	if routeWatch != nil {
		opts = append(opts, agent.WithRouteWatch(routeWatch))
	}
	var busOpts []bus.Option
	if (rc.SystemUser != "" || rc.SystemCreds != "") && !rc.Agent.DisableFastFailover {
		more, err := advisoryOptions(rc, urls, clientOpts, undo)
		if err != nil {
			return nil, err
		}
		busOpts = more
	}
	opts = append(opts, bus.WithNATS(nc, append(busOpts, bus.Expose(exposed))...))
	if rc.Journal != "" {
		f, err := os.OpenFile(rc.Journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		undo.add(func() { f.Close() })
		opts = append(opts, agent.WithJournal(f))
	}
	return opts, nil
}

// advisoryOptions opens the connections of fast failover on an external
// deployment: one in the system account that reads the server's disconnect
// advisories, and the presence connection that the leader's heartbeats
// announce.
func advisoryOptions(rc *config.Config, urls []string, clientOpts []nats.Option, undo *cleanup) ([]bus.Option, error) {
	name := agent.ConnName(rc.Agent.Group, rc.Agent.ID)
	sysOpts := []nats.Option{nats.Name(name + "/advisories"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	// The same TLS as the election connection; its own credentials.
	tlsOpts, err := edge.ClientConfig{TLS: rc.NATSClient.TLS}.Options()
	if err != nil {
		return nil, err
	}
	sysOpts = append(sysOpts, tlsOpts...)
	if rc.SystemCreds != "" {
		sysOpts = append(sysOpts, nats.UserCredentials(rc.SystemCreds))
	} else {
		sysOpts = append(sysOpts, nats.UserInfo(rc.SystemUser, rc.SystemPassword))
	}
	sys, err := nats.Connect(strings.Join(urls, ","), sysOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS system account: %w", err)
	}
	undo.add(sys.Close)
	// The presence connection, which the leader's heartbeats announce: it
	// receives nothing, so a crash closes it with a FIN, never a reset
	// (bus.Presence). Same server, account and options as the
	// election connection.
	pres, err := nats.Connect(strings.Join(urls, ","), append(bus.NATSOptions(agent.PresenceConnName(rc.Agent.Group, rc.Agent.ID)), clientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS (presence connection): %w", err)
	}
	undo.add(pres.Close)
	return []bus.Option{bus.Advisories(sys), bus.Presence(pres)}, nil
}

// startEmbedded starts this gateway's nats-server, clustered and as a leaf
// node as configured, requiring of clients what the agent presents.
func startEmbedded(rc *config.Config, log *slog.Logger) (*edge.EmbeddedServer, error) {
	auth, err := rc.NATSClient.ServerAuth()
	if err != nil {
		return nil, err
	}
	var members *edge.MemberAuthz
	if len(rc.Agent.MemberKeys) > 0 {
		members = &edge.MemberAuthz{Prefix: rc.Agent.SubjectPrefix, Group: rc.Agent.Group, Keys: rc.Agent.MemberKeys, Operators: rc.Agent.OperatorKeys}
		if auth.NKey != "" || auth.Token != "" {
			return nil, errors.New("member_keys: with per-member authorization, admit other clients with nats.user/nats.password")
		}
	}
	srv, err := startServer(edge.EmbeddedConfig{
		Members:     members,
		Listen:      rc.NATSListen,
		ServerName:  agent.ServerName(rc.Agent.Group, rc.Agent.ID),
		Logger:      log,
		Auth:        auth,
		TLS:         serverTLSOf(rc.NATSClient.TLS),
		MonitorPort: rc.NATSMonitorPort,
		Cluster:     rc.NATSCluster,
		LeafNode:    rc.NATSLeafNode,
	})
	if err != nil {
		return nil, err
	}
	attrs := []any{"url", srv.ClientURL()}
	if u := srv.RouteURL(); u != "" {
		attrs = append(attrs, "cluster", rc.NATSCluster.Name, "route_url", u, "routes", len(rc.NATSCluster.Routes))
	}
	if u := srv.MonitorURL(); u != "" {
		attrs = append(attrs, "monitor", u)
	}
	log.Info("embedded NATS server listening", attrs...)
	return srv, nil
}

// serverTLSOf returns the embedded server's client-port TLS: the gateway's
// certificate (nats.tls.cert/key) serves both its client and its server
// side; without a certificate the port is plain.
func serverTLSOf(t edge.TLSFiles) edge.TLSFiles {
	if t.Cert == "" {
		return edge.TLSFiles{}
	}
	return t
}

// dutyFor returns the leader duty of rc (nil when none is configured) and
// the agent options that attach it. The duty's output goes to the agent's
// stderr, the journal under systemd.
func dutyFor(rc *config.Config) (*agent.Duty, []agent.Option) {
	c := rc.Duty
	if len(c.Command) == 0 && len(c.OnElected) == 0 && len(c.OnDemoted) == 0 && len(c.VIP) == 0 {
		return nil, nil
	}
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	d := agent.NewDuty(c)
	return d, []agent.Option{agent.WithDuty(d)}
}

// lateTrigger calls a function set after it was handed out (the Pusher's
// Trigger, which exists only once the agent does); before that, and
// without a Pushgateway, fire does nothing.
type lateTrigger struct{ f atomic.Pointer[func()] }

func (t *lateTrigger) set(f func()) { t.f.Store(&f) }

func (t *lateTrigger) fire() {
	if f := t.f.Load(); f != nil {
		(*f)()
	}
}

// startPusher starts pushing a's metrics to the Pushgateway of rc, if any:
// periodically, at once on every leader change, and at once when now fires
// (the duty started or stopped). stop, to be called after a's Run
// returned, makes the final push and waits for it.
func startPusher(rc *config.Config, a *agent.Agent, log *slog.Logger, now *lateTrigger) (stop func(), err error) {
	if rc.Push.URL == "" {
		return func() {}, nil
	}
	c := rc.Push
	c.Grouping = [][2]string{{"group", rc.Agent.Group}, {"instance", rc.Agent.ID}}
	c.Gatherer = edge.PrefixGatherer(a.Registry(), "edge_election_")
	c.Logger = log
	p, err := edge.NewPusher(c)
	if err != nil {
		return nil, err
	}
	now.set(p.Trigger)
	changes, cancelWatch := a.Watch()
	go func() {
		for range changes {
			p.Trigger()
		}
	}()
	stopPush := p.Start()
	return func() {
		cancelWatch()
		stopPush()
	}, nil
}
