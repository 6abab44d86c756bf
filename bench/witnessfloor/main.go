// Command witnessfloor measures what a witness's NATS traffic alone costs:
// this process receives and answers the messages that the witness of many
// two-gateway sites receives and sends at heartbeat period H, with no
// election work at all, and reports its own CPU. A child process runs the
// nats-server and the gateways' side of the traffic.
//
// Per group and period: in, the leader's heartbeat and both gateways'
// protocol announcements; out, the acknowledgement, the witness's own
// announcement and its duplicate-id check, as `edge-agent witness` sends
// them. The messages of the groups are spread over the period, as the
// gateways' own timers spread them. -read-batch reads the connection as
// `edge-agent witness --read-batch` does (edge.ReadBatch).
//
// -announce-every and -dup-every send the announcements and the
// duplicate-id checks once in that many periods instead (protocol 3
// announces every ten), and -tick sets how often this process's own sends
// are made.
//
//	go run ./bench/witnessfloor -groups 1000 -read-batch 0
//	go run ./bench/witnessfloor -groups 1000 -read-batch 5ms
//	GOMAXPROCS=1 go run ./bench/witnessfloor -groups 1000 -read-batch 5ms -announce-every 10 -dup-every 3
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/edge"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "load" {
		if err := load(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "witnessfloor load:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "witnessfloor:", err)
		os.Exit(1)
	}
}

// payload is about the size of a heartbeat or acknowledgement on the wire;
// announcements and duplicate-id checks are its first 80 bytes.
var payload = []byte(`{"type":"heartbeat","from":"gw1","to":"","term":12345,"seq":678,"conn":"edge-agent/site0001/gw1/presence","pv":2,"lease":180000000,"algorithm":"bully","members":["gw1","gw2","w"],"granted":false}`)

func group(i int) string { return fmt.Sprintf("site%04d", i) }

func run(args []string) error {
	fs := flag.NewFlagSet("witnessfloor", flag.ExitOnError)
	groups := fs.Int("groups", 1000, "two-gateway groups served")
	h := fs.Duration("heartbeat", time.Second, "heartbeat period H")
	window := fs.Duration("window", 30*time.Second, "measured window (after 5 s of warm-up)")
	batch := fs.Duration("read-batch", 0, "read the connection in batches of this long (0: each message at once)")
	annEvery := fs.Int("announce-every", 1, "every member announces its protocol range once in this many periods")
	tickEvery := fs.Duration("tick", time.Millisecond, "the witness's own timer: its sends are made this often, each what fell due")
	dupEvery := fs.Int("dup-every", 1, "the witness sends its duplicate-id check once in this many periods")
	_ = fs.Parse(args)
	if *annEvery < 1 || *dupEvery < 1 {
		return fmt.Errorf("-announce-every and -dup-every must be at least 1")
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "load", "-groups", fmt.Sprint(*groups), "-heartbeat", h.String(), "-announce-every", fmt.Sprint(*annEvery))
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	defer stdin.Close() // the child stops when it closes
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	nc, err := nats.Connect(strings.TrimSpace(url), append([]nats.Option{nats.NoEcho()}, edge.ReadBatch(*batch)...)...)
	if err != nil {
		return err
	}
	defer nc.Close()

	// One channel for every group's subscriptions (as the witness's
	// dispatchers receive them), one goroutine answering.
	ch := make(chan *nats.Msg, 8192)
	for i := range *groups {
		g := group(i)
		if _, err := nc.ChanSubscribe("edge."+g+".*", ch); err != nil {
			return err
		}
		if _, err := nc.ChanSubscribe("edge."+g+".*.announce", ch); err != nil {
			return err
		}
	}
	var in, acks atomic.Int64
	go func() {
		for m := range ch {
			in.Add(1)
			if strings.HasSuffix(m.Subject, ".announce") {
				continue
			}
			g := strings.Split(m.Subject, ".")[1]
			_ = nc.Publish("edge."+g+".w.gw1", payload)
			acks.Add(1)
		}
	}()
	var sentOwn atomic.Int64
	go every(*groups, *h, *tickEvery, func(n int) {
		i, round := n%*groups, n / *groups
		if (round+i)%*annEvery == 0 {
			_ = nc.Publish("edge."+group(i)+".w.announce", payload[:80])
			sentOwn.Add(1)
		}
		if (round+i)%*dupEvery == 0 {
			_ = nc.Publish("edge."+group(i)+".w.dup", payload[:80])
			sentOwn.Add(1)
		}
	})
	time.Sleep(5 * time.Second) // warm-up: not a wait for a condition
	c0, t0, i0, a0, o0 := cpu(), time.Now(), in.Load(), acks.Load(), sentOwn.Load()
	time.Sleep(*window)
	c1, t1, i1, a1, o1 := cpu(), time.Now(), in.Load(), acks.Load(), sentOwn.Load()
	sec := t1.Sub(t0).Seconds()
	fmt.Printf("witnessfloor: %d groups, H=%s, read batch %s: CPU %.2f%% of a core; received %.0f/s, sent %.0f/s (GOMAXPROCS %d)\n",
		*groups, *h, *batch, 100*float64(c1-c0)/float64(t1.Sub(t0)), float64(i1-i0)/sec, float64(a1-a0+o1-o0)/sec, runtime.GOMAXPROCS(0))
	return nil
}

// every calls f(k) for k = 0, 1, 2, ...: once every h for each of n groups
// (group k%n, round k/n), the calls spread over h, a tick's worth at a time.
func every(n int, h, tickEvery time.Duration, f func(int)) {
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	start := time.Now()
	done := 0
	for range tick.C {
		due := int(time.Since(start) * time.Duration(n) / h)
		for ; done < due; done++ {
			f(done)
		}
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load runs a nats-server on a free loopback port, prints its URL, and
// sends the gateways' side of the traffic over 16 connections until its
// standard input closes.
func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	groups := fs.Int("groups", 1000, "")
	h := fs.Duration("heartbeat", time.Second, "")
	annEvery := fs.Int("announce-every", 1, "")
	_ = fs.Parse(args)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		return err
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats-server did not start")
	}
	conns := make([]*nats.Conn, 16)
	for i := range conns {
		if conns[i], err = nats.Connect(s.ClientURL()); err != nil {
			return err
		}
	}
	fmt.Println(s.ClientURL())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}()
	every(*groups, *h, time.Millisecond, func(n int) {
		i, round := n%*groups, n / *groups
		g, nc := group(i), conns[i%len(conns)]
		_ = nc.Publish("edge."+g+".gw1", payload)
		if (round+i)%*annEvery == 0 {
			_ = nc.Publish("edge."+g+".gw1.announce", payload[:80])
			_ = nc.Publish("edge."+g+".gw2.announce", payload[:80])
		}
	})
	return nil
}
