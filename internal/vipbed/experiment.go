package vipbed

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/internal/benchresult"
)

// KillTrial is one SIGKILL of the VIP holder's process.
type KillTrial struct {
	Victim string `json:"victim"`
	// NewHolder is the gateway whose responder answered first after the
	// kill.
	NewHolder string `json:"new_holder"`
	// FailoverMS: from the kill until the client's first UDP probe answered
	// by another gateway (its receive time).
	FailoverMS float64 `json:"failover_ms"`
	// ARPFailoverMS: from the kill until another gateway first answered the
	// client's ARP request for the VIP.
	ARPFailoverMS float64 `json:"arp_failover_ms"`
	// VictimLastARPMS: the killed gateway's last ARP answer for the VIP,
	// after the kill (negative: none after it); until it was restarted.
	VictimLastARPMS float64 `json:"victim_last_arp_ms"`
	// ReapedMS: from the signal until the killed process was reaped (it
	// had exited; a SIGKILLed multi-threaded process needs CPU to exit).
	ReapedMS float64 `json:"reaped_ms"`
	// VictimLastSentMS: from the signal until the killed gateway sent its
	// last ARP answer for the VIP (its own send timestamp), until restarted.
	VictimLastSentMS float64 `json:"victim_last_sent_ms"`
	// KeptVIP: the VIP was still on the killed gateway's interface at the
	// kill plus the lease.
	KeptVIP bool `json:"kept_vip"`
	// TwoHolderMS: milliseconds in which two gateways answered ARP for the
	// VIP, from the kill until the bed was stable again.
	TwoHolderMS int `json:"two_holder_ms"`
}

// CutTrial is one cut of the election traffic between the holder and the
// other gateways.
type CutTrial struct {
	Holder string `json:"holder"`
	// TakeoverMS: from the cut until another gateway first answered ARP.
	TakeoverMS float64 `json:"takeover_ms"`
	// HolderLastARPMS: from the cut until the old holder's last ARP answer
	// during the cut (negative: none after the cut began).
	HolderLastARPMS float64 `json:"holder_last_arp_ms"`
	// HolderLastSentMS: from the cut until the old holder sent its last ARP
	// answer during the cut (its own send timestamp).
	HolderLastSentMS float64 `json:"holder_last_sent_ms"`
	// HolderKeptVIP: the VIP was still on the old holder's interface at the
	// end of the cut.
	HolderKeptVIP bool `json:"holder_kept_vip"`
	// TwoHolderMS: milliseconds in which two gateways answered ARP for the
	// VIP, from the cut until the bed was stable again after the heal.
	TwoHolderMS int `json:"two_holder_ms"`
	// FirstTwoHolderMS: the first such millisecond, from the cut.
	FirstTwoHolderMS float64 `json:"first_two_holder_ms,omitempty"`
	// AnsweredMS: the milliseconds of the cut in which any ARP answer came
	// (the probe client's achieved rate bounds how many two-holder
	// milliseconds it can see).
	AnsweredMS int `json:"answered_ms"`
	// RecoverMS: from the heal until the bed was stable again.
	RecoverMS float64 `json:"recover_ms"`
}

// Result is what one product measured in the bed.
type Result struct {
	Product  string      `json:"product"`
	Settings string      `json:"settings"`
	Kills    []KillTrial `json:"kills"`
	Cuts     []CutTrial  `json:"cuts"`
	// LeaseMS is the bound by which a killed or cut-off holder must have
	// dropped the VIP (edge-agent's lease; the same figure is the moment
	// keepalived's gateways are looked at).
	LeaseMS float64 `json:"lease_ms"`
	// Targets are the limits for the failover row (edge-agent:
	// below keepalived's figures of issue 19).
	Targets []benchresult.Target `json:"targets,omitempty"`
	// Probes sent and answers counted over the run, and failed sends.
	UDPSent, ARPSent, SendErrors int
	// Seconds the product's experiments took; ProbeRealtime: the probe
	// sender ran at a real-time priority.
	Seconds       float64
	ProbeRealtime bool
}

// FailoverMS returns the kill trials' UDP failover times.
func (r Result) FailoverMS() []float64 {
	var xs []float64
	for _, k := range r.Kills {
		xs = append(xs, k.FailoverMS)
	}
	return xs
}

// ARPFailoverMS returns the kill trials' ARP failover times.
func (r Result) ARPFailoverMS() []float64 {
	var xs []float64
	for _, k := range r.Kills {
		xs = append(xs, k.ARPFailoverMS)
	}
	return xs
}

// KeptVIP counts the kills after which the killed gateway still had the
// VIP at the lease end.
func (r Result) KeptVIP() int {
	n := 0
	for _, k := range r.Kills {
		if k.KeptVIP {
			n++
		}
	}
	return n
}

// KillsWithTwoHolders counts kill trials with a millisecond of two holders.
func (r Result) KillsWithTwoHolders() int {
	n := 0
	for _, k := range r.Kills {
		if k.TwoHolderMS > 0 {
			n++
		}
	}
	return n
}

// CutsWithTwoHolders counts cut cycles with a millisecond of two holders.
func (r Result) CutsWithTwoHolders() int {
	n := 0
	for _, c := range r.Cuts {
		if c.TwoHolderMS > 0 {
			n++
		}
	}
	return n
}

