// Command raftpeer measures crash failover of hashicorp/raft, the peer that
// docs/BENCHMARKS.md sets beside edge-agent: 5 nodes in one process on
// loopback TCP transports, their failure detection set to edge-agent's window
// (HeartbeatTimeout = ElectionTimeout = k*H = 300 ms). Each trial shuts the
// leader's transport and raft down abruptly (no leadership transfer) and
// polls the survivors every millisecond until all name the same new leader
// and that leader is in the leader state. The crashed node then restarts on
// its old stores and address, as a restarted process would.
//
// It is a module of its own so that the root go.mod does not carry raft.
//
//	go run . -trials 40 -json ../../bin/bench/raft.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func main() {
	trials := flag.Int("trials", 40, "failovers to measure")
	nodes := flag.Int("nodes", 5, "raft nodes")
	timeout := flag.Duration("timeout", 300*time.Millisecond, "HeartbeatTimeout = ElectionTimeout (k*H)")
	jsonPath := flag.String("json", "", "write the samples here (benchresult JSON, for make bench)")
	flag.Parse()
	if err := run(*trials, *nodes, *timeout, *jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "raftpeer:", err)
		os.Exit(1)
	}
}

// node is one raft server; its stores outlive a crash, like a disk.
type node struct {
	id     raft.ServerID
	addr   raft.ServerAddress
	logs   *raft.InmemStore
	snaps  raft.SnapshotStore
	trans  *raft.NetworkTransport
	r      *raft.Raft
	config *raft.Config
}

func (n *node) start(timeout time.Duration) error {
	bind := string(n.addr)
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	t, err := raft.NewTCPTransport(bind, nil, 3, 2*time.Second, io.Discard)
	if err != nil {
		return err
	}
	n.trans, n.addr = t, t.LocalAddr()
	c := raft.DefaultConfig()
	c.LocalID = n.id
	c.HeartbeatTimeout = timeout
	c.ElectionTimeout = timeout
	// LeaderLeaseTimeout may not exceed HeartbeatTimeout; at the limit, a
	// leader cut off steps down after 300 ms without a quorum.
	c.LeaderLeaseTimeout = timeout
	c.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	n.config = c
	r, err := raft.NewRaft(c, &fsm{}, n.logs, n.logs, n.snaps, t)
	if err != nil {
		t.Close()
		return err
	}
	n.r = r
	return nil
}

// crash stops the node without a word to its peers: the transport first (no
// more messages in or out), then raft.
func (n *node) crash() {
	_ = n.trans.Close()
	_ = n.r.Shutdown().Error()
}

type fsm struct{}

func (*fsm) Apply(*raft.Log) any                 { return nil }
func (*fsm) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (*fsm) Restore(rc io.ReadCloser) error      { return rc.Close() }

