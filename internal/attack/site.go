// Package attack attacks a site of real edge-agent processes the way a
// hostile or broken peer would, and measures what each attack achieves: the
// end-to-end security tests assert on its figures, and bench/attack prints
// them for any build (so that a build without a fix can be measured the
// same way).
//
// The site is the most secure documented setup: three gateways, each agent
// embedding a nats-server clustered with the others' through routes that
// need a route password, each member logging in with its own nkey (the
// signing seed) under per-member permissions, messages signed with pinned
// member keys, and a site password for every other client.
package attack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
	"github.com/edge-agent/edge-agent/internal/procstat"
)

// Credentials of the site.
const (
	SiteUser      = "site"
	SitePassword  = "site-s3cret"
	RouteUser     = "route"
	RoutePassword = "route-s3cret"
	Group         = "site"
	Prefix        = agent.DefaultSubjectPrefix
)

// Options shape a site.
type Options struct {
	// Heartbeat is H (default 100ms); D is 3H.
	Heartbeat time.Duration
	// Operators adds an operator key (operator_keys), which builds before
	// the fixes of issue 15 do not know.
	Operators bool
	// Args are extra flags for every agent.
	Args []string
	// Log receives every agent's log lines.
	Log io.Writer
}

// Site is a secure three-gateway site of agent processes.
type Site struct {
	*harness.Site
	H      time.Duration
	Keys   map[string]string        // member id -> public key
	Pairs  map[string]nkeys.KeyPair // member id -> key pair (the seeds an attacker may steal)
	Seeds  map[string]string        // member id -> seed file
	Routes []string                 // route URLs, nats-route://127.0.0.1:port
	// OperatorSeed is the operator's seed file (Options.Operators).
	OperatorSeed string
	Operator     nkeys.KeyPair

	mu       sync.Mutex
	peakRSS  map[string]int64
	attacker []*server.Server
}

