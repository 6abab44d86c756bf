package opsclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
)

// Handover asks the leader to resign (nominee "") or to transfer its
// leadership to nominee, and prints the leader's answer to stdout; notes
// about answers that could not be verified go to stderr. It first asks for
// the group's status to learn the leader and its term: it fails, sending
// nothing, when no leader answers, when nominee leads already or is not a
// member. When the command signs, it names the leader and term in the
// request: the leader refuses a request for any other leadership, so a
// captured one cannot be played back.
func Handover(o *Options, nominee string, stdout, stderr io.Writer) error {
	nc, err := o.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	v := &verifier{keys: o.memberKeys}
	req := agent.ControlRequest{Nominee: nominee}
	lead, reports, err := o.nameLeader(nc, v, &req, stderr)
	if err != nil {
		return err
	}
	leader := req.Leader
	if o.signer == nil {
		// Unsigned, the request names no leadership (as before signing).
		req.Leader, req.Term = "", 0
	}
	r, err := o.askLeader(nc, v, req, stderr)
	if errors.Is(err, errNoAnswer) {
		return fmt.Errorf("the leader %s of group %q did not answer within %s (it may have just stepped down: try again, or edge-agent status --wait 10s)", leader, o.group, o.timeout+2*time.Second)
	}
	if err != nil {
		return err
	}
	printNotes(stderr, o.cmd, v)
	if !r.OK {
		return fmt.Errorf("leader %s refused: %s", r.ID, r.Error)
	}
	if nominee != "" {
		fmt.Fprintf(stdout, "%s handed over to %s (was leader in term %d)\n", r.ID, nominee, r.Term)
	} else {
		fmt.Fprintf(stdout, "%s resigned (was leader in term %d)\n", r.ID, r.Term)
	}
	if note := preemptionNote(lead, reports, nominee); note != "" {
		fmt.Fprintln(stdout, note)
	}
	return nil
}

// nameLeader asks for the group's status and names the leader that
// answered, its term and a fresh nonce in req; it fails when no leader
// answered, or when the nominee leads already or is not a member.
func (o *Options) nameLeader(nc *nats.Conn, v *verifier, req *agent.ControlRequest, stderr io.Writer) (agent.StatusReport, []agent.StatusReport, error) {
	answers, err := collectStatus(nc, o, v)
	if err != nil {
		return agent.StatusReport{}, nil, err
	}
	var lead *agent.StatusReport
	for i, r := range answers.reports {
		if r.Role == "leader" && r.ID == r.Leader {
			lead = &answers.reports[i]
		}
	}
	if lead == nil {
		printNotes(stderr, o.cmd, v)
		return agent.StatusReport{}, nil, o.noLeaderError(len(answers.reports))
	}
	req.Leader, req.Term = lead.ID, lead.Term
	if n := req.Nominee; n != "" {
		if n == lead.ID {
			printNotes(stderr, o.cmd, v)
			return *lead, nil, fmt.Errorf("%s is the leader of group %q already (term %d): nothing to transfer", n, o.group, lead.Term)
		}
		members := []string{lead.ID}
		found := false
		for _, m := range lead.Members {
			found = found || m.ID == n
			if m.ID != lead.ID {
				members = append(members, m.ID)
			}
		}
		if !found {
			printNotes(stderr, o.cmd, v)
			sort.Strings(members)
			return *lead, nil, fmt.Errorf("%q is not a member of group %q (members: %s)", n, o.group, strings.Join(members, ", "))
		}
		for _, m := range lead.Members {
			if m.ID == n && m.Witness {
				printNotes(stderr, o.cmd, v)
				return *lead, nil, fmt.Errorf("%s is a witness of group %q: it votes but never leads; transfer to another member", n, o.group)
			}
			if m.ID == n && m.Drained {
				printNotes(stderr, o.cmd, v)
				return *lead, nil, fmt.Errorf("%s is drained: it never stands; undrain it first (edge-agent undrain %s)", n, n)
			}
		}
		for _, r := range answers.reports {
			if r.ID == n && r.Drained {
				printNotes(stderr, o.cmd, v)
				return *lead, nil, fmt.Errorf("%s is drained: it never stands; undrain it first (edge-agent undrain %s)", n, n)
			}
		}
	}
	if o.signer != nil {
		req.Nonce = o.number()
	}
	return *lead, answers.reports, nil
}

// errNoAnswer: the leader did not answer a control request in time.
var errNoAnswer = errors.New("no answer from the leader")

// askLeader sends req and returns the first answer that verifies: a forged
// one is noted and skipped.
func (o *Options) askLeader(nc *nats.Conn, v *verifier, req agent.ControlRequest, stderr io.Writer) (agent.ControlReply, error) {
	var r agent.ControlReply
	body, _ := json.Marshal(req)
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return r, err
	}
	defer sub.Unsubscribe()
	msg, err := o.request(o.cmd, inbox, body)
	if err == nil {
		err = nc.PublishMsg(msg)
	}
	if err != nil {
		return r, err
	}
	deadline := time.NewTimer(o.timeout + 2*time.Second)
	defer deadline.Stop()
	for {
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
			return got, nil
		case <-deadline.C:
			printNotes(stderr, o.cmd, v)
			return r, errNoAnswer
		}
	}
}

// noLeaderError says that no leader answered, and the usual reason: no
// leader elected yet when some agents answered, else a group that answers
// only signed requests.
func (o *Options) noLeaderError(answered int) error {
	if answered > 0 {
		return fmt.Errorf("no leader of group %q answered within %s: %d agent(s) answered, none as leader: is a leader elected? try edge-agent status --wait 10s", o.group, o.timeout, answered)
	}
	return fmt.Errorf("no agent of group %q answered within %s: are its agents running? try edge-agent status --wait 10s%s", o.group, o.timeout, o.noAnswerHint())
}
