package agent

import (
	"fmt"
	"strings"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// ProtocolView is what the bus knows of the protocol versions of the group
// (see wire.ProtocolMax): the site's version, the members that hold it
// below this build's, and what each member announced.
type ProtocolView struct {
	// Site is the highest version every live member speaks: what
	// broadcasts are sent in.
	Site int
	// Below lists the live members that speak less than this build (why
	// Site is lower), and Mismatch the members whose range does not
	// overlap this build's at all (their messages are refused).
	Below, Mismatch []string
	// Members maps each member heard from to what it announced (Max 1 and
	// no build for a member that announces nothing: a build of protocol 1).
	Members map[string]PeerProtocol
}

// PeerProtocol is one member's announced range and build.
type PeerProtocol struct {
	Min, Max int
	Build    string
}

// ProtocolReporter is a bus that follows the members' protocol versions
// (package bus's NATS bus does; the in-memory one does not).
type ProtocolReporter interface {
	Protocol() ProtocolView
}

// onProtocol logs and exports a change of the site's protocol version.
func (a *Agent) onProtocol(v ProtocolView) {
	a.m.protocol.WithLabelValues("site").Set(float64(v.Site))
	switch {
	case len(v.Mismatch) > 0:
		a.log.Error("refusing members whose protocol versions do not overlap this build's",
			"members", strings.Join(v.Mismatch, ","), "build_protocol", rangeText(wire.ProtocolMin, wire.ProtocolMax))
	case v.Site < wire.ProtocolMax:
		a.log.Info("the site runs an older protocol than this build: a member has not been upgraded",
			"site_protocol", v.Site, "build_protocol", wire.ProtocolMax, "because", strings.Join(v.Below, ","))
	default:
		a.log.Info("the site runs this build's protocol", "site_protocol", v.Site)
	}
}

func rangeText(min, max int) string { return fmt.Sprintf("%d..%d", min, max) }

// protocolReport fills r's protocol fields: this member's from the build,
// the others' from the bus if it follows them (the in-memory one does not:
// the site then runs this build's version).
func (a *Agent) protocolReport(r *StatusReport) {
	r.ProtocolVersion, r.SiteProtocolVersion = wire.ProtocolMax, wire.ProtocolMax
	var v ProtocolView
	if pr, ok := a.in.bus.(ProtocolReporter); ok {
		v = pr.Protocol()
		r.SiteProtocolVersion, r.ProtocolMismatch = v.Site, v.Mismatch
	}
	for i, m := range r.Members {
		mr := &r.Members[i]
		if m.ID == a.cfg.ID {
			mr.Build, mr.ProtocolMin, mr.ProtocolMax = a.out.version, wire.ProtocolMin, wire.ProtocolMax
		} else if p, ok := v.Members[m.ID]; ok {
			mr.Build, mr.ProtocolMin, mr.ProtocolMax = p.Build, p.Min, p.Max
		}
	}
}

// aliveMembers lists the members the core believes alive, as of the loop's
// last Ready (safe off the loop).
func (a *Agent) aliveMembers() []string {
	a.status.mu.Lock()
	defer a.status.mu.Unlock()
	var ids []string
	for _, m := range a.status.snapshot.Members {
		if m.Alive {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
