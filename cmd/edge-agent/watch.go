package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
)

// cmdWatch streams a group's leader changes as the agents see them: it
// subscribes to the group's events subject (agent.EventsSubject), prints
// the current state from a status request, then one line per event (one
// JSON object per line with --json) until interrupted, or until --count
// events were printed.
func cmdWatch(args []string, stdout, stderr io.Writer) int {
	count := 0
	o, err := parseOpsFlags("watch", args, true, func(fs *flag.FlagSet) {
		fs.IntVar(&count, "count", 0, "exit after this many events (0: run until interrupted)")
	})
	if err == nil && count < 0 {
		err = fmt.Errorf("watch: --count must not be negative")
	}
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	nc, err := o.connect()
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent watch: %v\n", err)
		return exitFailure
	}
	defer nc.Close()
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(agent.EventsSubject(o.prefix, o.group), ch)
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent watch: subscribe: %v\n", err)
		return exitFailure
	}
	defer sub.Unsubscribe()
	if !o.json {
		reports, err := collectStatus(nc, o.prefix, o.group, o.timeout)
		if err != nil {
			fmt.Fprintf(stderr, "edge-agent watch: %v\n", err)
			return exitFailure
		}
		printWatchHeader(stdout, o.group, reports)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	for n := 0; count == 0 || n < count; {
		select {
		case <-ctx.Done():
			return exitOK
		case <-closed:
			fmt.Fprintln(stderr, "edge-agent watch: NATS connection closed")
			return exitFailure
		case m := <-ch:
			var c agent.LeaderChange
			if err := json.Unmarshal(m.Data, &c); err != nil || c.ID == "" {
				continue
			}
			n++
			if o.json {
				b, _ := json.Marshal(c)
				fmt.Fprintf(stdout, "%s\n", b)
				continue
			}
			fmt.Fprintf(stdout, "%s  %-12s leader %s -> %s  term %d  (#%d)\n",
				c.Time.Local().Format("15:04:05.000"), c.ID, dash(c.Previous), dash(c.Leader), c.Term, c.Seq)
		}
	}
	return exitOK
}

// printWatchHeader states who leads before the stream starts.
func printWatchHeader(w io.Writer, group string, reports []agent.StatusReport) {
	leaders := map[string]uint64{}
	for _, r := range reports {
		if r.Leader != "" && r.Term > leaders[r.Leader] {
			leaders[r.Leader] = r.Term
		}
	}
	now := time.Now().Format("15:04:05.000")
	switch len(leaders) {
	case 0:
		fmt.Fprintf(w, "%s  group %s: no leader, %d agent(s) answered; watching for changes\n", now, group, len(reports))
	case 1:
		for l, t := range leaders {
			fmt.Fprintf(w, "%s  group %s: leader %s, term %d, %d agent(s) answered; watching for changes\n", now, group, l, t, len(reports))
		}
	default:
		fmt.Fprintf(w, "%s  group %s: DISAGREEMENT: %d leaders reported by %d agent(s); watching for changes\n", now, group, len(leaders), len(reports))
	}
}
