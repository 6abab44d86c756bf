package opsclient

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// Drain asks member id to stop standing for election (on) or to stand
// again (undrain), and prints its answer. It first asks for the group's
// status: it fails, sending nothing, when id is not a member or did not
// answer (a drain is kept in the member's state directory, so the member's
// agent must run). A drained leader hands over before it answers. When
// the command signs, the request names the member's term and a fresh nonce,
// so that a captured request cannot be played back later.
func Drain(o *Options, id string, on bool, stdout, stderr io.Writer) error {
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
	var target *agent.StatusReport
	members := map[string]bool{}
	for i, r := range answers.reports {
		members[r.ID] = true
		for _, m := range r.Members {
			members[m.ID] = true
		}
		if r.ID == id {
			target = &answers.reports[i]
		}
	}
	if len(answers.reports) == 0 {
		printNotes(stderr, o.cmd, v)
		return o.noLeaderError(0)
	}
	if !members[id] {
		printNotes(stderr, o.cmd, v)
		ids := make([]string, 0, len(members))
		for m := range members {
			ids = append(ids, m)
		}
		sort.Strings(ids)
		return fmt.Errorf("%q is not a member of group %q (members: %s)", id, o.group, strings.Join(ids, ", "))
	}
	if target == nil {
		printNotes(stderr, o.cmd, v)
		return fmt.Errorf("%s of group %q did not answer within %s: its agent must run to keep the drained flag (is it up? edge-agent status)", id, o.group, o.timeout)
	}
	verb := wire.VerbUndrain
	if on {
		verb = wire.VerbDrain
	}
	req := agent.ControlRequest{Member: id}
	if o.signer != nil {
		req.Term, req.Nonce = target.Term, o.number()
	}
	r, err := o.askLeader(nc, v, req, stderr)
	if errors.Is(err, errNoAnswer) {
		return fmt.Errorf("%s of group %q did not answer the %s request within %s (try again, or edge-agent status)", id, o.group, verb, o.timeout+2*time.Second)
	}
	if err != nil {
		return err
	}
	printNotes(stderr, o.cmd, v)
	if r.ID != id {
		return fmt.Errorf("%s answered a %s of %s: %s", r.ID, verb, id, r.Error)
	}
	if !r.OK {
		return fmt.Errorf("%s refused: %s", id, r.Error)
	}
	switch {
	case !on:
		fmt.Fprintf(stdout, "%s undrained: it may stand for election again\n", id)
	case target.Role == "leader":
		fmt.Fprintf(stdout, "%s drained: it handed over (was leader in term %d) and never stands until edge-agent undrain %s\n", id, target.Term, id)
	default:
		fmt.Fprintf(stdout, "%s drained: it never stands for election until edge-agent undrain %s\n", id, id)
	}
	if on && allDrainedBut(answers.reports, id) {
		fmt.Fprintf(stderr, "edge-agent %s: note: every member of group %q that answered is drained now: the group has no leader until one is undrained\n", o.cmd, o.group)
	}
	return nil
}

// allDrainedBut reports whether every member in reports but id and the
// witnesses (which never lead anyway) is drained (each as it reports
// itself), and reports cover every member.
func allDrainedBut(reports []agent.StatusReport, id string) bool {
	if len(reports) == 0 || len(reports) < len(reports[0].Members) {
		return false
	}
	for _, r := range reports {
		if r.ID != id && !r.Drained && !r.Witness {
			return false
		}
	}
	return true
}

// preemptionNote says, after a transfer to nominee (or a resign, nominee
// ""), which healthy member ranks above the new leader and so will be handed
// leadership back by preemption, and when; "" when none will (policy never,
// no such member, or an agent too old to report its policy). lead is the
// old leader's status from before the handover; drained members and members
// the group knows drained are left out, as the leader leaves them out.
func preemptionNote(lead agent.StatusReport, reports []agent.StatusReport, nominee string) string {
	if lead.Preemption == "" || lead.Preemption == "never" {
		return ""
	}
	drained := map[string]bool{}
	for _, r := range reports {
		if r.Drained {
			drained[r.ID] = true
		}
	}
	var ms []election.Member
	alive := map[string]bool{}
	for _, m := range lead.Members {
		ms = append(ms, election.Member{ID: m.ID, Priority: m.Priority})
		alive[m.ID] = m.Alive || m.ID == lead.ID
		if m.Drained || m.Witness {
			drained[m.ID] = true
		}
	}
	ranked := election.SortByRank(ms)
	eligible := func(id string) bool { return alive[id] && !drained[id] }
	if nominee == "" {
		// Resign: the leader hands over to the highest member that
		// acknowledged it lately, which is not drained.
		for _, m := range ranked {
			if m.ID != lead.ID && eligible(m.ID) {
				nominee = m.ID
				break
			}
		}
		if nominee == "" {
			return ""
		}
	}
	var above string
	for _, m := range ranked {
		if m.ID == nominee {
			break
		}
		if eligible(m.ID) {
			above = m.ID
			break
		}
	}
	if above == "" {
		return ""
	}
	when := "at once"
	if lead.Preemption == "hold-down" {
		when = "after " + (time.Duration(lead.HoldDownMS) * time.Millisecond).String()
	}
	who := above
	if above == lead.ID {
		who = above + " (the leader until now)"
	}
	return fmt.Sprintf("note: %s has a higher priority than %s and is healthy: %s preemption hands leadership back to it %s; drain it to keep it out (edge-agent drain %s)",
		who, nominee, lead.Preemption, when, above)
}
