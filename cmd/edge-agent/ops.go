package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
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
	// signingSeed signs the requests (--signing-seed; by default
	// --nats-nkey-seed, or the config's signing_seed); memberKeys verify
	// the answers (--member-keys, or the config's member_keys).
	signingSeed string
	memberKeys  map[string]string

	signer nkeys.KeyPair
	number func() string
}

// parseOpsFlags parses the flags shared by the ops commands; extra may add
// a command's own flags to the set.
func parseOpsFlags(name string, args []string, withJSON bool, extra ...func(*flag.FlagSet)) (*opsFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &opsFlags{}
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

func (o *opsFlags) connect() (*nats.Conn, error) {
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
func (o *opsFlags) request(verb, inbox string, body []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: wire.ControlSubject(o.prefix, o.group, verb), Reply: inbox, Data: body}
	if o.signer != nil {
		if err := wire.SignControl(o.signer, m, o.number()); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// noAnswerHint explains the usual reason why a group stays silent.
func (o *opsFlags) noAnswerHint() string {
	if o.signer == nil {
		return " (a group with member_keys answers only requests signed by a member or an operator key: give --config FILE, --signing-seed or --nats-nkey-seed)"
	}
	return " (is the signing key a member's or one of the group's operator_keys?)"
}

// verifier checks that answers come from the members they name.
type verifier struct {
	keys map[string]string // member id -> public key; nil: nothing to check against
	// notes are the answers that could not be verified, one line each.
	notes []string
}

// check verifies m, an answer naming member id; it returns the answer's
// numbering, or an error saying why it cannot be trusted.
func (v *verifier) check(m *nats.Msg, id string) (wire.Numbering, error) {
	if v.keys == nil {
		return wire.Numbering{}, nil
	}
	want, ok := v.keys[id]
	if !ok {
		return wire.Numbering{}, fmt.Errorf("%q is not a member", id)
	}
	key, num, err := wire.VerifyControl(m)
	switch {
	case err != nil:
		return num, err
	case key != want:
		return num, fmt.Errorf("signed by %s, not by %s's key", key, id)
	}
	return num, nil
}

// refuse notes an answer that could not be verified.
func (v *verifier) refuse(what, id string, err error) {
	if len(v.notes) < 20 {
		v.notes = append(v.notes, fmt.Sprintf("%s claiming to be from %s could not be verified (%v): ignored", what, dash(id), err))
	} else if len(v.notes) == 20 {
		v.notes = append(v.notes, "further unverifiable answers ignored")
	}
}

// statusAnswers is what collectStatus gathered.
type statusAnswers struct {
	reports []agent.StatusReport
	// nums are the numbering of each verified answer, by member id.
	nums map[string]wire.Numbering
}

// collectStatus asks every agent of the group and gathers the answers until
// every member answered or the timeout passed. With member keys, only
// answers signed by the member they name count; the others are noted in v.
func collectStatus(nc *nats.Conn, o *opsFlags, v *verifier) (statusAnswers, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return statusAnswers{}, err
	}
	defer sub.Unsubscribe()
	req, err := o.request(wire.VerbStatus, inbox, nil)
	if err != nil {
		return statusAnswers{}, err
	}
	if err := nc.PublishMsg(req); err != nil {
		return statusAnswers{}, err
	}
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	out := statusAnswers{nums: map[string]wire.Numbering{}}
	seen := map[string]bool{}
	want := -1
	if v.keys != nil {
		want = len(v.keys)
	}
	for want < 0 || len(out.reports) < want {
		select {
		case m := <-ch:
			var r agent.StatusReport
			if json.Unmarshal(m.Data, &r) != nil || r.ID == "" {
				v.refuse("a status answer", r.ID, errors.New("not a status report"))
				continue
			}
			num, err := v.check(m, r.ID)
			if err != nil {
				v.refuse("a status answer", r.ID, err)
				continue
			}
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			out.reports = append(out.reports, r)
			out.nums[r.ID] = num
			if v.keys == nil && len(r.Members) > want {
				want = len(r.Members)
			}
		case <-deadline.C:
			want = 0
		}
	}
	sort.Slice(out.reports, func(i, j int) bool { return out.reports[i].ID < out.reports[j].ID })
	return out, nil
}

// printNotes writes the verifier's notes, and a warning when nothing could
// be verified for want of keys.
func printNotes(w io.Writer, cmd string, v *verifier) {
	if v.keys == nil {
		fmt.Fprintf(w, "edge-agent %s: answers are not verified: give --config FILE or --member-keys to check that they come from the members\n", cmd)
	}
	for _, n := range v.notes {
		fmt.Fprintf(w, "edge-agent %s: %s\n", cmd, n)
	}
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
	v := &verifier{keys: o.memberKeys}
	answers, err := collectStatus(nc, o, v)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent status: %v\n", err)
		return exitFailure
	}
	reports := answers.reports
	printNotes(stderr, "status", v)
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
		fmt.Fprintf(stderr, "edge-agent status: no agent of group %q answered within %s%s\n", o.group, o.timeout, o.noAnswerHint())
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

// cmdHandover asks the leader to resign (nominee "") or to transfer. When
// the command signs, it first asks for the group's status to learn the
// leader and its term, and names them in the request: the leader refuses a
// request for any other leadership, so a captured one cannot be played back.
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
	v := &verifier{keys: o.memberKeys}
	req := agent.ControlRequest{Nominee: nominee}
	if o.signer != nil {
		answers, err := collectStatus(nc, o, v)
		if err != nil {
			fmt.Fprintf(stderr, "edge-agent %s: %v\n", verb, err)
			return exitFailure
		}
		for _, r := range answers.reports {
			if r.Role == "leader" && r.ID == r.Leader {
				req.Leader, req.Term = r.ID, r.Term
			}
		}
		if req.Leader == "" {
			printNotes(stderr, verb, v)
			fmt.Fprintf(stderr, "edge-agent %s: no leader of group %q answered within %s%s\n", verb, o.group, o.timeout, o.noAnswerHint())
			return exitFailure
		}
		req.Nonce = o.number()
	}
	body, _ := json.Marshal(req)
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: %v\n", verb, err)
		return exitFailure
	}
	defer sub.Unsubscribe()
	msg, err := o.request(verb, inbox, body)
	if err == nil {
		err = nc.PublishMsg(msg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "edge-agent %s: %v\n", verb, err)
		return exitFailure
	}
	// The first answer that verifies: a forged one is noted and skipped.
	deadline := time.NewTimer(o.timeout + 2*time.Second)
	defer deadline.Stop()
	var r agent.ControlReply
	for answered := false; !answered; {
		select {
		case m := <-ch:
			var got agent.ControlReply
			if err := json.Unmarshal(m.Data, &got); err != nil || got.ID == "" {
				v.refuse("an answer", got.ID, errors.New("not a control reply"))
				continue
			}
			if _, err := v.check(m, got.ID); err != nil {
				v.refuse("an answer", got.ID, err)
				continue
			}
			if req.Leader != "" && got.ID != req.Leader {
				v.refuse("an answer", got.ID, fmt.Errorf("the leader is %s", req.Leader))
				continue
			}
			r, answered = got, true
		case <-deadline.C:
			printNotes(stderr, verb, v)
			fmt.Fprintf(stderr, "edge-agent %s: no leader of group %q answered within %s%s\n", verb, o.group, o.timeout, o.noAnswerHint())
			return exitFailure
		}
	}
	printNotes(stderr, verb, v)
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
