package edge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ClientConfig is how the agent's own NATS connection authenticates and
// secures itself, for the embedded servers of a site and for an external
// NATS deployment alike. At most one of Creds, NKeySeed, User/Password and
// Token is set.
type ClientConfig struct {
	// Creds is a JWT creds file (nats.creds), for an operator-mode NATS
	// deployment.
	Creds string
	// NKeySeed is a file holding a user nkey seed (nats.nkey_seed).
	NKeySeed string
	// User and Password (nats.user, nats.password).
	User     string
	Password string
	// Token (nats.token).
	Token string
	// TLS: CA verifies the servers; Cert and Key are the client
	// certificate, for servers that require one (nats.tls).
	TLS TLSFiles
}

// Options returns the nats.go options that present c. It reads the nkey
// seed file (to fail early, naming the key) but dials nothing.
func (c ClientConfig) Options() ([]nats.Option, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case c.Creds != "":
		if _, err := os.Stat(c.Creds); err != nil {
			return nil, fmt.Errorf("edge: nats.creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NKeySeed != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("edge: nats.nkey_seed: %w", err)
		}
		opts = append(opts, o)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CA))
	}
	if c.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
	}
	return opts, nil
}

// check applies the rules that need no file: one kind of credential, and
// the pairs that go together.
func (c ClientConfig) check() error {
	n := 0
	for _, set := range []bool{c.Creds != "", c.NKeySeed != "", c.User != "" || c.Password != "", c.Token != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("edge: nats: give at most one of nats.creds, nats.nkey_seed, nats.user/nats.password and nats.token")
	}
	if (c.User == "") != (c.Password == "") {
		return errors.New("edge: nats.user: a user and a password go together")
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("edge: nats.tls: cert and key go together")
	}
	return nil
}

// ServerAuth returns what an embedded server must require of its clients so
// that the agents of the site, all configured with c, can connect to every
// gateway's server. A creds file (JWT) needs an operator-mode deployment
// and has no embedded equivalent.
func (c ClientConfig) ServerAuth() (ClientAuth, error) {
	if err := c.check(); err != nil {
		return ClientAuth{}, err
	}
	switch {
	case c.Creds != "":
		return ClientAuth{}, errors.New("edge: nats.creds: a creds file (JWT) needs an operator-mode NATS deployment; an embedded server takes nats.nkey_seed, nats.user/nats.password or nats.token")
	case c.NKeySeed != "":
		pub, err := publicKeyOfSeedFile(c.NKeySeed)
		if err != nil {
			return ClientAuth{}, err
		}
		return ClientAuth{NKey: pub}, nil
	}
	return ClientAuth{User: c.User, Password: c.Password, Token: c.Token}, nil
}

// publicKeyOfSeedFile reads a user nkey seed file and returns its public key.
func publicKeyOfSeedFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("edge: nats.nkey_seed: %w", err)
	}
	var seed []byte
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "SU") {
			seed = []byte(line)
			break
		}
	}
	if seed == nil {
		return "", fmt.Errorf("edge: nats.nkey_seed: %s holds no user seed (SU...)", path)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", fmt.Errorf("edge: nats.nkey_seed: %s: %w", path, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// Dialer returns a nats.go dialer for the agent's own connection: the
// address of this server's ClientURL is reached in-process (no socket, no
// TLS, so it works whatever the client port's TLS and host), every other
// address over TCP with timeout. Put ClientURL first in the server list
// (with nats.DontRandomize) and the peers' URLs after it: the agent then
// uses its own server and fails over to the peers' if that ever goes away
// while the process lives.
func (e *EmbeddedServer) Dialer(timeout time.Duration) nats.CustomDialer {
	host := strings.TrimPrefix(e.clientURL, "nats://")
	return &inProcessDialer{srv: e, self: host, tcp: net.Dialer{Timeout: timeout}}
}

// inProcessDialer implements nats.CustomDialer and the optional
// SkipTLSHandshake: nats.go asks it right after each Dial, on the same
// connection attempt, whether to wrap the new connection in TLS.
type inProcessDialer struct {
	srv  *EmbeddedServer
	self string
	tcp  net.Dialer
	// lastInProcess tells SkipTLSHandshake what the last Dial returned.
	lastInProcess atomic.Bool
}

// Dial connects to address, in-process when it is this server's.
func (d *inProcessDialer) Dial(network, address string) (net.Conn, error) {
	if address == d.self {
		d.lastInProcess.Store(true)
		if !d.srv.srv.Running() {
			return nil, errors.New("edge: embedded nats-server is not running")
		}
		return d.srv.srv.InProcessConn()
	}
	d.lastInProcess.Store(false)
	return d.tcp.Dial(network, address)
}

// SkipTLSHandshake reports whether the connection just dialed is the
// in-process one, which carries no TLS.
func (d *inProcessDialer) SkipTLSHandshake() bool { return d.lastInProcess.Load() }