// CutsHolderKept counts cut cycles whose old holder still had the VIP at
// the end of the cut.
func (r Result) CutsHolderKept() int {
	n := 0
	for _, c := range r.Cuts {
		if c.HolderKeptVIP {
			n++
		}
	}
	return n
}

// TwoHolderMSPerCut returns each cut cycle's milliseconds of two holders.
func (r Result) TwoHolderMSPerCut() []float64 {
	var xs []float64
	for _, c := range r.Cuts {
		xs = append(xs, float64(c.TwoHolderMS))
	}
	return xs
}

// Summary is the result in a few lines.
func (r Result) Summary() string {
	var b strings.Builder
	p := benchresult.Percentile
	f, a := r.FailoverMS(), r.ARPFailoverMS()
	fmt.Fprintf(&b, "%s: SIGKILL of the holder, %d trials: failover (UDP probe answered by the new holder) p50 %.1f ms, p99 %.1f ms, max %.1f ms; ARP answered by the new holder p50 %.1f ms, p99 %.1f ms; killed gateway still had the VIP %.0f ms after the kill in %d of %d; trials with two gateways answering ARP in the same ms: %d\n",
		r.Product, len(r.Kills), p(f, 50), p(f, 99), p(f, 100), p(a, 50), p(a, 99), r.LeaseMS, r.KeptVIP(), len(r.Kills), r.KillsWithTwoHolders())
	tw := r.TwoHolderMSPerCut()
	fmt.Fprintf(&b, "%s: election traffic cut for 1 s, %d cycles: cycles with two gateways answering ARP in the same ms: %d (ms of two holders per cycle p50 %.0f, max %.0f); old holder still had the VIP at the end of the cut in %d of %d\n",
		r.Product, len(r.Cuts), r.CutsWithTwoHolders(), p(tw, 50), p(tw, 100), r.CutsHolderKept(), len(r.Cuts))
	fmt.Fprintf(&b, "%s: probes sent: %d UDP, %d ARP in %.0f s (%.0f a second; sender at real-time priority: %v), %d failed sends",
		r.Product, r.UDPSent, r.ARPSent, r.Seconds, float64(r.ARPSent)/max(r.Seconds, 1e-9), r.ProbeRealtime, r.SendErrors)
	return b.String()
}

// Series turns the result into the rows of a benchmark file (figure "vip").
// The first row's p50 / p99 and every row's counts are set side by side per
// product in the report.
func (r Result) Series() []benchresult.Series {
	lease := fmt.Sprintf("%.0f ms", r.LeaseMS)
	kills, cuts := len(r.Kills), len(r.Cuts)
	return []benchresult.Series{
		{Figure: "vip", Product: r.Product, Name: r.Product + ": SIGKILL of the holder, until the client's UDP probe is answered by the new holder",
			Settings: r.Settings, Unit: "ms", Samples: r.FailoverMS(), Targets: r.Targets,
			Counts: []benchresult.Count{
				{Name: "SIGKILL: the killed holder still has the VIP on its interface " + lease + " after the kill", N: r.KeptVIP(), Of: kills},
				{Name: "SIGKILL: trials with two gateways answering ARP for the VIP in the same ms", N: r.KillsWithTwoHolders(), Of: kills},
			}},
		{Figure: "vip", Product: r.Product, Name: r.Product + ": SIGKILL of the holder, until another gateway answers ARP for the VIP",
			Settings: r.Settings, Unit: "ms", Samples: r.ARPFailoverMS()},
		{Figure: "vip", Product: r.Product, Name: r.Product + ": election traffic cut for 1 s, ms with two gateways answering ARP per cycle",
			Settings: r.Settings, Unit: "ms", Samples: r.TwoHolderMSPerCut(),
			Counts: []benchresult.Count{
				{Name: "1 s cut: cycles with two gateways answering ARP for the VIP in the same ms", N: r.CutsWithTwoHolders(), Of: cuts},
				{Name: "1 s cut: the old holder still has the VIP on its interface at the end of the cut", N: r.CutsHolderKept(), Of: cuts},
			}},
	}
}

// answeredMillis counts the distinct milliseconds of ans.
func answeredMillis(ans []Answer) int {
	seen := map[int64]bool{}
	for _, a := range ans {
		seen[a.T/1e6] = true
	}
	return len(seen)
}

// msSince is the time from t0 to t (wall clock ns) in ms.
func msSince(t0, t int64) float64 { return float64(t-t0) / 1e6 }

// twoHolders counts the ms of ans with two answering gateways and returns
// the first (in ms from t0; 0 if none).
func twoHolders(ans []Answer, t0 int64) (n int, first float64, desc string) {
	m := TwoHolderMillis(ans)
	if len(m) == 0 {
		return 0, 0, ""
	}
	var ms []int64
	for k := range m {
		ms = append(ms, k)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	first = msSince(t0, ms[0]*1e6)
	var parts []string
	for i, k := range ms {
		if i == 5 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("+%.0fms gw%v", msSince(t0, k*1e6), m[k]))
	}
	return len(m), first, strings.Join(parts, ", ")
}

// wallNow is the wall clock in ns, the clock of the kernel's receive
// timestamps.
func wallNow() int64 { return time.Now().UnixNano() }
