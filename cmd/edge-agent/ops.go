package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/edge"
)

// opsFlags are the flags shared by the commands that talk to a running group.
type opsFlags struct {
	urls    string
	group   string
	prefix  string
	timeout time.Duration
	json    bool
	// auth is how the command authenticates to the bus: the same keys as
	// the agent's (--nats-user, ...), or the agent's own with --config.
	auth edge.ClientConfig
}

// parseOpsFlags parses the flags shared by the ops commands; extra may add
// a command's own flags to the set.
func parseOpsFlags(name string, args []string, withJSON bool, extra ...func(*flag.FlagSet)) (*opsFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &opsFlags{}
	config := fs.String("config", "", "the agent's config FILE: its NATS servers, credentials, group and prefix (flags override)")
	fs.StringVar(&o.urls, "nats-url", "nats://127.0.0.1:4222", "NATS URL(s), comma separated")
	fs.StringVar(&o.group, "group", "", "election group")
	fs.StringVar(&o.prefix, "subject-prefix", agent.DefaultSubjectPrefix, "NATS subject prefix")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "how long to wait for answers")
	fs.StringVar(&o.auth.Creds, "nats-creds", "", "JWT creds file")
	fs.StringVar(&o.auth.NKeySeed, "nats-nkey-seed", "", "user nkey seed file")
	fs.StringVar(&o.auth.User, "nats-user", "", "NATS user")
	fs.StringVar(&o.auth.Password, "nats-password", "", "NATS password")
	fs.StringVar(&o.auth.Token, "nats-token", "", "NATS token")
	fs.StringVar(&o.auth.TLS.CA, "nats-tls-ca", "", "CA file that verifies the servers")
	fs.StringVar(&o.auth.TLS.Cert, "nats-tls-cert", "", "client certificate file")
	fs.StringVar(&o.auth.TLS.Key, "nats-tls-key", "", "client key file")
	if withJSON {
		fs.BoolVar(&o.json, "json", false, "print a JSON array of the agents' status")
	}
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
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
	return o, nil
}

// fromConfig takes what the flags did not set from the agent's config file:
// the gateway's own embedded server first (if any), then nats.urls; the
// group, the prefix and the credentials.
func (o *opsFlags) fromConfig(fs *flag.FlagSet, path string) error {
	rc, err := loadCheckConfig(path)
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
	}
	return nil
}

func (o *opsFlags) connect() (*nats.Conn, error) {
	auth, err := o.auth.Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.urls, append([]nats.Option{nats.Name("edge-agent-cli"), nats.Timeout(o.timeout)}, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", o.urls, err)
	}
	return nc, nil
}

// collectStatus asks every agent of the group and gathers the answers until
// every member answered or the timeout passed.
func collectStatus(nc *nats.Conn, prefix, group string, timeout time.Duration) ([]agent.StatusReport, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(agent.ControlSubject(prefix, group, "status"), inbox, nil); err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := map[string]bool{}
	var out []agent.StatusReport
	want := -1
	for want < 0 || len(out) < want {
		select {
		case m := <-ch:
			var r agent.StatusReport
			if json.Unmarshal(m.Data, &r) != nil || r.ID == "" || seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			out = append(out, r)
			if len(r.Members) > want {
				want = len(r.Members)
			}
		case <-deadline.C:
			want = 0
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	o, err := parseOpsFlags("status", args, true)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	nc, err := o.connect()
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent status: %v\n", err)
		return exitFailure
	}
	defer nc.Close()
	reports, err := collectStatus(nc, o.prefix, o.group, o.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent status: %v\n", err)
		return exitFailure
	}
	if o.json {
		if reports == nil {
			reports = []agent.StatusReport{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(reports)
	} else {
		printStatusTable(stdout, o.group, reports)
	}
	if len(reports) == 0 {
		fmt.Fprintf(stderr, "edge-agent status: no agent of group %q answered within %s\n", o.group, o.timeout)
		return exitFailure
	}
	return exitOK
}

func printStatusTable(w io.Writer, group string, reports []agent.StatusReport) {
	leaders := map[string]int{}
	for _, r := range reports {
		if r.Leader != "" {
			leaders[r.Leader]++
		}
	}
	summary := "no leader"
	if len(leaders) == 1 {
		for l := range leaders {
			summary = "leader " + l
		}
	} else if len(leaders) > 1 {
		summary = fmt.Sprintf("DISAGREEMENT: %d leaders reported", len(leaders))
	}
	fmt.Fprintf(w, "group %s: %s, %d agent(s) answered\n", group, summary, len(reports))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tLEADER\tTERM\tQUORUM\tALGORITHM\tVERSION")
	for _, r := range reports {
		q := fmt.Sprintf("%d/%d", r.Quorum.Live, r.Quorum.Size)
		if !r.Quorum.OK {
			q += " LOST"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Role, dash(r.Leader), r.Term, q, r.Algorithm, r.Version)
	}
	tw.Flush()
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// cmdHandover asks the leader to resign (nominee "") or to transfer.
func cmdHandover(args []string, nominee string, stdout, stderr io.Writer) int {
	verb := "resign"
	if nominee != "" {
		verb = "transfer"
	}
	o, err := parseOpsFlags(verb, args, false)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %v\n", err)
		return exitUsage
	}
	nc, err := o.connect()
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: %v\n", verb, err)
		return exitFailure
	}
	defer nc.Close()
	body, _ := json.Marshal(agent.ControlRequest{Nominee: nominee})
	msg, err := nc.Request(agent.ControlSubject(o.prefix, o.group, verb), body, o.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: no leader of group %q answered: %v\n", verb, o.group, err)
		return exitFailure
	}
	var r agent.ControlReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: bad reply: %v\n", verb, err)
		return exitFailure
	}
	if !r.OK {
		fmt.Fprintf(stderr, "edge-agent %s: leader %s refused: %s\n", verb, r.ID, r.Error)
		return exitFailure
	}
	if nominee != "" {
		fmt.Fprintf(stdout, "%s handed over to %s (was leader in term %d)\n", r.ID, nominee, r.Term)
	} else {
		fmt.Fprintf(stdout, "%s resigned (was leader in term %d)\n", r.ID, r.Term)
	}
	return exitOK
}
