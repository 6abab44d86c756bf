package agent

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-agent/edge-agent/agent/duty"
)

// VIP is a virtual IP the leader holds (see duty.VIP).
type VIP = duty.VIP

// VIPReport is one virtual IP in a status report: held is true on the
// agent whose duty guard has it on the interface now.
type VIPReport struct {
	Address   string `json:"address"`
	Interface string `json:"interface"`
	Held      bool   `json:"held"`
}

// vipState follows the duty's virtual IPs for metrics and status.
type vipState struct {
	held atomic.Bool
}

// attachVIP registers the VIP series (only for a duty with VIPs, so that a
// site without one exports none) and wires them into h.
func (a *Agent) attachVIP(h *duty.Host, vips []VIP) {
	if len(vips) == 0 {
		return
	}
	f := a.series()
	held := f.gaugeVec(prometheus.GaugeOpts{Name: "edge_election_vip_held",
		Help: "1 while this gateway holds the virtual IP (leader.vip) on its interface."}, "address")
	announced := f.counter(prometheus.CounterOpts{Name: "edge_election_vip_announcements_total",
		Help: "Gratuitous ARPs and unsolicited neighbour advertisements sent for the virtual IPs."})
	for _, v := range vips {
		held.WithLabelValues(v.Prefix.String())
	}
	h.VIPHeld = func(on bool) {
		a.work.vip.held.Store(on)
		for _, v := range vips {
			boolGauge(held.WithLabelValues(v.Prefix.String()), on)
		}
	}
	h.Announced = func(n int) { announced.Add(float64(n)) }
}

// vipReport lists the duty's virtual IPs and whether this agent holds them.
func (a *Agent) vipReport() []VIPReport {
	if a.work.duty == nil {
		return nil
	}
	var out []VIPReport
	for _, v := range a.work.duty.Config().VIP {
		out = append(out, VIPReport{Address: v.Prefix.String(), Interface: v.Interface, Held: a.work.vip.held.Load()})
	}
	return out
}
