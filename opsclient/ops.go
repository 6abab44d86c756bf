package opsclient

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
	"github.com/edge-agent/edge-agent/config"
	"github.com/edge-agent/edge-agent/edge"
)

// Options are the flags shared by the commands that talk to a running
// group: where the bus is, how to log in, which group, and the keys that
// sign the requests and verify the answers.
type Options struct {
	cmd     string // the command: status, resign, transfer or watch
	urls    string
	group   string
	prefix  string
	timeout time.Duration
	json    bool
	// auth is how the command authenticates to the bus: the same keys as
	// the agent's (--nats-user, ...), or the agent's own with --config.
	auth edge.ClientConfig
	// signingSeed signs the requests (--signing-seed; by default
	// --nats-nkey-seed, or the config's signing_seed); memberKeys verify
	// the answers (--member-keys, or the config's member_keys).
	signingSeed string
	memberKeys  map[string]string

	signer nkeys.KeyPair
	number func() string
}

// HelpError is ParseFlags' answer to -h or --help: Flags lists the
// command's flags (flag.FlagSet.PrintDefaults). It wraps flag.ErrHelp.
type HelpError struct{ Flags string }

func (e *HelpError) Error() string { return "help requested" }
func (e *HelpError) Unwrap() error { return flag.ErrHelp }

// ParseFlags parses the flags of command name, shared by status, resign,
// transfer and watch; withJSON adds --json, and extra may add a command's
// own flags to the set. Its errors start with name.
func ParseFlags(name string, args []string, withJSON bool, extra ...func(*flag.FlagSet)) (*Options, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &Options{cmd: name}
	config := fs.String("config", "", "the agent's config FILE: its NATS servers, credentials, group, prefix and keys (flags override)")
	fs.StringVar(&o.urls, "nats-url", "nats://127.0.0.1:4222", "NATS URL(s), comma separated")
	fs.StringVar(&o.group, "group", "", "election group")
	fs.StringVar(&o.prefix, "subject-prefix", agent.DefaultSubjectPrefix, "NATS subject prefix")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "how long to wait for answers")
	fs.StringVar(&o.auth.Creds, "nats-creds", "", "JWT creds file")
	fs.StringVar(&o.auth.NKeySeed, "nats-nkey-seed", "", "user nkey seed file (also signs the requests unless --signing-seed is given)")
	fs.StringVar(&o.auth.User, "nats-user", "", "NATS user")
	fs.StringVar(&o.auth.Password, "nats-password", "", "NATS password")
	fs.StringVar(&o.auth.Token, "nats-token", "", "NATS token")
	fs.StringVar(&o.auth.TLS.CA, "nats-tls-ca", "", "CA file that verifies the servers")
	fs.StringVar(&o.auth.TLS.Cert, "nats-tls-cert", "", "client certificate file")
	fs.StringVar(&o.auth.TLS.Key, "nats-tls-key", "", "client key file")
	fs.StringVar(&o.signingSeed, "signing-seed", "", "nkey seed file that signs the requests: a member's or an operator's (operator_keys)")
	memberKeys := fs.String("member-keys", "", "the members' public keys, ID=KEY,...: answers are verified against them")
	if withJSON {
		what := "print a JSON array of the agents' status"
		if name == "watch" {
			what = "print one JSON object per line: who leads now, then each leader change"
		}
		fs.BoolVar(&o.json, "json", false, what)
	}
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return nil, &HelpError{Flags: b.String()}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if *memberKeys != "" {
		keys, err := agent.ParseMemberKeys(*memberKeys)
		if err != nil {
			return nil, fmt.Errorf("%s: --member-keys: %w", name, err)
		}
		o.memberKeys = keys
	}
	if *config != "" {
		if err := o.fromConfig(fs, *config); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if o.group == "" {
		return nil, fmt.Errorf("%s: --group is required", name)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%s: --timeout must be positive", name)
	}
	if o.signingSeed == "" {
		o.signingSeed = o.auth.NKeySeed
	}
	if o.signingSeed != "" {
		seed, err := os.ReadFile(o.signingSeed)
		if err == nil {
			err = agent.CheckSecretFile("--signing-seed", o.signingSeed)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: --signing-seed: %w", name, err)
		}
		kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
		if err != nil {
			return nil, fmt.Errorf("%s: --signing-seed %s: %w", name, o.signingSeed, err)
		}
		o.signer, o.number = kp, wire.NewRequestNumbering()
	}
	return o, nil
}

// fromConfig takes what the flags did not set from the agent's config file:
// the gateway's own embedded server first (if any), then nats.urls; the
// group, the prefix, the credentials and the keys. On a site whose embedded
// servers admit members by their keys, the command logs in as the agent
// does, with the member's signing seed: the site credential is not allowed
// on the control subjects.
func (o *Options) fromConfig(fs *flag.FlagSet, path string) error {
	rc, err := config.LoadFile(path)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["nats-url"] {
		var urls []string
		if rc.EmbeddedNATS {
			host, port, _ := net.SplitHostPort(rc.NATSListen)
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				host = "127.0.0.1"
			}
			urls = append(urls, "nats://"+net.JoinHostPort(host, port))
		}
		o.urls = strings.Join(append(urls, rc.NATSURLs...), ",")
	}
	if !set["group"] {
		o.group = rc.Agent.Group
	}
	if !set["subject-prefix"] {
		o.prefix = rc.Agent.SubjectPrefix
	}
	authFlags := false
	for _, f := range []string{"nats-creds", "nats-nkey-seed", "nats-user", "nats-password", "nats-token", "nats-tls-ca", "nats-tls-cert", "nats-tls-key"} {
		authFlags = authFlags || set[f]
	}
	if !authFlags {
		o.auth = rc.NATSClient
		if rc.EmbeddedNATS && len(rc.Agent.MemberKeys) > 0 {
			o.auth.User, o.auth.Password, o.auth.Token, o.auth.Creds = "", "", "", ""
			o.auth.NKeySeed = rc.Agent.SigningSeedFile
		}
	}
	if !set["signing-seed"] && !set["nats-nkey-seed"] {
		o.signingSeed = rc.Agent.SigningSeedFile
	}
	if !set["member-keys"] && len(rc.Agent.MemberKeys) > 0 {
		o.memberKeys = rc.Agent.MemberKeys
	}
	return nil
}

func (o *Options) connect() (*nats.Conn, error) {
	auth, err := o.auth.Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.urls, append([]nats.Option{nats.Name("edge-agent-cli"), nats.Timeout(o.timeout),
		// A refused publish (a credential without the control subjects)
		// is reported as "no answer", with the hint below.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", edge.RedactURL(o.urls), err)
	}
	return nc, nil
}

// request builds a control request of verb with body, to be answered on
// inbox: signed when the command has a signing seed.
func (o *Options) request(verb, inbox string, body []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: wire.ControlSubject(o.prefix, o.group, verb), Reply: inbox, Data: body}
	if o.signer != nil {
		if err := sign.SignControl(o.signer, m, o.number()); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// noAnswerHint explains the usual reason why a group stays silent.
func (o *Options) noAnswerHint() string {
	if o.signer == nil {
		return " (a group with member_keys answers only requests signed by a member or an operator key: give --config FILE, --signing-seed or --nats-nkey-seed)"
	}
	return " (is the signing key a member's or one of the group's operator_keys?)"
}
