// Package harness runs a site of real edge-agent processes against a real
// NATS server, for end-to-end tests and benchmarks. It builds the binary,
// starts agents as separate OS processes, reads their /status over HTTP and
// kills or stops them with real signals.
package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// BuildBinary compiles cmd/edge-agent into dir and returns its path. It
// finds the module root from this source file, so it works from any package.
func BuildBinary(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "edge-agent")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/edge-agent")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// StartNATS starts a real nats-server in this process on a free loopback
// port.
func StartNATS() (*server.Server, error) {
	return StartServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
}

// StartServer runs a nats-server with opts in this process and waits until
// it accepts clients.
func StartServer(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats-server not ready")
	}
	return s, nil
}

// SystemUser and SystemPassword log in to the system account of the server
// StartNATSWithSystemAccount starts.
const (
	SystemUser     = "sys"
	SystemPassword = "sys-secret"
)

// StartNATSWithSystemAccount starts a real nats-server whose clients land,
// without credentials, in an application account, and whose system account
// (client disconnect advisories) is reachable as SystemUser.
func StartNATSWithSystemAccount() (*server.Server, error) {
	app := server.NewAccount("APP")
	sys := server.NewAccount("SYS")
	return StartServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Accounts:      []*server.Account{app, sys},
		SystemAccount: "SYS",
		Users: []*server.User{
			{Username: "app", Password: "app", Account: app},
			{Username: SystemUser, Password: SystemPassword, Account: sys},
		},
		NoAuthUser: "app",
	})
}

// Site is a group of agent processes sharing one NATS URL, or each running
// its own embedded server clustered with the others' (NewClusterSite).
type Site struct {
	Bin string
	// NATSURL is given to every agent as --nats-url; "" gives none (each
	// agent's MemberArgs then say where its bus is).
	NATSURL string
	Group   string
	Dir     string
	// Members is the --members flag value, e.g. "gw1=1,gw2=2".
	Members string
	// Args are extra flags for every agent (e.g. --heartbeat 100ms).
	Args []string
	// Log, if set, receives every agent's log lines prefixed with its id,
	// one whole line per Write (the agents' lines are serialized).
	Log io.Writer
	// Journals makes every agent append its leadership journal to
	// Dir/<id>.journal (see JournalPaths).
	Journals bool
	// MemberArgs, if set, returns extra flags for member id, after Args.
	MemberArgs func(id string) []string
	// Command, if set, returns the command line that runs member id's
	// binary, e.g. {"qemu-aarch64-static", "/tmp/edge-agent-arm64"}; by
	// default {Bin}.
	Command func(id string) []string
	// ClientURLs are the client URLs of the members' embedded servers, by
	// id (NewClusterSite), for commands such as edge-agent status.
	ClientURLs map[string]string

	mu    sync.Mutex
	procs map[string]*Proc
	logMu sync.Mutex // serializes the agents' lines to Log
}

// Proc is one running agent process.
type Proc struct {
	ID       string
	Cmd      *exec.Cmd
	HTTPAddr string
	exited   chan struct{}
	exitErr  error
}

// NewSite prepares a site of n members gw1..gwN with priorities 1..n.
func NewSite(bin, natsURL, dir string, n int, args ...string) *Site {
	var ms []string
	for i := 1; i <= n; i++ {
		ms = append(ms, fmt.Sprintf("gw%d=%d", i, i))
	}
	return &Site{Bin: bin, NATSURL: natsURL, Group: "site", Dir: dir, Members: strings.Join(ms, ","), Args: args, procs: map[string]*Proc{}}
}

// IDs returns the member ids gw1..gwN.
func (s *Site) IDs() []string {
	var ids []string
	for _, m := range strings.Split(s.Members, ",") {
		ids = append(ids, strings.SplitN(m, "=", 2)[0])
	}
	return ids
}

// JournalPaths returns the journal file of every member (with Journals set).
func (s *Site) JournalPaths() []string {
	var ps []string
	for _, id := range s.IDs() {
		ps = append(ps, filepath.Join(s.Dir, id+".journal"))
	}
	return ps
}

// Start launches agent id and waits until its HTTP endpoint is up.
func (s *Site) Start(id string) (*Proc, error) {
	args := []string{"run",
		"--id", id, "--group", s.Group, "--members", s.Members,
		"--state-dir", filepath.Join(s.Dir, id),
		"--http-addr", "127.0.0.1:0", "--log-format", "json",
	}
	if s.NATSURL != "" {
		args = append(args, "--nats-url", s.NATSURL)
	}
	args = append(args, s.Args...)
	if s.Journals {
		args = append(args, "--journal", filepath.Join(s.Dir, id+".journal"))
	}
	if s.MemberArgs != nil {
		args = append(args, s.MemberArgs(id)...)
	}
	argv := []string{s.Bin}
	if s.Command != nil {
		argv = s.Command(id)
	}
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{ID: id, Cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	var (
		lastMu sync.Mutex
		last   []string // the last lines, for an agent that exits at start
	)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			lastMu.Lock()
			if last = append(last, line); len(last) > 20 {
				last = last[1:]
			}
			lastMu.Unlock()
			if s.Log != nil {
				s.logMu.Lock()
				fmt.Fprintf(s.Log, "%s: %s\n", id, line)
				s.logMu.Unlock()
			}
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http listening" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	select {
	case p.HTTPAddr = <-addr:
	case <-p.exited:
		<-scanned
		lastMu.Lock()
		defer lastMu.Unlock()
		return nil, fmt.Errorf("agent %s exited at start: %v; its last lines:\n%s", id, p.exitErr, strings.Join(last, "\n"))
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("agent %s: no http address within 20s", id)
	}
	s.mu.Lock()
	s.procs[id] = p
	s.mu.Unlock()
	return p, nil
}

