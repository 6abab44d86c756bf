package attack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// Lines collects log lines (an io.Writer for Options.Log).
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Write implements io.Writer.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

// Len returns how many lines were written.
func (l *Lines) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// Count returns how many lines after the first from contain every sub.
func (l *Lines) Count(from int, subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.lines[min(from, len(l.lines)):] {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// Bytes returns the bytes of the lines after the first from.
func (l *Lines) Bytes(from int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines[min(from, len(l.lines)):] {
		n += len(s) + 1
	}
	return n
}

// CLI runs the binary with args and returns its exit code, stdout and stderr.
func CLI(bin string, timeout time.Duration, args ...string) (int, string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errOut.String()
}

// OperatorArgs are the flags that make the CLI an operator's tool of s:
// the bus, the group, the operator key (login and signature) and the
// members' keys (to verify answers).
func (s *Site) OperatorArgs(at string) []string {
	var keys []string
	for _, id := range []string{"gw1", "gw2", "gw3"} {
		keys = append(keys, id+"="+s.Keys[id])
	}
	return []string{"--nats-url", s.ClientURLs[at], "--group", Group, "--nats-nkey-seed", s.OperatorSeed,
		"--member-keys", strings.Join(keys, ",")}
}

// MemberArgsCLI are the flags that make the CLI speak as member id.
func (s *Site) MemberArgsCLI(id, at string) []string {
	args := s.OperatorArgs(at)
	args[5] = s.Seeds[id]
	return args
}

// SiteArgs are the flags that make the CLI a client with the site password.
func (s *Site) SiteArgs(at string) []string {
	return []string{"--nats-url", s.ClientURLs[at], "--group", Group, "--nats-user", SiteUser, "--nats-password", SitePassword}
}

// Leader returns the leader and term that member id reports.
func (s *Site) Leader(id string) (string, uint64) {
	st, err := s.Status(id)
	if err != nil {
		return "", 0
	}
	return st.Leader, st.Term
}

// MaxTerm returns the highest term any running agent reports.
func (s *Site) MaxTerm() uint64 {
	var t uint64
	for _, id := range s.Running() {
		if _, term := s.Leader(id); term > t {
			t = term
		}
	}
	return t
}

// Metric returns the sum of the samples of metric name (with every label
// in match) on member id's /metrics.
func (s *Site) Metric(id, name string, match map[string]string) float64 {
	p := s.Proc(id)
	if p == nil {
		return -1
	}
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		for k, v := range match {
			if !strings.Contains(line, k+`="`+v+`"`) {
				continue next
			}
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// Request sends a control request of verb with body on nc (a raw client)
// and returns the first answer within timeout, or "".
func Request(nc *nats.Conn, verb string, body any, timeout time.Duration) string {
	b, _ := json.Marshal(body)
	m, err := nc.Request(wire.ControlSubject(Prefix, Group, verb), b, timeout)
	if err != nil {
		return ""
	}
	return string(m.Data)
}

// Duration formats d for a report, "-" for a negative one (not reached).
func Duration(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// mb formats bytes as MB.
func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// note writes a line of the attack's own to the site's log, if any.
func (s *Site) note(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "attack: %s\n", fmt.Sprintf(format, args...))
	}
}
