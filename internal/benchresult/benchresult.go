// Package benchresult is the record that every benchmark of `make bench`
// writes: one JSON file per run, a list of measured series, each with its raw
// samples and the targets of the issue that it is judged against. The report
// generator (bench/report, a module of its own) reads these files, computes
// the percentiles and writes docs/BENCHMARKS.md; the JSON field names are the
// contract between the two.
package benchresult

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/election"
)

// Series is one measured distribution: a row of the report.
type Series struct {
	// Figure groups rows into the report's tables: failover, handover,
	// deliveries, footprint, scale or peer.
	Figure string `json:"figure"`
	// Name labels the row.
	Name string `json:"name"`
	// Algorithm is bully or ring (empty where it does not apply).
	Algorithm string `json:"algorithm,omitempty"`
	// Settings states how the row was measured (n, H, k, ...).
	Settings string `json:"settings"`
	// Unit of the samples: ms, deliveries, MB, %, ...
	Unit string `json:"unit"`
	// Samples are the raw measurements, one per trial.
	Samples []float64 `json:"samples,omitempty"`
	// Targets are the limits for this row.
	Targets []Target `json:"targets,omitempty"`
	// Pending, when set, says why nothing was measured (for example an
	// algorithm that is not available yet).
	Pending string `json:"pending,omitempty"`
	// Note is shown under the table.
	Note string `json:"note,omitempty"`
	// Chart includes the row in the failover distribution chart.
	Chart bool `json:"chart,omitempty"`
	// Product names the implementation measured where a figure sets
	// products side by side (figure vip: edge-agent, keepalived).
	Product string `json:"product,omitempty"`
	// Counts are events counted over the trials (figure vip: trials with two
	// holders), shown side by side per product.
	Counts []Count `json:"counts,omitempty"`
}

// Count is N trials of Of in which what Name says happened.
type Count struct {
	Name string `json:"name"`
	N    int    `json:"n"`
	Of   int    `json:"of"`
}

// Target is one limit: Stat (p50, p99, mean, max, min) of the samples must be
// at most Max, or (when AtLeast is set) at least Min.
type Target struct {
	Stat    string  `json:"stat"`
	Max     float64 `json:"max,omitempty"`
	Min     float64 `json:"min,omitempty"`
	AtLeast bool    `json:"at_least,omitempty"`
}

// File is what one benchmark program writes.
type File struct {
	Program string   `json:"program"`
	Started string   `json:"started"`
	Seconds float64  `json:"seconds"`
	Series  []Series `json:"series"`
	// Load1 is the machine's 1-minute load average when the file was
	// written: the benchmarks share the machine with whatever else runs.
	Load1 float64 `json:"load1"`
	// CPUPressure is the share of the program's run during which some
	// runnable task waited for a CPU (Linux PSI, /proc/pressure/cpu "some"),
	// whoever's task it was; -1 where the kernel does not report it.
	CPUPressure float64 `json:"cpu_pressure"`
	// IOPressure is the same for tasks waiting on I/O (/proc/pressure/io):
	// an agent persists its term with fsync before it proclaims or votes.
	IOPressure float64 `json:"io_pressure"`
	// Env describes the machine and the versions (bench env only).
	Env []KV `json:"env,omitempty"`
}

// KV is one line of the environment description.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Write writes f as indented JSON to path, creating its directory, and
// stamps it with the current load average.
func Write(path string, f File) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f.Load1 = LoadAvg()
	f.CPUPressure, f.IOPressure = -1, -1
	if now, ok := pressureTotal("cpu"); ok && startCPUOK {
		f.CPUPressure = (now - startCPU).Seconds() / time.Since(startTime).Seconds()
	}
	if now, ok := pressureTotal("io"); ok && startIOOK {
		f.IOPressure = (now - startIO).Seconds() / time.Since(startTime).Seconds()
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Ms converts d to milliseconds with microsecond resolution.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Percentile returns the nearest-rank percentile p (0..100) of xs: the
// smallest sample with at least p% of the samples at or below it. With fewer
// than 100 samples p99 is therefore the maximum, never an interpolation
// below it.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// AlgorithmAvailable reports whether this build of the agent can run alg: it
// builds (and discards) a one-member agent with it. A benchmark of an
// algorithm that is not there records a pending row instead of failing.
func AlgorithmAvailable(alg string) error {
	cfg := agent.Config{
		ID: "probe", Group: "probe", Algorithm: alg, StateDir: "unused",
		Members: []election.Member{{ID: "probe", Priority: 1}},
	}
	a, err := agent.New(cfg, agent.WithStore(nopStore{}))
	if err != nil {
		return err
	}
	_ = a // never run
	return nil
}

// nopStore keeps nothing; the probe agent never runs.
type nopStore struct{}

func (nopStore) Load() election.HardState      { return election.HardState{} }
func (nopStore) Save(election.HardState) error { return nil }
func (nopStore) Close() error                  { return nil }

// LoadAvg returns the 1-minute load average (0 where /proc is missing).
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscan(string(b), &l)
	return l
}

// The program's start, for CPUPressure and IOPressure.
var (
	startTime            = time.Now()
	startCPU, startCPUOK = pressureTotal("cpu")
	startIO, startIOOK   = pressureTotal("io")
)

// pressureTotal reads the total time some task waited for resource (cpu,
// io), from Linux's pressure stall information.
func pressureTotal(resource string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/pressure/" + resource)
	if err != nil {
		return 0, false
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}