// StartAll launches every member.
func (s *Site) StartAll() error {
	for _, id := range s.IDs() {
		if _, err := s.Start(id); err != nil {
			return err
		}
	}
	return nil
}

// Proc returns the running process of id, or nil.
func (s *Site) Proc(id string) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[id]
}

// Running returns the ids of the running agents.
func (s *Site) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, id := range s.IDs() {
		if _, ok := s.procs[id]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.exitErr
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to id and waits for it to die.
func (s *Site) Kill(id string) error {
	return s.signal(id, syscall.SIGKILL)
}

// Terminate sends SIGTERM to id and waits for it to exit; it returns the
// process's exit error (nil for exit code 0).
func (s *Site) Terminate(id string) error {
	return s.signal(id, syscall.SIGTERM)
}

func (s *Site) signal(id string, sig syscall.Signal) error {
	wait, err := s.StopAsync(id, sig)
	if err != nil {
		return err
	}
	return wait()
}

func (s *Site) journalDeath(id string, at time.Time) error {
	if !s.Journals {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, id+".journal"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	b, _ := json.Marshal(agent.JournalEntry{T: at.UnixNano(), ID: id, Event: "stop", Reason: "killed"})
	_, err = f.Write(append(b, '\n'))
	return err
}

// Stop kills every running agent.
func (s *Site) Stop() {
	for _, id := range s.Running() {
		_ = s.Kill(id)
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// Status reads the /status of a running agent.
func (p *Proc) Status(ctx context.Context) (agent.StatusReport, error) {
	var r agent.StatusReport
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.HTTPAddr+"/status", nil)
	if err != nil {
		return r, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("status %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// Agreement is what WaitAgreement found.
type Agreement struct {
	Leader string
	Term   uint64
	// At is when every agent first reported it.
	At time.Time
}

// WaitAgreement polls the /status of ids until all report the same leader,
// not equal to exclude, in a term above minTerm, and that leader (if among
// ids) reports itself leader. It fails after timeout. It checks at the fixed
// interval every (poll.Every): At is a measured time, failover figures are
// taken from it.
func (s *Site) WaitAgreement(ids []string, exclude string, minTerm uint64, every, timeout time.Duration) (Agreement, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var a Agreement
	var last string
	err := poll.Every(every, timeout, "agreement", func() (bool, string) {
		var ok bool
		var why string
		a, ok, why = s.agreement(ctx, ids, exclude, minTerm)
		if !ok && ctx.Err() == nil {
			last = why // not the poll the deadline cut short
		}
		return ok, last
	})
	if err != nil {
		return Agreement{}, fmt.Errorf("no agreement within %s: %s; now: %s", timeout, last, s.describe(ids))
	}
	return a, nil
}

// describe gives what each of ids reports now (for a failure message).
func (s *Site) describe(ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		p := s.Proc(id)
		if p == nil {
			fmt.Fprintf(&b, "[%s not running] ", id)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := p.Status(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "[%s: %v] ", id, err)
			continue
		}
		fmt.Fprintf(&b, "[%s %s leader %q term %d] ", id, st.Role, st.Leader, st.Term)
	}
	return strings.TrimSpace(b.String())
}

func (s *Site) agreement(ctx context.Context, ids []string, exclude string, minTerm uint64) (Agreement, bool, string) {
	var a Agreement
	for i, id := range ids {
		p := s.Proc(id)
		if p == nil {
			return a, false, id + " not running"
		}
		st, err := p.Status(ctx)
		if err != nil {
			return a, false, id + ": " + err.Error()
		}
		if st.Leader == "" || st.Leader == exclude || st.Term <= minTerm {
			return a, false, fmt.Sprintf("%s reports leader %q term %d", id, st.Leader, st.Term)
		}
		if i > 0 && st.Leader != a.Leader {
			return a, false, fmt.Sprintf("%s reports %q, others %q", id, st.Leader, a.Leader)
		}
		if st.ID == st.Leader && st.Role != "leader" {
			return a, false, id + " named itself but is " + st.Role
		}
		a.Leader = st.Leader
		if st.Term > a.Term {
			a.Term = st.Term
		}
	}
	a.At = time.Now()
	return a, true, ""
}