// NewSite prepares (but does not start) a secure site of bin in dir.
func NewSite(bin, dir string, o Options) (*Site, error) {
	if o.Heartbeat == 0 {
		o.Heartbeat = 100 * time.Millisecond
	}
	s := &Site{H: o.Heartbeat, Keys: map[string]string{}, Pairs: map[string]nkeys.KeyPair{}, Seeds: map[string]string{}, peakRSS: map[string]int64{}}
	var keys []string
	for _, id := range []string{"gw1", "gw2", "gw3"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		s.Pairs[id], s.Keys[id] = kp, pub
		s.Seeds[id] = filepath.Join(dir, id+".nk")
		if err := os.WriteFile(s.Seeds[id], seed, 0o600); err != nil {
			return nil, err
		}
		keys = append(keys, id+"="+pub)
	}
	args := append([]string{"--heartbeat", o.Heartbeat.String(), "--preemption", "never",
		"--nats-user", SiteUser, "--nats-password", SitePassword,
		"--nats-cluster-user", RouteUser, "--nats-cluster-password", RoutePassword,
		"--member-keys", strings.Join(keys, ",")}, o.Args...)
	if o.Operators {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		s.Operator, s.OperatorSeed = kp, filepath.Join(dir, "operator.nk")
		if err := os.WriteFile(s.OperatorSeed, seed, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--operator-keys", "ops="+pub)
	}
	hs, err := harness.NewClusterSite(bin, dir, 3, args...)
	if err != nil {
		return nil, err
	}
	hs.Log = o.Log
	cluster := hs.MemberArgs
	hs.MemberArgs = func(id string) []string { return append(cluster(id), "--signing-seed", s.Seeds[id]) }
	for _, a := range cluster("gw1") {
		if strings.HasPrefix(a, "nats-route://") {
			s.Routes = strings.Split(a, ",")
		}
	}
	s.Site = hs
	return s, nil
}

// D is the suspicion time, 3H.
func (s *Site) D() time.Duration { return 3 * s.H }

// Stop kills the agents and the attackers' servers.
func (s *Site) Stop() {
	s.Site.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.attacker {
		a.Shutdown()
	}
	s.attacker = nil
}

// Agree waits until the running agents among ids agree on a leader not
// excluded, in a term above minTerm.
func (s *Site) Agree(ids []string, exclude string, minTerm uint64, timeout time.Duration) (harness.Agreement, error) {
	return s.WaitAgreement(ids, exclude, minTerm, 2*time.Millisecond, timeout)
}

// Status reads member id's /status.
func (s *Site) Status(id string) (agent.StatusReport, error) {
	p := s.Proc(id)
	if p == nil {
		return agent.StatusReport{}, fmt.Errorf("%s is not running", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.Status(ctx)
}

// SiteClient connects to gateway id's server with the site password, as
// any client of the site bus (a PLC poller, a laptop on the OT network).
// Asynchronous errors (permission violations) go to errs if not nil.
func (s *Site) SiteClient(id string, errs func(error)) (*nats.Conn, error) {
	return nats.Connect(s.ClientURLs[id], nats.UserInfo(SiteUser, SitePassword), nats.Name("attacker"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errs != nil {
				errs(err)
			}
		}))
}

// MemberClient connects to gateway at's server as member id, with id's
// key: what a compromised member key allows.
func (s *Site) MemberClient(id, at string) (*nats.Conn, error) {
	kp := s.Pairs[id]
	return nats.Connect(s.ClientURLs[at], nats.Nkey(s.Keys[id], kp.Sign), nats.Name("attacker-"+id),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
}

// RouteAttacker starts a nats-server of the attacker's that joins the
// site's cluster with the route password (which is in every gateway's
// config), and returns a client of it that may publish and subscribe to
// anything: past every permission of the site's servers.
func (s *Site) RouteAttacker() (*nats.Conn, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, ServerName: "attacker"}
	opts.Cluster.Name = Group
	opts.Cluster.Host = "127.0.0.1"
	opts.Cluster.Port = -1
	opts.Cluster.Username, opts.Cluster.Password = RouteUser, RoutePassword
	opts.Cluster.PoolSize = -1
	for _, r := range s.Routes {
		opts.Routes = append(opts.Routes, server.RoutesFromStr(strings.Replace(r, "nats-route://", "nats-route://"+RouteUser+":"+RoutePassword+"@", 1))...)
	}
	srv, err := harness.StartServer(opts)
	if err != nil {
		return nil, fmt.Errorf("attacker's server: %w", err)
	}
	s.mu.Lock()
	s.attacker = append(s.attacker, srv)
	s.mu.Unlock()
	err = poll.For(10*time.Second, "the attacker's server's routes", func() (bool, string) {
		return srv.NumRoutes() >= len(s.Running()), fmt.Sprintf("%d routes, want %d", srv.NumRoutes(), len(s.Running()))
	})
	if err != nil {
		return nil, err
	}
	return nats.Connect(srv.ClientURL(), nats.Name("route-attacker"))
}

// SamplePeak records the resident memory of every running agent; the
// largest VmHWM (peak RSS) is kept.
func (s *Site) SamplePeak() {
	for _, id := range s.Running() {
		p := s.Proc(id)
		if p == nil {
			continue
		}
		hwm, err := peakRSS(p.Cmd.Process.Pid)
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.peakRSS[id] = max(s.peakRSS[id], hwm)
		s.mu.Unlock()
	}
}

// PeakRSS returns the largest resident memory any agent reached, and which.
func (s *Site) PeakRSS() (string, int64) {
	s.SamplePeak()
	s.mu.Lock()
	defer s.mu.Unlock()
	who, peak := "", int64(0)
	for id, v := range s.peakRSS {
		if v > peak {
			who, peak = id, v
		}
	}
	return who, peak
}

// peakRSS reads VmHWM, the peak resident set of pid.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(string(v)), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return procstat.RSS(pid)
}
