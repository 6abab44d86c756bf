package opsclient

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/edge-agent/edge-agent/agent"
)

// Status asks every agent of the group and prints their answers to stdout:
// a table with a summary line, or with --json an array of the agents'
// status reports; notes about answers that could not be verified go to
// stderr. It fails when no agent answered.
func Status(o *Options, stdout, stderr io.Writer) error {
	nc, err := o.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	v := &verifier{keys: o.memberKeys}
	answers, err := collectStatus(nc, o, v)
	if err != nil {
		return err
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
		return fmt.Errorf("no agent of group %q answered within %s%s", o.group, o.timeout, o.noAnswerHint())
	}
	return nil
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
