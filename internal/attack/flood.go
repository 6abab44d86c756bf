package attack

import (
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// FloodResult is what a flood did to the site.
type FloodResult struct {
	// Sent is how many bytes the attacker published, in Took.
	Sent int64
	Took time.Duration
	// TermDelta is how far the group's term moved during the flood (0: the
	// leader kept its lease throughout); StepDowns is how many times any
	// agent stopped leading; LeaderChanges how many times an agent's known
	// leader changed.
	TermDelta  uint64
	StepDowns  float64
	LeaderLost bool
	// PeakRSS is the largest resident memory any agent reached (VmHWM),
	// and PeakWho which agent.
	PeakRSS int64
	PeakWho string
	// Refused is how many of the attacker's publishes the servers refused
	// (permissions violations reported to it).
	Refused int64
}

func (f FloodResult) String() string {
	return fmt.Sprintf("%.0f MB in %s (%.0f MB/s), term moved by %d, step-downs %.0f, leader lost its lease: %v, peak RSS %s (%s), publishes refused %d",
		float64(f.Sent)/1e6, f.Took.Round(time.Millisecond), float64(f.Sent)/1e6/f.Took.Seconds(), f.TermDelta, f.StepDowns, f.LeaderLost, mb(f.PeakRSS), f.PeakWho, f.Refused)
}

// flood publishes size-byte messages on nc at rate bytes per second for d,
// cycling through subjects (each with a reply subject when withReply),
// while sampling the agents' memory and watching the leader.
func (s *Site) flood(nc *nats.Conn, subjects []string, size int, rate int64, d time.Duration, withReply bool, h nats.Header) (FloodResult, error) {
	var r FloodResult
	a, err := s.Agree(s.IDs(), "", 0, 30*time.Second)
	if err != nil {
		return r, err
	}
	stepBefore := 0.0
	for _, id := range s.IDs() {
		stepBefore += s.Metric(id, "edge_election_step_downs_total", nil)
	}
	payload := make([]byte, size)
	_, _ = rand.Read(payload)
	stop := make(chan struct{})
	var lost atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			s.SamplePeak()
			if st, err := s.Status(a.Leader); err == nil && (st.Role != "leader" || st.Term != a.Term) {
				lost.Store(true)
			}
		}
	}()
	start := time.Now()
	interval := time.Duration(float64(time.Second) * float64(size) / float64(rate))
	next := start
	for i := 0; time.Since(start) < d; i++ {
		subj := subjects[i%len(subjects)]
		m := &nats.Msg{Subject: subj, Data: payload, Header: h}
		if withReply {
			m.Reply = "_INBOX.flood"
		}
		if err := nc.PublishMsg(m); err != nil {
			if err == nats.ErrConnectionClosed {
				break
			}
		} else {
			r.Sent += int64(size)
		}
		next = next.Add(interval)
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
	}
	_ = nc.FlushTimeout(5 * time.Second)
	r.Took = time.Since(start)
	// Let the agents work off what is queued, then look.
	time.Sleep(2 * s.H)
	close(stop)
	wg.Wait()
	r.TermDelta = s.MaxTerm() - a.Term
	for _, id := range s.IDs() {
		r.StepDowns += s.Metric(id, "edge_election_step_downs_total", nil)
	}
	r.StepDowns -= stepBefore
	r.LeaderLost = lost.Load() || r.TermDelta > 0
	r.PeakWho, r.PeakRSS = s.PeakRSS()
	return r, nil
}

// Row6 is what floods do.
type Row6 struct {
	// Route: 1 MB messages with a garbage signature on every member's
	// election subject, from a client of the attacker's routed server.
	Route FloodResult
	// Control: a site client's 1 MB messages on ctl.status, with a reply
	// subject.
	Control FloodResult
	// ReplyLines and ReplyBytes are the warning and error lines (and their
	// bytes) that 20,000 status requests with a reply subject on a
	// member's election subject, from a site client, added to the logs.
	ReplyLines, ReplyBytes int
}

