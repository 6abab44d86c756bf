package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// PushgatewayBin is where Debian's prometheus-pushgateway package installs
// the Pushgateway.
const PushgatewayBin = "/usr/bin/prometheus-pushgateway"

// FindPushgateway returns the Pushgateway binary: $PUSHGATEWAY_BIN, the
// Debian path, or prometheus-pushgateway or pushgateway on $PATH.
func FindPushgateway() (string, error) {
	if p := os.Getenv("PUSHGATEWAY_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("PUSHGATEWAY_BIN: %w", err)
		}
		return p, nil
	}
	if _, err := os.Stat(PushgatewayBin); err == nil {
		return PushgatewayBin, nil
	}
	for _, name := range []string{"prometheus-pushgateway", "pushgateway"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Pushgateway binary (apt-get install prometheus-pushgateway)")
}

// Pushgateway is a real Pushgateway process on a loopback port, keeping its
// metrics in memory only (a restart forgets every pushed group).
type Pushgateway struct {
	Bin  string
	Addr string // 127.0.0.1:PORT, the same across restarts
	Log  io.Writer

	cmd    *exec.Cmd
	exited chan struct{}
}

// StartPushgateway starts bin on a free loopback port and waits until it is
// ready.
func StartPushgateway(bin string, log io.Writer) (*Pushgateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	pg := &Pushgateway{Bin: bin, Addr: addr, Log: log}
	return pg, pg.Start()
}

// URL is the base URL agents push to.
func (pg *Pushgateway) URL() string { return "http://" + pg.Addr }

// Start (re)starts the process on Addr and waits until it answers /-/ready.
func (pg *Pushgateway) Start() error {
	if pg.cmd != nil {
		return errors.New("pushgateway already running")
	}
	cmd := exec.Command(pg.Bin, "--web.listen-address="+pg.Addr, "--persistence.file=", "--log.level=warn")
	out := pg.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	pg.cmd = cmd
	pg.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(pg.exited)
	}()
	exited := false
	err := poll.For(20*time.Second, "pushgateway on "+pg.Addr+" to be ready", func() (bool, string) {
		resp, err := httpClient.Get(pg.URL() + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, ""
			}
			err = fmt.Errorf("/-/ready: %s", resp.Status)
		}
		select {
		case <-pg.exited:
			exited = true // nothing more to wait for
			return true, ""
		default:
		}
		return false, err.Error()
	})
	switch {
	case exited:
		pg.cmd = nil
		return fmt.Errorf("pushgateway exited at start (port %s taken?)", pg.Addr)
	case err != nil:
		_ = pg.Stop()
		return err
	}
	return nil
}

// Stop terminates the process and waits for it to exit.
func (pg *Pushgateway) Stop() error {
	if pg.cmd == nil {
		return nil
	}
	_ = pg.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pg.exited:
	case <-time.After(10 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-pg.exited
	}
	pg.cmd = nil
	return nil
}

// Sample is one line of the text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics reads the Pushgateway's /metrics.
func (pg *Pushgateway) Metrics(ctx context.Context) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pg.URL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics parses the text exposition format, enough for the label
// values edge-agent pushes (no escaped quotes).
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("bad line %q", line)
			}
			s.Name = line[:i]
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, fmt.Errorf("bad label %q in %q", kv, line)
				}
				s.Labels[k] = strings.Trim(v, `"`)
			}
			rest = line[j+1:]
		} else {
			s.Name, rest, _ = strings.Cut(line, " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q", line)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	in := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			in = !in
		case ',':
			if !in {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// Find returns the value of the first sample named name whose labels
// include every pair of match.
func Find(samples []Sample, name string, match map[string]string) (float64, bool) {
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		return s.Value, true
	}
	return 0, false
}

// RequirePushgateway returns the Pushgateway binary for a test. Without
// one the test is skipped, unless CI is "true": CI installs the package, so
// there a missing binary fails the test instead of hiding it.
func RequirePushgateway(t testing.TB) string {
	t.Helper()
	bin, err := FindPushgateway()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI=true requires it", err)
		}
		t.Skipf("%v: skipped (with CI=true this fails)", err)
	}
	return bin
}

// EnvCount reads a count (a non-negative integer) from the environment
// variable name, or returns def when it is unset; anything else fails t.
// Long fault tests take their counts this way (Makefile targets set them).
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}
