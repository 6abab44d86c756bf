package chaos

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/internal/poll"
)

func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := StartServer(ServerConfig{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func newProxy(t *testing.T, target string, mode Mode) *Proxy {
	t.Helper()
	p, err := NewProxy(ProxyConfig{Name: t.Name(), Target: target, Mode: mode, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// collector gathers the messages of a subscription.
type collector struct {
	mu   sync.Mutex
	msgs []*nats.Msg
	at   []time.Time
}

func (c *collector) add(m *nats.Msg) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
}

func (c *collector) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) snapshot() ([]*nats.Msg, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nats.Msg(nil), c.msgs...), append([]time.Time(nil), c.at...)
}

func subscribe(t *testing.T, nc *nats.Conn, subj string) *collector {
	t.Helper()
	c := &collector{}
	if _, err := nc.Subscribe(subj, c.add); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// payload is message i: an 8-byte sequence number, then filler that looks
// like protocol lines, so a proxy that parsed payloads would break it.
func payload(i, size int) []byte {
	b := make([]byte, 8, 8+size)
	binary.BigEndian.PutUint64(b, uint64(i))
	filler := []byte("\r\nMSG x 1 9\r\nPUB y 2\r\n+OK\r\nPING\r\n")
	for len(b) < 8+size {
		b = append(b, filler[(len(b)-8)%len(filler)])
	}
	return b
}

func seqOf(m *nats.Msg) int { return int(binary.BigEndian.Uint64(m.Data[:8])) }

// checkInOrder fails unless every message is intact (matches payload) and
// the sequence numbers strictly increase.
func checkInOrder(t *testing.T, msgs []*nats.Msg, size func(int) int) {
	t.Helper()
	last := -1
	for _, m := range msgs {
		if len(m.Data) < 8 {
			t.Fatalf("short message %q", m.Data)
		}
		i := seqOf(m)
		if i <= last {
			t.Fatalf("message %d after %d: order broken", i, last)
		}
		if !bytes.Equal(m.Data, payload(i, size(i))) {
			t.Fatalf("message %d corrupted", i)
		}
		last = i
	}
}

func TestProxyNATSModePassesEveryFrameIntact(t *testing.T) {
	s := startServer(t)
	p := newProxy(t, s.ClientAddr(), NATS)
	pub := connect(t, p.URL())
	sub := connect(t, p.URL())
	direct := connect(t, s.ClientURL())
	viaProxy := subscribe(t, sub, "data.>")
	viaServer := subscribe(t, direct, "data.>")

	// Request/reply through the proxy, both ways.
	if _, err := sub.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pub.Request("svc", []byte("q"), 2*time.Second)
	if err != nil {
		t.Fatalf("request through the proxy: %v", err)
	}
	if string(r.Data) != "re:q" {
		t.Fatalf("reply through the proxy: %q", r.Data)
	}

	size := func(i int) int { return []int{0, 1, 100, 4096, 100 << 10}[i%5] }
	const n = 500
	for i := 0; i < n; i++ {
		m := &nats.Msg{Subject: fmt.Sprintf("data.%d", i%3), Data: payload(i, size(i))}
		if i%4 == 0 {
			m.Header = nats.Header{"Seq": []string{fmt.Sprint(i)}} // HPUB and HMSG
		}
		if err := pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "all messages", func() bool { return viaProxy.n() == n && viaServer.n() == n })
	for _, c := range []*collector{viaProxy, viaServer} {
		msgs, _ := c.snapshot()
		checkInOrder(t, msgs, size)
		for _, m := range msgs {
			if i := seqOf(m); i%4 == 0 && m.Header.Get("Seq") != fmt.Sprint(i) {
				t.Fatalf("message %d lost its header: %v", i, m.Header)
			}
		}
	}
	st := p.Stats()
	if st.Up.Dropped != 0 || st.Down.Dropped != 0 || st.Accepted != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestProxyDropsWholeMessagesKeepingTheStreamWellFormed(t *testing.T) {
	s := startServer(t)
	for _, d := range []Direction{Up, Down} {
		t.Run(d.String(), func(t *testing.T) {
			p := newProxy(t, s.ClientAddr(), NATS)
			pubURL, subURL := p.URL(), s.ClientURL()
			if d == Down {
				pubURL, subURL = s.ClientURL(), p.URL()
			}
			pub := connect(t, pubURL)
			sub := connect(t, subURL)
			got := subscribe(t, sub, "loss")
			if err := p.Drop(d, 0.3); err != nil {
				t.Fatal(err)
			}
			const n = 2000
			size := func(i int) int { return i % 300 }
			for i := 0; i < n; i++ {
				if err := pub.Publish("loss", payload(i, size(i))); err != nil {
					t.Fatal(err)
				}
			}
			// PING/PONG pass the proxy: a flush through it works.
			if err := pub.Flush(); err != nil {
				t.Fatal(err)
			}
			dropped := func() int {
				st := p.Stats()
				return int(st.Up.Dropped + st.Down.Dropped)
			}
			poll.Until(t, 10*time.Second, "every message delivered or dropped", func() bool { return got.n()+dropped() == n })
			msgs, _ := got.snapshot()
			checkInOrder(t, msgs, size)
			// 30% of 2000: 600 expected, sd about 20.
			if k := dropped(); k < 480 || k > 720 {
				t.Fatalf("dropped %d of %d, want about 600", k, n)
			}
			// A full cut of messages one way leaves the connection healthy.
			if err := p.Drop(d, 1); err != nil {
				t.Fatal(err)
			}
			before := got.n()
			for i := n; i < n+100; i++ {
				if err := pub.Publish("loss", payload(i, 10)); err != nil {
					t.Fatal(err)
				}
			}
			if err := pub.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := sub.Flush(); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 5*time.Second, "100 more drops", func() bool { return dropped() >= 100+int(n)-before })
			if got.n() != before || !pub.IsConnected() || !sub.IsConnected() {
				t.Fatalf("with drop 1: delivered %d more, connected %v %v", got.n()-before, pub.IsConnected(), sub.IsConnected())
			}
			p.Heal()
			if err := pub.Publish("loss", payload(n+100, 10)); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 5*time.Second, "delivery after heal", func() bool { return got.n() == before+1 })
		})
	}
	p := newProxy(t, s.ClientAddr(), Raw)
	if err := p.Drop(Up, 0.5); err == nil {
		t.Fatal("Raw mode must refuse drops")
	}
}

func TestProxyDelayKeepsOrder(t *testing.T) {
	s := startServer(t)
	p := newProxy(t, s.ClientAddr(), NATS)
	pub := connect(t, s.ClientURL())
	sub := connect(t, p.URL())
	got := subscribe(t, sub, "late")
	const base, jitter = 40 * time.Millisecond, 30 * time.Millisecond
	p.Delay(Down, base, jitter)
	const n = 300
	sent := make([]time.Time, n)
	for i := 0; i < n; i++ {
		sent[i] = time.Now()
		if err := pub.Publish("late", payload(i, 16)); err != nil {
			t.Fatal(err)
		}
		if i%30 == 0 {
			time.Sleep(3 * time.Millisecond) // spread the sends over a few jitter periods
		}
	}
	poll.Until(t, 10*time.Second, "all delayed messages", func() bool { return got.n() == n })
	msgs, at := got.snapshot()
	checkInOrder(t, msgs, func(int) int { return 16 })
	var maxLate time.Duration
	for k, m := range msgs {
		late := at[k].Sub(sent[seqOf(m)])
		if late < base-jitter {
			t.Fatalf("message %d arrived after %s, before the minimum delay %s", seqOf(m), late, base-jitter)
		}
		maxLate = max(maxLate, late)
	}
	if maxLate < base {
		t.Fatalf("no message was delayed by the base %s (max %s): jitter not applied", base, maxLate)
	}
}

func TestProxyCutResetsAndRefusesUntilHeal(t *testing.T) {
	s := startServer(t)
	p := newProxy(t, s.ClientAddr(), NATS)
	var mu sync.Mutex
	var events []string
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	nc := connect(t, p.URL(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { note("disconnected") }),
		nats.ReconnectHandler(func(*nats.Conn) { note("reconnected") }))
	p.Cut()
	poll.Until(t, 2*time.Second, "the client to see the cut", func() bool { return !nc.IsConnected() })
	// The client retries (every 20 ms plus jitter): the cut refuses each of
	// its connections, and it stays out.
	poll.Until(t, 5*time.Second, "the cut to refuse two of the client's retries", func() bool { return p.Stats().Refused >= 2 })
	if nc.IsConnected() {
		t.Fatalf("connected during the cut: stats %+v", p.Stats())
	}
	p.Heal()
	poll.Until(t, 2*time.Second, "the client to reconnect", nc.IsConnected)
	got := subscribe(t, nc, "after")
	if err := nc.Publish("after", payload(0, 1)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Second, "a message after the heal", func() bool { return got.n() == 1 })
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != "disconnected,reconnected" {
		t.Fatalf("events %v", events)
	}
}

func TestProxyCutOneWayHoldsThatDirectionOnly(t *testing.T) {
	s := startServer(t)
	p := newProxy(t, s.ClientAddr(), NATS)
	agent := connect(t, p.URL())
	other := connect(t, s.ClientURL())
	toAgent := subscribe(t, agent, "to.agent")
	fromAgent := subscribe(t, other, "from.agent")

	p.CutOneWay(Down)
	for i := 0; i < 10; i++ {
		if err := other.Publish("to.agent", payload(i, 8)); err != nil {
			t.Fatal(err)
		}
		if err := agent.Publish("from.agent", payload(i, 8)); err != nil {
			t.Fatal(err)
		}
	}
	// Up still flows: the agent's messages arrive.
	poll.Until(t, 2*time.Second, "the agent's messages", func() bool { return fromAgent.n() == 10 })
	// A negative check: nothing may cross the cut direction while it holds,
	// so the fixed window is the assertion.
	time.Sleep(200 * time.Millisecond) // hold the cut
	if toAgent.n() != 0 {
		t.Fatalf("%d messages crossed a cut direction", toAgent.n())
	}
	// Held, not lost: they arrive, in order, when the link heals.
	p.Heal()
	poll.Until(t, 2*time.Second, "held messages after the heal", func() bool { return toAgent.n() == 10 })
	msgs, _ := toAgent.snapshot()
	checkInOrder(t, msgs, func(int) int { return 8 })

	p.CutOneWay(Up)
	for i := 10; i < 15; i++ {
		if err := agent.Publish("from.agent", payload(i, 8)); err != nil {
			t.Fatal(err)
		}
		if err := other.Publish("to.agent", payload(i, 8)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 2*time.Second, "messages to the agent", func() bool { return toAgent.n() == 15 })
	time.Sleep(200 * time.Millisecond) // hold the cut: a negative check, as above
	if fromAgent.n() != 10 {
		t.Fatalf("%d messages crossed a cut direction", fromAgent.n()-10)
	}
	p.Heal()
	poll.Until(t, 2*time.Second, "held messages after the heal", func() bool { return fromAgent.n() == 15 })
}

func TestProxyBlackHoleAcceptsButNeverAnswers(t *testing.T) {
	s := startServer(t)
	p := newProxy(t, s.ClientAddr(), NATS)
	existing := connect(t, p.URL())
	got := subscribe(t, existing, "bh")
	p.BlackHole()
	if nc, err := nats.Connect(p.URL(), nats.Timeout(300*time.Millisecond)); err == nil {
		nc.Close()
		t.Fatal("a connection through a black hole got an answer")
	}
	if p.Stats().Refused != 0 {
		t.Fatalf("a black hole must accept, not refuse: %+v", p.Stats())
	}
	direct := connect(t, s.ClientURL())
	if err := direct.Publish("bh", payload(0, 4)); err != nil {
		t.Fatal(err)
	}
	if err := existing.FlushTimeout(200 * time.Millisecond); err == nil {
		t.Fatal("a flush through a black hole succeeded")
	}
	if got.n() != 0 {
		t.Fatal("a message crossed a black hole")
	}
	p.Heal()
	poll.Until(t, 2*time.Second, "the held message", func() bool { return got.n() == 1 })
	connect(t, p.URL()).Close()
}

// TestRouteProxySplitsTheBus: the two servers of a Bus are joined only
// through the route proxy. A cut splits them (and no direct route bypasses
// the proxy), a heal joins them again, and a black-holed route stays up
// while carrying nothing.
func TestRouteProxySplitsTheBus(t *testing.T) {
	bus, err := NewBus(1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	onA := connect(t, bus.A.ClientURL())
	onB := connect(t, bus.B.ClientURL())
	got := subscribe(t, onA, "x")
	// A client behind a proxy must not learn the servers' own addresses, or
	// it would reconnect around a cut proxy.
	p := newProxy(t, bus.A.ClientAddr(), NATS)
	behind := connect(t, p.URL())
	if ds := behind.DiscoveredServers(); len(ds) != 0 {
		t.Fatalf("a client behind a proxy discovered %v", ds)
	}
	// Probes on a subject of their own show that the bus carries messages
	// from B to A: a probe still in flight when the wait ends must not count
	// among the messages on x below.
	probes := subscribe(t, onA, "probe")
	seq := 0
	deliveredSince := func(n int) func() bool {
		return func() bool {
			seq++
			if err := onB.Publish("probe", payload(seq, 4)); err != nil {
				t.Fatal(err)
			}
			return probes.n() > n
		}
	}
	poll.Until(t, 5*time.Second, "B to A delivery", deliveredSince(0))

	bus.Route.Cut()
	poll.Until(t, 2*time.Second, "the route to drop", func() bool { return bus.A.NumRoutes() == 0 && bus.B.NumRoutes() == 0 })
	before := got.n()
	// A negative check over 1.5 s: no route may form around the cut proxy
	// and no message cross, so the fixed window is the assertion.
	for i := 0; i < 30; i++ {
		time.Sleep(50 * time.Millisecond) // hold the split: B keeps retrying its route
		if bus.A.NumRoutes() != 0 || bus.B.NumRoutes() != 0 {
			t.Fatalf("a route formed around the cut proxy (A %d, B %d)", bus.A.NumRoutes(), bus.B.NumRoutes())
		}
		if err := onB.Publish("x", payload(1000+i, 4)); err != nil {
			t.Fatal(err)
		}
	}
	if got.n() != before {
		t.Fatalf("%d messages crossed a split bus", got.n()-before)
	}

	bus.Route.Heal()
	if err := bus.WaitRouted(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "delivery after the heal", deliveredSince(probes.n()))

	bus.Route.BlackHole()
	before = got.n()
	for i := 0; i < 5; i++ {
		if err := onB.Publish("x", payload(2000+i, 4)); err != nil {
			t.Fatal(err)
		}
	}
	// A negative check: nothing may cross the black hole, and the route
	// must stay up, while it holds, so the fixed window is the assertion.
	time.Sleep(300 * time.Millisecond) // hold the black hole
	if got.n() != before || !bus.Routed() {
		t.Fatalf("black-holed route: %d crossed, routed %v", got.n()-before, bus.Routed())
	}
	bus.Route.Heal()
	poll.Until(t, 5*time.Second, "held messages after the heal", func() bool { return got.n() == before+5 })
}
