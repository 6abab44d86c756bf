package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
)

// dutyFor returns the leader duty of rc (nil when none is configured) and
// the agent options that attach it. The duty's output goes to the agent's
// stderr, the journal under systemd.
func dutyFor(rc *config.Config) (*agent.Duty, []agent.Option) {
	c := rc.Duty
	if len(c.Command) == 0 && len(c.OnElected) == 0 && len(c.OnDemoted) == 0 {
		return nil, nil
	}
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	d := agent.NewDuty(c)
	return d, []agent.Option{agent.WithDuty(d)}
}

// startPusher starts pushing a's metrics to the Pushgateway of rc, if any:
// periodically and at once on every leader change. stop, to be called
// after a's Run returned, makes the final push and waits for it.
func startPusher(rc *config.Config, a *agent.Agent, log *slog.Logger) (stop func(), err error) {
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
	changes, cancelWatch := a.Watch()
	go func() {
		for range changes {
			p.Trigger()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	log.Info("pushing metrics to the Pushgateway", "url", edge.RedactURL(c.URL), "interval", c.Interval, "job", c.Job)
	return func() {
		cancelWatch()
		cancel()
		<-done
	}, nil
}
