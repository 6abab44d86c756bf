package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is one direction of a proxied connection, or both.
type Direction uint8

// The directions. The client is the side that connects to the proxy (an
// agent, or a soliciting nats-server on a route); the server is the target.
const (
	Up   Direction = 1 << iota // client to server (an agent's PUBs)
	Down                       // server to client (MSGs to an agent)
	Both = Up | Down
)

func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both:
		return "both"
	}
	return "none"
}

// Mode is how a Proxy reads the bytes it carries.
type Mode uint8

const (
	// Raw carries opaque chunks; drops are not available. Use it for
	// anything that is not the NATS client protocol, e.g. a route between
	// two nats-servers.
	Raw Mode = iota
	// NATS splits both directions into whole NATS client-protocol frames,
	// so that it can drop a whole PUB or MSG and delay frames without ever
	// splitting one.
	NATS
)

// laneLimit bounds the bytes queued in one direction of one connection;
// beyond it the proxy stops reading, and TCP backpressure does the rest, as
// on a real link that carries nothing.
const laneLimit = 4 << 20

// ProxyConfig describes a Proxy.
type ProxyConfig struct {
	// Name labels the proxy in errors and logs.
	Name string
	// Target is the host:port every accepted connection is forwarded to.
	Target string
	// Mode is Raw or NATS.
	Mode Mode
	// Seed seeds the proxy's random drops and jitter.
	Seed uint64
}

// DirStats counts what one direction carried.
type DirStats struct {
	Frames   uint64 // frames (NATS) or chunks (Raw) forwarded
	Bytes    uint64
	Messages uint64 // PUB/MSG frames let through (NATS)
	Dropped  uint64 // PUB/MSG frames dropped (NATS)
}

// Stats counts what a Proxy did.
type Stats struct {
	Up, Down DirStats
	Accepted uint64 // connections forwarded
	Refused  uint64 // connections closed at once because the proxy was cut
}

// Proxy is a TCP proxy on a loopback port that injects network faults
// between its clients and one target: cuts (both ways or one way),
// black holes, delay with jitter and, in NATS mode, the loss of whole
// messages. A fault applies to every connection, present and future, until
// Heal. It is safe for concurrent use.
//
// The faults are modelled on what TCP shows an application:
//
//   - Cut: the link is down and the far end says so (a reset): open
//     connections are closed, new ones are accepted and closed at once.
//     Clients notice immediately.
//   - CutOneWay: one direction carries nothing; its bytes wait (TCP keeps
//     retransmitting) and arrive, late, if the link heals before either end
//     gives up. The other direction flows.
//   - BlackHole: both directions carry nothing, and new connections are
//     accepted but get no answer. Clients notice only by their own timeouts
//     (NATS pings).
//   - Delay: every frame (or chunk) waits base ± jitter; order is kept,
//     because a late frame holds up the ones behind it.
//   - ResetServerSide: the server sees a reset, the client sees nothing (a
//     middlebox that lost the connection's state).
//   - Drop (NATS mode): each PUB/HPUB (Up) or MSG/HMSG (Down) frame is
//     dropped with a probability; control frames (PING, PONG, SUB, INFO...)
//     always pass, so the connection stays healthy while messages are lost.
type Proxy struct {
	cfg ProxyConfig
	ln  net.Listener

	mu      sync.Mutex
	target  string
	cut     bool
	hold    Direction
	drop    [2]float64
	delay   [2]delaySpec
	rng     *rand.Rand
	changed chan struct{} // closed and replaced whenever a fault changes
	links   map[*link]struct{}
	closed  bool
	stats   Stats

	wg sync.WaitGroup
}

type delaySpec struct{ base, jitter time.Duration }

func dirIndex(d Direction) int {
	if d == Down {
		return 1
	}
	return 0
}

