package witness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Summary is the host's view of every group it serves (GET /status).
type Summary struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Groups counts the groups served; Led those whose witness knows a
	// leader, with a term.
	Groups int `json:"groups"`
	Led    int `json:"led"`
	// Failed lists the groups whose witness agent stopped with an error.
	Failed []string `json:"failed"`
	// Group is one line per group, in the config's order.
	Group         []GroupSummary `json:"group"`
	NATSConnected bool           `json:"nats_connected"`
	Time          time.Time      `json:"time"`
}

// GroupSummary is one group's line in Summary.
type GroupSummary struct {
	Group  string `json:"group"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// Live and Size are the live members the witness counts, and the
	// group's size.
	Live int `json:"live"`
	Size int `json:"size"`
	// SiteProtocolVersion is the protocol version the group runs at.
	SiteProtocolVersion int `json:"site_protocol_version"`
}

// Summary reports every group's leader and term as its witness sees them.
func (h *Host) Summary() Summary {
	s := Summary{ID: h.c.Agent.ID, Version: h.c.Version, Groups: len(h.groups), Failed: h.Failed(),
		NATSConnected: h.c.Conn.IsConnected(), Time: time.Now().UTC()}
	for _, g := range h.groups {
		r := h.agents[g].Status()
		if r.Leader != "" {
			s.Led++
		}
		s.Group = append(s.Group, GroupSummary{Group: g, Leader: r.Leader, Term: r.Term, Live: r.Quorum.Live,
			Size: len(r.Members), SiteProtocolVersion: r.SiteProtocolVersion})
	}
	return s
}

// Handler serves the host's HTTP API: /status (the Summary; with
// ?group=G that group's agent status, the JSON of `edge-agent run`'s
// /status), /healthz (200 while no group's agent failed), /readyz (200 while
// connected to NATS) and /metrics (every group's, labelled by group).
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var v any
		if g := r.URL.Query().Get("group"); g != "" {
			a, ok := h.agents[g]
			if !ok {
				http.Error(w, "this witness does not serve group "+g, http.StatusNotFound)
				return
			}
			v = a.Status()
		} else {
			v = h.Summary()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if failed := h.Failed(); len(failed) > 0 {
			http.Error(w, fmt.Sprintf("the witness agent of %d groups stopped (%s first), see the log", len(failed), failed[0]), http.StatusServiceUnavailable)
			return
		}
		if !h.Healthy() {
			http.Error(w, "an election loop is not running", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.Ready() {
			http.Error(w, "not ready: not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{Registry: h.reg}))
	return mux
}
