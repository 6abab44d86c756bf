package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-agent/edge-agent/agent/ratelimit"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// Maintenance: draining a gateway, and standing aside when another process
// speaks with this member's id.
//
// A drained member hands over if it leads and never stands until it is
// undrained (election.Node.Drain); the flag is kept in the state directory,
// so that it holds across restarts and a drained agent does not stand even
// once after one. A quarantined member (a duplicate id, below) does not stand
// either, and sends nothing at all: two processes with one id could vote
// twice in a term between them.

// DrainStore is a Store that also keeps the drained flag. FileStore is one;
// an agent whose store is not refuses Drain.
type DrainStore interface {
	// LoadDrained returns the stored flag (false when none was stored).
	LoadDrained() (bool, error)
	// SaveDrained stores the flag durably before it returns.
	SaveDrained(drained bool) error
}

const (
	drainFileName = "drained.json"
	drainTmpName  = "drained.json.tmp"
)

// LoadDrained implements DrainStore: dir/drained.json, absent = not drained.
// A file that cannot be read or parsed is an error, never "not drained": a
// drained gateway must not stand because its flag was damaged.
func (s *FileStore) LoadDrained() (bool, error) {
	path := filepath.Join(s.dir, drainFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("agent: cannot read %s: %w", path, err)
	}
	var v struct {
		Drained *bool `json:"drained"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Drained == nil {
		return false, fmt.Errorf("agent: %s is corrupt (want {\"drained\": true|false}): fix it or remove it (edge-agent undrain then rewrites it)", path)
	}
	return *v.Drained, nil
}

// SaveDrained implements DrainStore: written to a temporary file, fsynced,
// renamed over drained.json, and the directory fsynced, as state.json is.
func (s *FileStore) SaveDrained(drained bool) error {
	data, _ := json.Marshal(struct {
		Drained bool `json:"drained"`
	}{drained})
	if err := s.saveSmall(drainFileName, drainTmpName, data); err != nil {
		return fmt.Errorf("agent: save drained flag: %w", err)
	}
	return nil
}

// saveSmall writes data (and a newline) durably to the state directory's
// file name: to tmp, fsynced, renamed over name, and the directory fsynced.
func (s *FileStore) saveSmall(name, tmp string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("agent: state store is closed")
	}
	tmpPath := filepath.Join(s.dir, tmp)
	f, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(data, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmpPath, filepath.Join(s.dir, name))
	}
	if werr != nil {
		os.Remove(tmpPath)
		return werr
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("fsync dir %s: %w", s.dir, err)
	}
	return nil
}

// ErrNoDrainStore is returned by Drain on an agent whose store cannot keep
// the drained flag.
var ErrNoDrainStore = errors.New("agent: the state store cannot keep the drained flag")

// maintenance is the drained flag and the duplicate-id quarantine.
type maintenance struct {
	drained     atomic.Bool
	quarantined atomic.Bool
	// Loop-owned.
	dupUntil time.Duration // quarantined until then (monotonic, from start)
	dupLog   *ratelimit.Limiter
	// dupOther is the last instance heard speaking with this member's id.
	mu       sync.Mutex
	dupOther string

	// promiseTimer stores this run's shorter D once the last run's
	// longer one has passed (keepPromise); nil when none is due.
	promiseTimer *time.Timer

	drainedGauge prometheus.Gauge
	dupGauge     prometheus.Gauge
	dupTotal     prometheus.Counter
}

// DuplicateHold is how long, in units of D, a member stays quarantined
// after it last heard another process speak with its id: the other process
// announces itself every H, so a live duplicate keeps it quarantined.
const DuplicateHold = 2

func (a *Agent) initMaintenance() error {
	f := a.series()
	a.maint.drainedGauge = f.gauge(prometheus.GaugeOpts{Name: "edge_election_drained",
		Help: "1 while this member is drained (edge-agent drain): it never stands for election."})
	a.maint.dupGauge = f.gauge(prometheus.GaugeOpts{Name: "edge_election_duplicate_id",
		Help: "1 while another process speaks with this member's id: this one stands aside (no vote, no acknowledgement, never leads)."})
	a.maint.dupTotal = f.counter(prometheus.CounterOpts{Name: "edge_election_duplicate_id_total",
		Help: "Announcements heard from another process with this member's id."})
	witness := f.gauge(prometheus.GaugeOpts{Name: "edge_election_witness",
		Help: "1 when this member is a witness (witnesses): it votes and acknowledges heartbeats but never leads."})
	boolGauge(witness, a.cfg.IsWitness(a.cfg.ID))
	// One ERROR per D while the duplicate speaks (the first at once).
	a.maint.dupLog = ratelimit.NewLimiter(1/max(a.cfg.SuspectAfter(), time.Second).Seconds(), 1, 1)
	if ds, ok := a.store.(DrainStore); ok {
		d, err := ds.LoadDrained()
		if err != nil {
			return err
		}
		a.maint.drained.Store(d)
		boolGauge(a.maint.drainedGauge, d)
		if d {
			a.log.Warn("this member is drained: it never stands for election until edge-agent undrain " + a.cfg.ID)
		}
	}
	return nil
}

// Drained reports whether this member is drained.
func (a *Agent) Drained() bool { return a.maint.drained.Load() }

// Drain drains (on) or undrains this member: the flag is stored durably
// first, then the election core is told; a drained leader hands over at
// once (a planned handover), as Resign does. It returns
// ErrHandoverNotAnnounced as Resign does.
func (a *Agent) Drain(ctx context.Context, on bool) error {
	return a.ask(ctx, request{drain: &on})
}

// setDrained is Drain in the loop; herr is the answer, err a failure to
// persist the election state.
func (a *Agent) setDrained(on bool) (herr, err error) {
	ds, ok := a.store.(DrainStore)
	if !ok {
		return ErrNoDrainStore, nil
	}
	if a.maint.drained.Load() != on {
		if herr := ds.SaveDrained(on); herr != nil {
			a.log.Error("cannot store the drained flag", "err", herr)
			return herr, nil
		}
	}
	a.maint.drained.Store(on)
	boolGauge(a.maint.drainedGauge, on)
	if on {
		a.log.Info("drained: this member hands over if it leads and never stands until undrained")
	} else {
		a.log.Info("undrained: this member may stand for election again")
	}
	a.core.withheld = false
	a.node.Drain(a.standAside())
	if err = a.process(); err == nil {
		a.flush()
	}
	if a.core.withheld {
		herr = ErrHandoverNotAnnounced
	}
	return herr, err
}

// standAside reports whether the core must not stand: drained, or
// quarantined.
func (a *Agent) standAside() bool { return a.maint.drained.Load() || a.maint.quarantined.Load() }

// onDuplicate handles the bus's report that another process announced
// itself with this member's id (instance names it). The member stands aside
// for DuplicateHold*D after the last such report: it steps down if it leads
// (handing over) and sends nothing else meanwhile, so that the two processes
// cannot both vote; the rest of the group elects without it.
func (a *Agent) onDuplicate(instance string) {
	a.maint.dupTotal.Inc()
	a.maint.mu.Lock()
	a.maint.dupOther = instance
	a.maint.mu.Unlock()
	a.maint.dupUntil = a.mono() + DuplicateHold*a.cfg.SuspectAfter()
	if a.maint.dupLog.Allow("dup", a.mono()) {
		a.log.Error("another process speaks with this member's id: standing aside (no vote, no acknowledgement, never leading) until it stops; give each gateway its own id",
			"duplicate_id", a.cfg.ID, "other_instance", instance, "this_instance", Instance())
	}
	if a.maint.quarantined.Swap(true) {
		return
	}
	a.maint.dupGauge.Set(1)
	a.node.Drain(true)
}

// liftQuarantine ends the quarantine once the other process was silent for
// the hold; it runs before each Ready is taken.
func (a *Agent) liftQuarantine() {
	if !a.maint.quarantined.Load() || a.mono() < a.maint.dupUntil {
		return
	}
	a.maint.quarantined.Store(false)
	a.maint.dupGauge.Set(0)
	a.log.Info("no longer hears another process with this member's id: taking part again", "duplicate_id", a.cfg.ID)
	a.node.Drain(a.standAside())
}

// duplicateInstance is the other process last heard with this id while the
// quarantine lasts, else "".
func (a *Agent) duplicateInstance() string {
	if !a.maint.quarantined.Load() {
		return ""
	}
	a.maint.mu.Lock()
	defer a.maint.mu.Unlock()
	return a.maint.dupOther
}

var instanceOnce = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/%08x", host, os.Getpid(), uint32(wire.RandomNonce()))
})

// Instance names this process to the others with the same member id:
// host, pid and a random nonce ("gw1-box/1234/9f8e7d6c").
func Instance() string { return instanceOnce() }

// standAsideReason is the status's reason for having no leader that this
// member can tell: it is drained (or quarantined) and knows of no leader.
func (a *Agent) standAsideReason() string {
	switch {
	case a.maint.quarantined.Load():
		return "another process speaks with this member's id: it stands aside"
	case a.maint.drained.Load():
		return "drained: it never stands"
	}
	return ""
}

// keepDuringQuarantine reports whether m may be sent while quarantined:
// only the RESIGN of the handover that the quarantine started.
func keepDuringQuarantine(m election.Message) bool { return m.Type == election.MsgResign }

// maintenanceStatus fills the status fields of drain.go.
func (a *Agent) maintenanceStatus(r *StatusReport) {
	r.Drained = a.maint.drained.Load()
	r.Witness = a.cfg.IsWitness(a.cfg.ID)
	r.DuplicateInstance = a.duplicateInstance()
	if r.Leader == "" {
		r.NoLeaderReason = a.standAsideReason()
	}
	r.Preemption = string(a.cfg.Preemption)
	if r.Preemption == "" {
		r.Preemption = string(PreemptHoldDown)
	}
	r.HoldDownMS = a.cfg.HoldDown.Milliseconds()
}