// NewProxy listens on a free loopback port and forwards to cfg.Target.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy %s: %w", cfg.Name, err)
	}
	p := &Proxy{
		cfg:     cfg,
		ln:      ln,
		target:  cfg.Target,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		changed: make(chan struct{}),
		links:   map[*link]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Name is the proxy's label.
func (p *Proxy) Name() string { return p.cfg.Name }

// SetTarget forwards connections accepted from now on to addr.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Cut takes the link down both ways: open connections are closed and new
// ones are closed as soon as they are accepted, until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.linksLocked()
	p.signalLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// CutOneWay stops direction d (Up or Down): its bytes are held, not lost,
// until Heal, while the other direction flows.
func (p *Proxy) CutOneWay(d Direction) {
	p.mu.Lock()
	p.hold |= d
	p.signalLocked()
	p.mu.Unlock()
}

// BlackHole holds both directions of every connection, present and future:
// connections are accepted but nothing is forwarded or answered until Heal.
func (p *Proxy) BlackHole() { p.CutOneWay(Both) }

// ResetServerSide resets every open connection on the server's side only,
// and black-holes the rest until Heal: the server sees the connection close
// (and a NATS server publishes its disconnect advisory), while the client
// notices nothing until its own timeouts, because its bytes now go nowhere.
// This is what a stateful middlebox (NAT, firewall) that lost a
// connection's state does when the server sends next and the client's
// packets are dropped. Heal then resets the client's side too.
func (p *Proxy) ResetServerSide() {
	p.mu.Lock()
	p.hold = Both
	links := p.linksLocked()
	for _, l := range links {
		l.halfReset.Store(true)
	}
	p.signalLocked()
	p.mu.Unlock()
	for _, l := range links {
		// A real reset (RST), as a middlebox that lost the connection's
		// state sends: linger 0 makes Close abort instead of sending FIN.
		if tc, ok := l.server.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		l.server.Close()
	}
}

// Delay makes every frame in direction d wait base plus a uniform jitter in
// [-jitter, +jitter] (never less than zero), keeping order.
func (p *Proxy) Delay(d Direction, base, jitter time.Duration) {
	p.mu.Lock()
	for _, x := range []Direction{Up, Down} {
		if d&x != 0 {
			p.delay[dirIndex(x)] = delaySpec{base, jitter}
		}
	}
	p.signalLocked()
	p.mu.Unlock()
}

// Drop makes the proxy drop each PUB/HPUB (Up) or MSG/HMSG (Down) frame with
// probability prob (0..1). It needs NATS mode.
func (p *Proxy) Drop(d Direction, prob float64) error {
	if p.cfg.Mode != NATS {
		return fmt.Errorf("chaos: proxy %s: dropping messages needs NATS mode", p.cfg.Name)
	}
	if prob < 0 || prob > 1 {
		return fmt.Errorf("chaos: proxy %s: drop probability %v outside 0..1", p.cfg.Name, prob)
	}
	p.mu.Lock()
	for _, x := range []Direction{Up, Down} {
		if d&x != 0 {
			p.drop[dirIndex(x)] = prob
		}
	}
	p.signalLocked()
	p.mu.Unlock()
	return nil
}

// Heal lifts every fault. Frames held by a one-way cut or a black hole are
// released now; frames already delayed keep their release time.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.hold = 0
	p.drop = [2]float64{}
	p.delay = [2]delaySpec{}
	p.signalLocked()
	var dead []*link
	for l := range p.links {
		if l.halfReset.Load() {
			dead = append(dead, l)
		}
	}
	p.mu.Unlock()
	for _, l := range dead {
		l.close() // the client's side of a server-side reset
	}
}

// Stats returns what the proxy carried so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Conns is the number of open proxied connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.linksLocked()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) linksLocked() []*link {
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

func (p *Proxy) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// held reports whether direction d is held, and a channel closed at the
// next fault change.
func (p *Proxy) held(d Direction) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hold&d != 0, p.changed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.stats.Refused++
			p.mu.Unlock()
			c.Close()
			continue
		}
		target := p.target
		p.mu.Unlock()
		p.wg.Add(1)
		go p.open(c, target)
	}
}

// open dials the target for an accepted client and starts the pumps.
func (p *Proxy) open(client net.Conn, target string) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		client.Close()
		return
	}
	l := &link{p: p, client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.stats.Refused++
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.links[l] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()
	up := newLane()
	down := newLane()
	p.wg.Add(4)
	go l.read(Up, client, up)
	go l.write(Up, server, up)
	go l.read(Down, server, down)
	go l.write(Down, client, down)
}

