package attack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// Secrets of row 7.
const (
	natsSecret = "nats-s3cret"
	pushSecret = "pg-s3cret"
)

// Row7 counts the secrets that reach an operator's screen or the journal.
type Row7 struct {
	// CheckConfig is how many times check-config printed a password (of
	// the NATS URL or of the Pushgateway URL), ConfigError the same for a
	// config error about such a URL, and Log for the agent's log over a
	// start, failing pushes and a reconnect to NATS.
	CheckConfig, ConfigError, Log int
	// Lines are the first lines that carried a password.
	Lines []string
}

func (r Row7) String() string {
	return fmt.Sprintf("passwords printed: check-config %d, config error %d, agent log (start, failed pushes, NATS reconnect) %d", r.CheckConfig, r.ConfigError, r.Log)
}

func (r *Row7) count(text string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if c := strings.Count(line, natsSecret) + strings.Count(line, pushSecret); c > 0 {
			n += c
			if len(r.Lines) < 5 {
				r.Lines = append(r.Lines, line)
			}
		}
	}
	return n
}

// AttackRow7 runs row 7 with bin in dir.
func AttackRow7(bin, dir string) (Row7, error) {
	var r Row7
	ports, err := harness.FreePorts(1)
	if err != nil {
		return r, err
	}
	opts := func() *server.Options {
		return &server.Options{Host: "127.0.0.1", Port: ports[0], NoLog: true, NoSigs: true, Username: "site", Password: natsSecret}
	}
	srv, err := server.NewServer(opts())
	if err != nil {
		return r, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		return r, fmt.Errorf("nats-server not ready")
	}
	defer func() { srv.Shutdown() }()
	cfg := filepath.Join(dir, "secrets.yaml")
	body := fmt.Sprintf(`id: gw1
group: secrets
members: [gw1]
heartbeat: 100ms
state_dir: %s
http_addr: 127.0.0.1:0
log_format: json
nats:
  urls: ["nats://site:%s@127.0.0.1:%d"]
pushgateway:
  url: "http://pgu:%s@127.0.0.1:1"
  interval: 200ms
`, filepath.Join(dir, "state"), natsSecret, ports[0], pushSecret)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return r, err
	}
	_, out, errOut := CLI(bin, 10*time.Second, "check-config", "--config", cfg)
	r.CheckConfig = r.count(out + errOut)
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(body, fmt.Sprintf(":%d\"]", ports[0]), ":99999\"]", 1)), 0o600); err != nil {
		return r, err
	}
	_, out, errOut = CLI(bin, 10*time.Second, "check-config", "--config", bad)
	r.ConfigError = r.count(out + errOut)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	var log strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(p) })
	if err := cmd.Start(); err != nil {
		return r, err
	}
	time.Sleep(2 * time.Second) // start, and pushes failing
	srv.Shutdown()
	srv.WaitForShutdown()
	time.Sleep(500 * time.Millisecond)
	if srv, err = server.NewServer(opts()); err != nil {
		return r, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		return r, fmt.Errorf("nats-server not ready after restart")
	}
	err = poll.For(2*time.Second, "the agent to reconnect", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(log.String(), "reconnected"), ""
	})
	cancel()
	_ = cmd.Wait()
	mu.Lock()
	text := log.String()
	mu.Unlock()
	if err != nil {
		return r, fmt.Errorf("the agent did not reconnect:\n%s", text)
	}
	r.Log = r.count(text)
	return r, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Row8 is whether secret files readable by others and a config writable by
// others are accepted.
type Row8 struct {
	// SeedCheck and SeedRun: check-config's and run's exit codes with a
	// signing seed of mode 0644 (0: accepted; run's -1: still running after
	// 3 s, i.e. it started).
	SeedCheck, SeedRun int
	// ConfigCheck and ConfigRun: the same with a config file of mode 0666.
	ConfigCheck, ConfigRun int
	// Messages are what check-config said.
	SeedMessage, ConfigMessage string
}

func (r Row8) String() string {
	return fmt.Sprintf("seed 0644: check-config exit %d, run exit %d (%q); config 0666: check-config exit %d, run exit %d (%q)",
		r.SeedCheck, r.SeedRun, r.SeedMessage, r.ConfigCheck, r.ConfigRun, r.ConfigMessage)
}

// AttackRow8 runs row 8 with bin in dir.
func AttackRow8(bin, dir string) (Row8, error) {
	var r Row8
	kp, err := nkeys.CreateUser()
	if err != nil {
		return r, err
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	seedFile := filepath.Join(dir, "gw1.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		return r, err
	}
	ports, err := harness.FreePorts(1)
	if err != nil {
		return r, err
	}
	cfg := filepath.Join(dir, "perm.yaml")
	body := fmt.Sprintf(`id: gw1
group: perms
members: [gw1]
state_dir: %s
http_addr: 127.0.0.1:0
signing_seed: %s
member_keys: {gw1: %s}
leader:
  command: ["sleep", "60"]
nats:
  embedded: true
  listen: 127.0.0.1:%d
`, filepath.Join(dir, "state"), seedFile, pub, ports[0])
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return r, err
	}
	try := func() (check, run int, msg string) {
		check, out, errOut := CLI(bin, 10*time.Second, "check-config", "--config", cfg)
		run, _, _ = CLI(bin, 3*time.Second, "run", "--config", cfg)
		return check, run, strings.TrimSpace(out + errOut)
	}
	if err := os.Chmod(seedFile, 0o644); err != nil {
		return r, err
	}
	r.SeedCheck, r.SeedRun, r.SeedMessage = try()
	if err := os.Chmod(seedFile, 0o600); err != nil {
		return r, err
	}
	if err := os.Chmod(cfg, 0o666); err != nil {
		return r, err
	}
	r.ConfigCheck, r.ConfigRun, r.ConfigMessage = try()
	return r, nil
}
