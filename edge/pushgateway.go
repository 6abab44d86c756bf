package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"
)

// Defaults of PushConfig.
const (
	DefaultPushJob      = "edge-agent"
	DefaultPushInterval = 15 * time.Second
)

// PushConfig describes how a Pusher pushes metrics to a Prometheus
// Pushgateway.
type PushConfig struct {
	// URL is the Pushgateway's base URL, http:// or https://, without the
	// /metrics/job/... path.
	URL string
	// Job is the job label of the pushed group (DefaultPushJob when empty).
	Job string
	// Grouping are the other labels of the group's key, in order; edge-agent
	// uses group (the election group) and instance (the member id). Each push
	// replaces every metric of the group (HTTP PUT), so a series that
	// vanished locally also vanishes from the Pushgateway. A gathered series
	// that carries a grouping label with the key's value is pushed without
	// it (the Pushgateway adds it back).
	Grouping [][2]string
	// Interval is the time between periodic pushes (DefaultPushInterval
	// when 0).
	Interval time.Duration
	// Timeout bounds each push (default: Interval, at most 10s).
	Timeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff between pushes
	// while they fail (defaults: min(1s, Interval/4) and Interval).
	RetryMin, RetryMax time.Duration
	// Gatherer provides the metrics.
	Gatherer prometheus.Gatherer
	// Logger receives push failures and recoveries; nil discards them.
	Logger *slog.Logger
	// Client does the HTTP requests (default: http.DefaultTransport).
	Client *http.Client
}

// Validate fills the defaults and checks cfg (all but Gatherer, which
// NewPusher checks). Errors name the config key (pushgateway.url, ...).
func (c *PushConfig) Validate() error {
	if err := CheckPushURL(c.URL); err != nil {
		return fmt.Errorf("pushgateway.url: %w", err)
	}
	if c.Job == "" {
		c.Job = DefaultPushJob
	}
	if strings.Contains(c.Job, "/") {
		return fmt.Errorf("pushgateway.job: %q contains a '/'", c.Job)
	}
	if c.Interval == 0 {
		c.Interval = DefaultPushInterval
	}
	if c.Interval < 100*time.Millisecond || c.Interval > time.Hour {
		return fmt.Errorf("pushgateway.interval: %s is outside 100ms..1h", c.Interval)
	}
	if c.Timeout == 0 {
		c.Timeout = min(c.Interval, 10*time.Second)
	}
	if c.RetryMin == 0 {
		c.RetryMin = min(time.Second, c.Interval/4)
	}
	if c.RetryMax == 0 {
		c.RetryMax = c.Interval
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		return fmt.Errorf("pushgateway: retry backoff %s..%s is not a valid range", c.RetryMin, c.RetryMax)
	}
	return nil
}

// CheckPushURL checks that s is an http:// or https:// URL with a host and
// no query or fragment.
func CheckPushURL(s string) error {
	u, err := url.Parse(s)
	shown := RedactURL(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", shown)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http:// or https://", shown)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Path, "/metrics/job") {
		return fmt.Errorf("%q: give the Pushgateway's base URL, without path /metrics/job, query or fragment", shown)
	}
	return nil
}

// splitBasicAuth returns s without its user information, and that user
// information (nil when there is none).
func splitBasicAuth(s string) (string, *url.Userinfo) {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s, nil
	}
	user := u.User
	u.User = nil
	return u.String(), user
}

// Pusher pushes a gatherer's metrics to a Pushgateway: every Interval, at
// once when Trigger is called (edge-agent does on every leader change), and
// a last time when Run's context ends. While the Pushgateway cannot be
// reached (an offline site) it retries with exponential backoff, from a
// fraction of the interval up to the interval (RetryMin, RetryMax), and each retry carries the
// current values, so the Pushgateway shows the site's state as soon as it is
// back. On shutdown the group is left in place, not deleted: the last values
// (is_leader 0 after a handover) stay visible, and push_time_seconds tells
// how old they are.
type Pusher struct {
	cfg     PushConfig
	pusher  *push.Pusher
	log     *slog.Logger
	trigger chan struct{}

	mu       sync.Mutex
	failures int // consecutive failed pushes
	pushes   int // successful pushes
	lastErr  error
}

