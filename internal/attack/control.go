package attack

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
)

// Row1 is what a holder of the site password can do to leadership.
type Row1 struct {
	// TransferMoved: a transfer to the lowest-ranked member, asked with the
	// site password, moved leadership there.
	TransferMoved bool
	// SiteHandovers is how many terms 30 resign requests in 10 s, sent
	// with the site password, cost the group.
	SiteHandovers uint64
	// MemberHandovers is the same for 30 resigns signed by a member's key
	// (allowed to ask, and rate-limited); -1 when not measured.
	MemberHandovers int64
	// OperatorTransfer is the outcome of the operator's `edge-agent
	// transfer gw1` (new builds): "ok" or why not.
	OperatorTransfer string
}

func (r Row1) String() string {
	return fmt.Sprintf("site-password transfer moved leadership: %v; 30 site-password resigns in 10 s: %d handovers; 30 member-signed resigns in 10 s: %d handovers; operator transfer: %s",
		r.TransferMoved, r.SiteHandovers, r.MemberHandovers, r.OperatorTransfer)
}

// AttackRow1 runs row 1 on a started, agreed site. newCLI says whether the
// binary has this build's CLI (signed requests).
func AttackRow1(s *Site, bin string, newCLI bool) (Row1, error) {
	r := Row1{MemberHandovers: -1}
	a, err := s.Agree(s.IDs(), "", 0, 30*time.Second)
	if err != nil {
		return r, err
	}
	nc, err := s.SiteClient("gw2", nil)
	if err != nil {
		return r, err
	}
	defer nc.Close()
	Request(nc, wire.VerbTransfer, agent.ControlRequest{Nominee: "gw1"}, 2*time.Second)
	if b, err := s.Agree(s.IDs(), "", 0, 3*time.Second); err == nil && b.Leader == "gw1" {
		r.TransferMoved = true
	}
	before := s.MaxTerm()
	for i := 0; i < 30; i++ {
		go Request(nc, wire.VerbResign, agent.ControlRequest{}, time.Second)
		time.Sleep(333 * time.Millisecond)
	}
	if _, err := s.Agree(s.IDs(), "", 0, 10*time.Second); err != nil {
		return r, fmt.Errorf("after the site-password resigns: %w", err)
	}
	r.SiteHandovers = s.MaxTerm() - before
	if !newCLI {
		return r, nil
	}
	before = s.MaxTerm()
	done := make(chan struct{}, 30)
	for i := 0; i < 30; i++ {
		go func() {
			CLI(bin, 5*time.Second, append([]string{"resign"}, s.MemberArgsCLI("gw2", "gw2")...)...)
			done <- struct{}{}
		}()
		time.Sleep(333 * time.Millisecond)
	}
	for i := 0; i < 30; i++ {
		<-done
	}
	if _, err := s.Agree(s.IDs(), "", 0, 10*time.Second); err != nil {
		return r, fmt.Errorf("after the member-signed resigns: %w", err)
	}
	r.MemberHandovers = int64(s.MaxTerm() - before)
	cur, err := s.Agree(s.IDs(), "", 0, 10*time.Second)
	if err != nil {
		return r, err
	}
	target := "gw1"
	if cur.Leader == "gw1" {
		target = "gw2"
	}
	// The handover budget may be spent: wait it out (one per second).
	time.Sleep(3 * time.Second)
	code, out, errOut := CLI(bin, 10*time.Second, append([]string{"transfer", target}, s.OperatorArgs("gw3")...)...)
	if b, err := s.Agree(s.IDs(), "", cur.Term, 5*time.Second); code == 0 && err == nil && b.Leader == target {
		r.OperatorTransfer = "ok"
	} else {
		r.OperatorTransfer = fmt.Sprintf("exit %d: %s %s", code, strings.TrimSpace(out), strings.TrimSpace(errOut))
	}
	_ = a
	return r, nil
}

// Row2 is whether operators' tools can be lied to.
type Row2 struct {
	// SiteStatus, SiteEvent: a site-password client's forged status answer
	// showed in `edge-agent status`, its forged event in `edge-agent watch`.
	SiteStatus, SiteEvent bool
	// RouteStatus, RouteEvent: the same from a client of the attacker's
	// server routed into the cluster, past every server permission (new
	// builds only: the signatures must catch it).
	RouteStatus, RouteEvent bool
	// Notes is what the CLI said on stderr about answers it refused.
	Notes string
}

func (r Row2) String() string {
	return fmt.Sprintf("site client: forged status shown %v, forged event shown %v; route attacker: forged status shown %v, forged event shown %v; CLI notes: %q",
		r.SiteStatus, r.SiteEvent, r.RouteStatus, r.RouteEvent, r.Notes)
}

// forged answers every status request on nc as a fake leader gw2 of term
// 999999, and publishes a forged leader change; it returns a stop func.
func forgeControl(nc *nats.Conn) (stop func(), err error) {
	sub, err := nc.Subscribe(wire.ControlSubject(Prefix, Group, wire.VerbStatus), func(m *nats.Msg) {
		if m.Reply != "" {
			_ = nc.Publish(m.Reply, []byte(`{"id":"gw2","group":"site","algorithm":"bully","role":"leader","leader":"gw2","term":999999,"quorum":{"size":2,"live":3,"ok":true},"members":[]}`))
		}
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = nc.Publish(agent.EventsSubject(Prefix, Group), []byte(`{"id":"gw2","group":"site","seq":99,"leader":"gw1","previous":"gw3","term":999999,"time":"2026-01-01T00:00:00Z"}`))
			}
		}
	}()
	_ = nc.Flush()
	return func() { close(done); _ = sub.Unsubscribe() }, nil
}

// lied runs status and a one-event watch with args and reports whether
// the forged term showed in either, and the CLI's stderr.
func lied(bin string, args []string) (status, event bool, notes string) {
	_, out, errOut := CLI(bin, 5*time.Second, append([]string{"status", "--json"}, args...)...)
	status = strings.Contains(out, "999999")
	_, wout, werr := CLI(bin, 4*time.Second, append([]string{"watch", "--json", "--count", "1"}, args...)...)
	event = strings.Contains(wout, "999999")
	return status, event, strings.TrimSpace(errOut + werr)
}

// AttackRow2 runs row 2 on a started site.
func AttackRow2(s *Site, bin string, newCLI bool) (Row2, error) {
	var r Row2
	if _, err := s.Agree(s.IDs(), "", 0, 30*time.Second); err != nil {
		return r, err
	}
	nc, err := s.SiteClient("gw1", nil)
	if err != nil {
		return r, err
	}
	defer nc.Close()
	stop, err := forgeControl(nc)
	if err != nil {
		return r, err
	}
	args := s.SiteArgs("gw1")
	if newCLI {
		args = s.OperatorArgs("gw1")
	}
	r.SiteStatus, r.SiteEvent, r.Notes = lied(bin, args)
	stop()
	if !newCLI {
		return r, nil
	}
	ra, err := s.RouteAttacker()
	if err != nil {
		return r, err
	}
	defer ra.Close()
	stop, err = forgeControl(ra)
	if err != nil {
		return r, err
	}
	defer stop()
	var notes string
	r.RouteStatus, r.RouteEvent, notes = lied(bin, args)
	r.Notes += "\n" + notes
	return r, nil
}

// MaxHandovers is the most handovers that signed requests may cause in d on
// a site whose D is below a second: the burst, then one per second.
func MaxHandovers(d time.Duration) int64 {
	return agent.HandoverBurst + int64(d/time.Second) + 1
}
