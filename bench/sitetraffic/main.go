// Command sitetraffic measures what an idle site sends over its bus: it
// runs one nats-server and n `edge-agent run` processes of the given
// binary, waits for them to agree on a leader, and counts the messages the
// server received (published) and sent (delivered) over a window, per
// heartbeat period.
//
//	go build -o /tmp/edge-agent ./cmd/edge-agent
//	go run ./bench/sitetraffic -bin /tmp/edge-agent -n 5 -heartbeat 100ms
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sitetraffic:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "", "the edge-agent binary (required)")
	n := flag.Int("n", 5, "gateways")
	hb := flag.Duration("heartbeat", 100*time.Millisecond, "heartbeat period H")
	window := flag.Duration("window", 20*time.Second, "counted window, after 5 s of settling")
	flag.Parse()
	if *bin == "" || *n < 1 || *hb <= 0 || *window <= 0 {
		return fmt.Errorf("-bin is required; -n, -heartbeat and -window must be positive")
	}
	ns, err := harness.StartNATS()
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	dir, err := os.MkdirTemp("", "sitetraffic")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s := harness.NewSite(*bin, ns.ClientURL(), dir, *n, "--heartbeat", hb.String())
	defer s.Stop()
	if err := s.StartAll(); err != nil {
		return err
	}
	if _, err := s.WaitAgreement(s.IDs(), "", 0, 5*time.Millisecond, 30*time.Second); err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // settling: announcements slow down once every member runs the newest protocol
	v0, err := ns.Varz(nil)
	if err != nil {
		return err
	}
	time.Sleep(*window) // the counted window: not a wait for a condition
	v1, err := ns.Varz(nil)
	if err != nil {
		return err
	}
	periods := float64(*window) / float64(*hb)
	fmt.Printf("sitetraffic: %d gateways, H=%s, %s: per heartbeat period %.1f messages published, %.1f delivered\n",
		*n, *hb, *bin, float64(v1.InMsgs-v0.InMsgs)/periods, float64(v1.OutMsgs-v0.OutMsgs)/periods)
	return nil
}
