package opsclient

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edge-agent/edge-agent/agent"
)

// Status asks every agent of the group and prints their answers to stdout:
// a table with a summary line, or with --json an array of the agents'
// status reports; notes about answers that could not be verified go to
// stderr. It fails when no agent answered.
//
// With wait > 0 it connects and asks again, every quarter second or so, until the agents
// that answer agree on a leader that answers as leader (agreedLeader), and
// prints that last round; when wait passes first, it prints the last round
// and fails saying what was missing.
func Status(o *Options, wait time.Duration, stdout, stderr io.Writer) error {
	deadline := time.Now().Add(wait)
	nc, err := o.connect()
	for err != nil && time.Until(deadline) > 0 {
		// With --wait, a bus not up yet (an agent that embeds it just
		// started) is waited for too.
		t := time.NewTimer(min(time.Until(deadline), 250*time.Millisecond))
		<-t.C
		nc, err = o.connect()
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	var (
		v       *verifier
		answers statusAnswers
		waitErr error
	)
	for {
		v = &verifier{keys: o.memberKeys}
		round := *o
		if rem := time.Until(deadline); wait > 0 && rem < round.timeout {
			round.timeout = max(rem, 100*time.Millisecond)
		}
		answers, err = collectStatus(nc, &round, v)
		if err != nil {
			return err
		}
		if wait == 0 {
			break
		}
		why, ok := agreedLeader(answers.reports)
		if ok {
			break
		}
		rem := time.Until(deadline)
		if rem <= 0 {
			waitErr = fmt.Errorf("no agreed leader of group %q within --wait %s: %s", o.group, wait, why)
			break
		}
		t := time.NewTimer(min(rem, 250*time.Millisecond))
		<-t.C
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
		what := fmt.Sprintf("within %s", o.timeout)
		if wait > 0 {
			what = fmt.Sprintf("within --wait %s", wait)
		}
		return fmt.Errorf("no agent of group %q answered %s%s", o.group, what, o.noAnswerHint())
	}
	return waitErr
}

// agreedLeader reports whether every agent that answered names the same
// leader and that leader answered as leader; if not, it says why.
func agreedLeader(reports []agent.StatusReport) (string, bool) {
	if len(reports) == 0 {
		return "no agent answered", false
	}
	named := map[string]int{}
	none := 0
	for _, r := range reports {
		if r.Leader == "" {
			none++
		} else {
			named[r.Leader]++
		}
	}
	switch {
	case len(named) > 1:
		return fmt.Sprintf("the agents disagree: %d leaders reported by %d agent(s)", len(named), len(reports)), false
	case len(named) == 0:
		return fmt.Sprintf("%d agent(s) answered, none knows a leader (an election under way, or no quorum)", len(reports)), false
	case none > 0:
		for l := range named {
			return fmt.Sprintf("%d agent(s) name %s, %d know no leader yet", named[l], l, none), false
		}
	}
	for l := range named {
		for _, r := range reports {
			if r.ID == l && r.Role == "leader" {
				return "", true
			}
		}
		return fmt.Sprintf("the agents name %s, which did not answer as leader", l), false
	}
	return "", false
}

func printStatusTable(w io.Writer, group string, reports []agent.StatusReport) {
	leaders := map[string]int{}
	for _, r := range reports {
		if r.Leader != "" {
			leaders[r.Leader]++
		}
	}
	summary := "no leader"
	if len(leaders) == 0 && len(reports) > 0 && allDrainedBut(reports, "") {
		summary = "no leader: every member is drained (edge-agent undrain ID)"
	}
	if len(leaders) == 1 {
		for l := range leaders {
			summary = "leader " + l
		}
	} else if len(leaders) > 1 {
		summary = fmt.Sprintf("DISAGREEMENT: %d leaders reported", len(leaders))
	}
	fmt.Fprintf(w, "group %s: %s, %d agent(s) answered\n", group, summary, len(reports))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tLEADER\tTERM\tQUORUM\tALGORITHM\tVERSION\tPROTOCOL")
	for _, r := range reports {
		q := fmt.Sprintf("%d live / %d needed", r.Quorum.Live, r.Quorum.Size)
		if !r.Quorum.OK {
			q += " LOST"
		}
		role := r.Role
		if r.Witness && role == "follower" {
			role = "witness" // a follower that never leads
		}
		if r.Drained {
			role += " DRAINED"
		}
		if r.DuplicateInstance != "" {
			role += " DUPLICATE-ID"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", r.ID, role, dash(r.Leader), r.Term, q, r.Algorithm, r.Version, max(r.ProtocolVersion, 1))
	}
	tw.Flush()
	if line := protocolLine(reports); line != "" {
		fmt.Fprintln(w, line)
	}
}

// protocolLine says, when the site runs below the newest build's protocol
// (a rolling upgrade under way), at which version and because of whom; ""
// when every member speaks the same. An agent of protocol 1 reports no
// protocol fields.
func protocolLine(reports []agent.StatusReport) string {
	newest, site := 1, 0
	below := map[string]bool{}
	var mismatch []string
	for _, r := range reports {
		newest = max(newest, r.ProtocolVersion)
		if r.ProtocolVersion == 0 {
			below[r.ID] = true
			continue
		}
		if site == 0 || r.SiteProtocolVersion < site {
			site = r.SiteProtocolVersion
		}
		mismatch = append(mismatch, r.ProtocolMismatch...)
		for _, m := range r.Members {
			if m.ProtocolMax != 0 && m.ProtocolMax < r.ProtocolVersion {
				below[m.ID] = true
			}
		}
	}
	if site == 0 {
		site = 1
	}
	var out []string
	if len(below) > 0 && site < newest {
		ids := make([]string, 0, len(below))
		for id := range below {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		out = append(out, fmt.Sprintf("protocol: the site runs %d, below the newest build's %d, because %s run(s) an older build (an upgrade under way)",
			site, newest, strings.Join(ids, ", ")))
	}
	if len(mismatch) > 0 {
		slices.Sort(mismatch)
		out = append(out, "protocol: REFUSED (versions that do not overlap): "+strings.Join(slices.Compact(mismatch), ", "))
	}
	return strings.Join(out, "\n")
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
