package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
)

// opsFlags are the flags shared by the commands that talk to a running group.
type opsFlags struct {
	urls    string
	group   string
	prefix  string
	timeout time.Duration
	json    bool
}

func parseOpsFlags(name string, args []string, withJSON bool) (*opsFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &opsFlags{}
	fs.StringVar(&o.urls, "nats-url", "nats://127.0.0.1:4222", "NATS URL(s), comma separated")
	fs.StringVar(&o.group, "group", "", "election group")
	fs.StringVar(&o.prefix, "subject-prefix", agent.DefaultSubjectPrefix, "NATS subject prefix")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "how long to wait for answers")
	if withJSON {
		fs.BoolVar(&o.json, "json", false, "print a JSON array of the agents' status")
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if o.group == "" {
		return nil, fmt.Errorf("%s: --group is required", name)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%s: --timeout must be positive", name)
	}
	return o, nil
}

func (o *opsFlags) connect() (*nats.Conn, error) {
	nc, err := nats.Connect(o.urls, nats.Name("edge-agent-cli"), nats.Timeout(o.timeout))
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