func (r Row6) String() string {
	return fmt.Sprintf("route flood of 1 MB garbage-signed election messages: %s; site client's 1 MB flood on ctl.status: %s; 20,000 status requests replying on an election subject: %d warning/error lines (%d bytes)",
		r.Route, r.Control, r.ReplyLines, r.ReplyBytes)
}

// AttackRow6 runs row 6 on a started site whose logs go to lines, each
// flood for d at 100 MB/s.
func AttackRow6(s *Site, lines *Lines, d time.Duration) (Row6, error) {
	var r Row6
	ra, err := s.RouteAttacker()
	if err != nil {
		return r, err
	}
	defer ra.Close()
	var el []string
	for _, id := range s.IDs() {
		el = append(el, wire.BroadcastSubject(Prefix, Group, id))
	}
	// A garbage signature on every message: what an unsigned flood would
	// be dropped for at once must not be the only thing tried.
	garbage := nats.Header{wire.SignatureHeader: []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}
	r.Route, err = s.flood(ra, el, 1_000_000, 100e6, d, false, garbage)
	if err != nil {
		return r, err
	}
	var refused atomic.Int64
	nc, err := s.SiteClient(s.leaderOrFirst(), func(error) { refused.Add(1) })
	if err != nil {
		return r, err
	}
	defer nc.Close()
	r.Control, err = s.flood(nc, []string{wire.ControlSubject(Prefix, Group, wire.VerbStatus)}, 1_000_000, 100e6, d, true, nil)
	if err != nil {
		return r, err
	}
	r.Control.Refused = refused.Load()
	from := lines.Len()
	for i := 0; i < 20000; i++ {
		_ = nc.PublishRequest(wire.ControlSubject(Prefix, Group, wire.VerbStatus), wire.BroadcastSubject(Prefix, Group, "gw1"), nil)
		if i%1000 == 999 {
			_ = nc.Flush()
		}
	}
	_ = nc.Flush()
	time.Sleep(2 * time.Second)
	r.ReplyLines = lines.Count(from, `"level":"ERROR"`) + lines.Count(from, `"level":"WARN"`)
	r.ReplyBytes = lines.Bytes(from)
	return r, nil
}

// leaderOrFirst returns the leader's id, or gw1.
func (s *Site) leaderOrFirst() string {
	if l, _ := s.Leader("gw1"); l != "" {
		return l
	}
	return "gw1"
}

// Flood is the site-client flood of the done-when list: 1 MB
// messages at 100 MB/s for d, with the site password, on every kind of
// subject a site client may try: every member's election subjects and the
// control subjects (refused by the servers), reply inboxes, a subject of
// the site's own data that another client on another gateway reads (so the
// flood also crosses the routes), and a system subject. It is sent to the
// leader's own gateway.
func Flood(s *Site, d time.Duration) (FloodResult, error) {
	if _, err := s.Agree(s.IDs(), "", 0, 30*time.Second); err != nil {
		return FloodResult{}, err
	}
	leader := s.leaderOrFirst()
	reader := "gw1"
	if leader == reader {
		reader = "gw2"
	}
	rc, err := s.SiteClient(reader, nil)
	if err != nil {
		return FloodResult{}, err
	}
	defer rc.Close()
	if _, err := rc.Subscribe("site.data.>", func(*nats.Msg) {}); err != nil {
		return FloodResult{}, err
	}
	_ = rc.Flush()
	var refused atomic.Int64
	nc, err := s.SiteClient(leader, func(error) { refused.Add(1) })
	if err != nil {
		return FloodResult{}, err
	}
	defer nc.Close()
	var subjects []string
	for _, id := range s.IDs() {
		subjects = append(subjects, wire.BroadcastSubject(Prefix, Group, id), wire.DirectSubject(Prefix, Group, id, leader))
	}
	for _, v := range []string{wire.VerbStatus, wire.VerbResign, wire.VerbTransfer, "events"} {
		subjects = append(subjects, wire.ControlSubject(Prefix, Group, v))
	}
	subjects = append(subjects, "_INBOX.flood", "site.data.line3", "site.data.line4", "$SYS.REQ.SERVER.PING")
	r, err := s.flood(nc, subjects, 1_000_000, 100e6, d, true, nil)
	r.Refused = refused.Load()
	return r, err
}
