// Command embed shows a program that embeds the edge-agent election: it
// runs one member of a group over a NATS server, does its singleton work
// only while it leads (the context of OnStartedLeading ends the moment it
// stops), follows every leader change through Watch, and hands over on
// SIGTERM, SIGINT, or SIGUSR1 (resign, staying a member).
//
//	go run ./examples/embed --id gw1 --members gw1,gw2,gw3 --nats nats://127.0.0.1:4222
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/election"
)

func main() {
	id := flag.String("id", "gw1", "this member's id")
	group := flag.String("group", "embed-demo", "election group")
	members := flag.String("members", "gw1,gw2,gw3", "the group's member ids, highest priority first")
	url := flag.String("nats", nats.DefaultURL, "NATS server URL")
	stateDir := flag.String("state-dir", "", "where the term is persisted (default: a directory under the temp dir)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *id, *group, *members, *url, *stateDir); err != nil {
		log.Error("embed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, id, group, memberList, url, stateDir string) error {
	ids := strings.Split(memberList, ",")
	var members []election.Member
	for i, m := range ids {
		members = append(members, election.Member{ID: m, Priority: len(ids) - i})
	}
	if stateDir == "" {
		stateDir = fmt.Sprintf("%s/embed-%s-%s", os.TempDir(), group, id)
	}
	nc, err := nats.Connect(url, bus.NATSOptions("embed/"+id)...)
	if err != nil {
		return err
	}
	defer nc.Close()

	cfg := agent.Config{ID: id, Group: group, Members: members, Heartbeat: 200 * time.Millisecond, StateDir: stateDir}
	a, err := agent.New(cfg, bus.WithNATS(nc), agent.WithLogger(log),
		agent.WithCallbacks(agent.Callbacks{
			// The singleton work: it runs until ctx ends, which happens the
			// moment leadership is lost, at the latest when the lease runs out.
			OnStartedLeading: func(ctx context.Context, term uint64) { work(ctx, log, term) },
		}),
		// A planned handover waits up to 300ms for work to return before the
		// successor is told, so the two never overlap.
		agent.WithReleaseWait(300*time.Millisecond))
	if err != nil {
		return err
	}

	// Every leader change, none dropped, even if this loop is slow.
	changes, stopWatching := a.Watch()
	defer stopWatching()
	go func() {
		for c := range changes {
			log.Info("leader change", "seq", c.Seq, "from", c.Previous, "to", c.Leader, "term", c.Term)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	resign := make(chan os.Signal, 1)
	signal.Notify(resign, syscall.SIGUSR1)
	go func() {
		for range resign {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := a.Resign(rctx); err != nil {
				log.Warn("resign", "err", err) // agent.ErrNotLeader on a follower
			}
			cancel()
		}
	}()
	return a.Run(ctx) // on SIGTERM a leader hands over, then Run returns
}

// work stands for the duty: it acts only with the term as its fencing
// token, and stops when ctx ends.
func work(ctx context.Context, log *slog.Logger, term uint64) {
	log.Info("leading: work starts", "term", term)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("no longer leading: work stops", "term", term)
			return
		case <-t.C:
			log.Info("working", "fencing_token", term)
		}
	}
}