func run(trials, n int, timeout time.Duration, jsonPath string) error {
	began := time.Now()
	nodes := make([]*node, n)
	var servers []raft.Server
	for i := range nodes {
		nodes[i] = &node{id: raft.ServerID(fmt.Sprintf("n%d", i+1)), logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		if err := nodes[i].start(timeout); err != nil {
			return err
		}
		servers = append(servers, raft.Server{ID: nodes[i].id, Address: nodes[i].addr})
	}
	defer func() {
		for _, nd := range nodes {
			nd.crash()
		}
	}()
	if err := nodes[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		return err
	}
	leader, err := waitLeader(nodes, "", 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("hashicorp/raft %s: %d nodes, loopback TCP, HeartbeatTimeout = ElectionTimeout = LeaderLeaseTimeout = %s\n",
		raftVersion(), n, timeout)
	var samples []float64
	for i := 0; i < trials; i++ {
		// Let the restarted node settle, then crash the leader at a random
		// phase of its heartbeat cycle (HeartbeatTimeout/10).
		time.Sleep(timeout + rand.N(timeout))
		victim := nodes[slices.IndexFunc(nodes, func(nd *node) bool { return nd.id == leader })]
		t0 := time.Now()
		victim.crash()
		next, err := waitLeader(nodes, leader, 30*time.Second, victim)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		d := time.Since(t0)
		samples = append(samples, float64(d.Microseconds())/1000)
		fmt.Printf("trial %2d: %s -> %s in %6.1f ms\n", i+1, leader, next, float64(d.Microseconds())/1000)
		if err := victim.start(timeout); err != nil {
			return fmt.Errorf("trial %d: restart %s: %w", i+1, victim.id, err)
		}
		if leader, err = waitLeader(nodes, "", 30*time.Second); err != nil {
			return fmt.Errorf("trial %d: after restart: %w", i+1, err)
		}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	fmt.Printf("\ntrials %d: min %.1f ms, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", len(s), s[0], pct(s, 50), pct(s, 99), s[len(s)-1])
	if jsonPath == "" {
		return nil
	}
	return write(jsonPath, began, series{
		Figure: "peer", Name: "hashicorp/raft " + raftVersion() + ": crash, heartbeat timeout", Algorithm: "raft", Unit: "ms", Chart: true,
		Settings: fmt.Sprintf("%d raft nodes in one process, loopback TCP transport, in-memory stores, HeartbeatTimeout = ElectionTimeout = LeaderLeaseTimeout = %s; the leader's transport and raft shut down abruptly; polled every 1 ms", n, timeout),
		Samples:  samples,
	})
}

// waitLeader polls the running nodes (all but skip) until every one names
// the same leader, not old, and that leader is in the leader state.
func waitLeader(nodes []*node, old raft.ServerID, timeout time.Duration, skip ...*node) (raft.ServerID, error) {
	deadline := time.Now().Add(timeout)
	for {
		var id raft.ServerID
		ok := true
		for _, nd := range nodes {
			if slices.Contains(skip, nd) {
				continue
			}
			_, l := nd.r.LeaderWithID()
			if l == "" || l == old || (id != "" && l != id) {
				ok = false
				break
			}
			id = l
		}
		if ok {
			for _, nd := range nodes {
				if nd.id == id && !slices.Contains(skip, nd) && nd.r.State() == raft.Leader {
					return id, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no agreed leader within %s", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func pct(sorted []float64, p float64) float64 {
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func raftVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/hashicorp/raft" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// series and file mirror internal/benchresult of the root module, whose JSON
// field names are the contract with bench/report.
type series struct {
	Figure    string    `json:"figure"`
	Name      string    `json:"name"`
	Algorithm string    `json:"algorithm,omitempty"`
	Settings  string    `json:"settings"`
	Unit      string    `json:"unit"`
	Samples   []float64 `json:"samples,omitempty"`
	Chart     bool      `json:"chart,omitempty"`
}

type file struct {
	Program string   `json:"program"`
	Started string   `json:"started"`
	Seconds float64  `json:"seconds"`
	Series  []series `json:"series"`
	Load1   float64  `json:"load1"`
	// CPUPressure and IOPressure: see internal/benchresult.
	CPUPressure float64 `json:"cpu_pressure"`
	IOPressure  float64 `json:"io_pressure"`
}

var (
	startCPU, startCPUOK = pressureTotal("cpu")
	startIO, startIOOK   = pressureTotal("io")
)

// pressureTotal reads the total time some task waited for resource (PSI).
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

func write(path string, began time.Time, s series) error {
	f := file{Program: "raftpeer", Started: began.UTC().Format(time.RFC3339), Seconds: time.Since(began).Seconds(), Series: []series{s}}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &f.Load1)
	}
	f.CPUPressure, f.IOPressure = -1, -1
	if now, ok := pressureTotal("cpu"); ok && startCPUOK {
		f.CPUPressure = (now - startCPU).Seconds() / time.Since(began).Seconds()
	}
	if now, ok := pressureTotal("io"); ok && startIOOK {
		f.IOPressure = (now - startIO).Seconds() / time.Since(began).Seconds()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
