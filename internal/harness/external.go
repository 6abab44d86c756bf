package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// ExternalNATS is a nats-server run as its own process from a binary (for
// example Debian's /usr/bin/nats-server), with the same accounts as
// StartNATSWithSystemAccount: clients land without credentials in an
// application account, and SystemUser reaches the system account.
type ExternalNATS struct {
	cmd *exec.Cmd
	url string
}

// StartExternalNATS starts bin on a free loopback port, its config and log in
// dir, and waits until it accepts connections.
func StartExternalNATS(bin, dir string) (*ExternalNATS, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	conf := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`listen: "127.0.0.1:%d"
accounts {
  APP { users: [{user: app, password: app}] }
  SYS { users: [{user: %q, password: %q}] }
}
system_account: SYS
no_auth_user: app
`, port, SystemUser, SystemPassword)), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "nats-server.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close()
	e := &ExternalNATS{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	err = poll.For(10*time.Second, fmt.Sprintf("%s to listen on port %d", bin, port), func() (bool, string) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 100*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	if err != nil {
		e.Shutdown()
		return nil, err
	}
	return e, nil
}

// ClientURL returns the server's client URL.
func (e *ExternalNATS) ClientURL() string { return e.url }

// Shutdown stops the server and waits for it to exit.
func (e *ExternalNATS) Shutdown() {
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
}