// NewPusher validates cfg and returns a Pusher; call Run to start it.
func NewPusher(cfg PushConfig) (*Pusher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Gatherer == nil {
		return nil, errors.New("pushgateway: no gatherer")
	}
	// Basic auth in the URL (https://user:pass@host) goes to the
	// Authorization header: the push library then never holds the
	// password, so none of its errors (logged on every failed push) can
	// show it.
	bare, user := splitBasicAuth(cfg.URL)
	p := push.New(bare, cfg.Job).Gatherer(withoutGrouping(cfg.Gatherer, cfg.Grouping))
	if user != nil {
		pass, _ := user.Password()
		p = p.BasicAuth(user.Username(), pass)
	}
	for _, kv := range cfg.Grouping {
		p = p.Grouping(kv[0], kv[1])
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	p = p.Client(client)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pusher{cfg: cfg, pusher: p, log: log.With("pushgateway", RedactURL(cfg.URL)), trigger: make(chan struct{}, 1)}, nil
}

// Config returns the validated configuration.
func (p *Pusher) Config() PushConfig { return p.cfg }

// Trigger asks for a push now. It never blocks; triggers that come while a
// push is pending are merged into it.
func (p *Pusher) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Stats returns the number of successful pushes, of consecutive failures
// now, and the last error (nil after a success).
func (p *Pusher) Stats() (pushes, failures int, lastErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushes, p.failures, p.lastErr
}

// Start runs the pusher in the background (Run) and logs where it pushes;
// stop ends it, after the final push.
func (p *Pusher) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	p.log.Info("pushing metrics to the Pushgateway", "url", RedactURL(p.cfg.URL), "interval", p.cfg.Interval, "job", p.cfg.Job)
	return func() {
		cancel()
		<-done
	}
}

// Run pushes until ctx ends, then pushes once more (bounded by Timeout)
// and returns.
func (p *Pusher) Run(ctx context.Context) {
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.cfg.RetryMin),
		backoff.WithMaxInterval(p.cfg.RetryMax),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.3),
		backoff.WithMaxElapsedTime(0),
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
			err := p.push(fctx)
			cancel()
			if err != nil {
				p.log.Warn("final push to the Pushgateway failed", "err", err)
			} else {
				p.log.Debug("final push to the Pushgateway done")
			}
			return
		case <-timer.C:
		case <-p.trigger:
		}
		next := p.cfg.Interval
		if err := p.push(ctx); err != nil {
			if ctx.Err() != nil {
				continue // the final push follows
			}
			next = bo.NextBackOff()
		} else {
			bo.Reset()
		}
		timer.Reset(next)
	}
}

// push pushes once and logs the first failure of a series and the recovery.
func (p *Pusher) push(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	err := p.pusher.PushContext(pctx)
	if err != nil && ctx.Err() != nil {
		// Cut short by shutdown (a leader's handover triggers a push just
		// before Run's context ends): not a failure of the Pushgateway,
		// and the final push follows.
		p.log.Debug("push cut short by shutdown", "err", err)
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
	if err != nil {
		p.failures++
		if p.failures == 1 {
			p.log.Warn("push to the Pushgateway failed; retrying with backoff", "err", err)
		} else {
			p.log.Debug("push to the Pushgateway failed", "err", err, "failures", p.failures)
		}
		return err
	}
	if p.failures > 0 {
		p.log.Info("pushes to the Pushgateway resumed", "failed_before", p.failures)
	}
	p.failures = 0
	p.pushes++
	return nil
}

// withoutGrouping gathers g's metrics without the labels that repeat the
// push's grouping key: a series of the agent's own registry may carry a
// grouping label (edge_election_duty_running has group, for a Prometheus
// that scrapes the agent directly), and the Pushgateway adds the key's
// labels itself; the push client refuses a metric that carries one. A
// series whose label disagrees with the key is left as it is, and its push
// fails with the client's error.
func withoutGrouping(g prometheus.Gatherer, grouping [][2]string) prometheus.Gatherer {
	if len(grouping) == 0 {
		return g
	}
	key := map[string]string{}
	for _, kv := range grouping {
		key[kv[0]] = kv[1]
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				kept := m.Label[:0:0]
				for _, l := range m.GetLabel() {
					if v, ok := key[l.GetName()]; ok && v == l.GetValue() {
						continue
					}
					kept = append(kept, l)
				}
				m.Label = kept
			}
		}
		return mfs, err
	})
}

// PrefixGatherer gathers only the metric families of g whose names start
// with prefix. edge-agent pushes only its edge_election_ series: the Go and
// process collectors add some 40 series per agent that a fleet's
// Pushgateway (which keeps every group until deleted) has no need to hold;
// they stay on the agent's local /metrics.
func PrefixGatherer(g prometheus.Gatherer, prefix string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), prefix) {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