// admit decides the fate of a frame read in direction d: dropped, or queued
// for release at a time.
func (p *Proxy) admit(d Direction, f frame) (release time.Time, drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := dirIndex(d)
	s := &p.stats.Up
	if d == Down {
		s = &p.stats.Down
	}
	if f.message {
		if p.drop[i] > 0 && p.rng.Float64() < p.drop[i] {
			s.Dropped++
			return time.Time{}, true
		}
		s.Messages++
	}
	ds := p.delay[i]
	wait := ds.base
	if ds.jitter > 0 {
		wait += time.Duration(p.rng.Int64N(int64(2*ds.jitter)+1)) - ds.jitter
	}
	return time.Now().Add(max(wait, 0)), false
}

func (p *Proxy) count(d Direction, frames, bytes int) {
	p.mu.Lock()
	s := &p.stats.Up
	if d == Down {
		s = &p.stats.Down
	}
	s.Frames += uint64(frames)
	s.Bytes += uint64(bytes)
	p.mu.Unlock()
}

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	halfReset      atomic.Bool // the server's side was reset; the client's waits for Heal
}

// end is deferred by the pumps: a pump that stops closes the whole link,
// except after a server-side reset, whose client side must stay open and
// silent.
func (l *link) end() {
	if !l.halfReset.Load() {
		l.close()
	}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// read splits src into frames (or chunks) and queues them on q.
func (l *link) read(d Direction, src net.Conn, q *lane) {
	defer l.p.wg.Done()
	defer l.end()
	next := rawChunks(src)
	if l.p.cfg.Mode == NATS {
		fr := newFrameReader(src)
		next = fr.next
	}
	for {
		f, err := next()
		if err != nil {
			return
		}
		at, drop := l.p.admit(d, f)
		if drop {
			continue
		}
		if !q.push(f.data, at, l.done) {
			return
		}
	}
}

func rawChunks(src net.Conn) func() (frame, error) {
	buf := make([]byte, 32<<10)
	return func() (frame, error) {
		n, err := src.Read(buf)
		if n > 0 {
			return frame{data: append([]byte(nil), buf[:n]...)}, nil
		}
		return frame{}, err
	}
}

// write releases q's frames to dst in order, each no earlier than its
// release time and only while direction d is not held.
func (l *link) write(d Direction, dst net.Conn, q *lane) {
	defer l.p.wg.Done()
	defer l.end()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var out []byte
	for {
		at, ok := q.front(l.done)
		if !ok {
			return
		}
		held, changed := l.p.held(d)
		if held {
			select {
			case <-changed:
			case <-l.done:
				return
			}
			continue
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-changed:
				if !timer.Stop() {
					<-timer.C
				}
			case <-l.done:
				return
			}
			continue
		}
		var n int
		out, n = q.popDue(out[:0], time.Now(), 64<<10)
		if _, err := dst.Write(out); err != nil {
			return
		}
		l.p.count(d, n, len(out))
	}
}

// lane is the FIFO of one direction of one connection.
type lane struct {
	mu    sync.Mutex
	q     []queued
	bytes int
	last  time.Time     // release time of the newest frame: order is kept
	ready chan struct{} // a frame was queued
	room  chan struct{} // frames were released
}

type queued struct {
	data []byte
	at   time.Time
}

func newLane() *lane {
	return &lane{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues data for release at at (or after the frame before it),
// waiting while the lane is full. It reports false if done closed first.
func (q *lane) push(data []byte, at time.Time, done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if q.bytes < laneLimit || len(q.q) == 0 {
			if at.Before(q.last) {
				at = q.last
			}
			q.last = at
			q.q = append(q.q, queued{data, at})
			q.bytes += len(data)
			q.mu.Unlock()
			poke(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-done:
			return false
		}
	}
}

// front waits for a frame and returns its release time.
func (q *lane) front(done <-chan struct{}) (time.Time, bool) {
	for {
		q.mu.Lock()
		if len(q.q) > 0 {
			at := q.q[0].at
			q.mu.Unlock()
			return at, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-done:
			return time.Time{}, false
		}
	}
}

// popDue appends to out the frames due by now, up to about limit bytes (at
// least one), removes them and reports how many.
func (q *lane) popDue(out []byte, now time.Time, limit int) ([]byte, int) {
	q.mu.Lock()
	n := 0
	for n < len(q.q) && !q.q[n].at.After(now) && (n == 0 || len(out)+len(q.q[n].data) <= limit) {
		out = append(out, q.q[n].data...)
		q.bytes -= len(q.q[n].data)
		n++
	}
	q.q = q.q[n:]
	q.mu.Unlock()
	poke(q.room)
	return out, n
}
