package opsclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
)

// Handover asks the leader to resign (nominee "") or to transfer its
// leadership to nominee, and prints the leader's answer to stdout; notes
// about answers that could not be verified go to stderr. When the command
// signs, it first asks for the group's status to learn the leader and its
// term, and names them in the request: the leader refuses a request for any
// other leadership, so a captured one cannot be played back.
func Handover(o *Options, nominee string, stdout, stderr io.Writer) error {
	nc, err := o.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	v := &verifier{keys: o.memberKeys}
	req := agent.ControlRequest{Nominee: nominee}
	if o.signer != nil {
		if err := o.nameLeader(nc, v, &req, stderr); err != nil {
			return err
		}
	}
	r, err := o.askLeader(nc, v, req, stderr)
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
	return nil
}

// nameLeader asks for the group's status and names the leader that
// answered, its term and a fresh nonce in req.
func (o *Options) nameLeader(nc *nats.Conn, v *verifier, req *agent.ControlRequest, stderr io.Writer) error {
	answers, err := collectStatus(nc, o, v)
	if err != nil {
		return err
	}
	for _, r := range answers.reports {
		if r.Role == "leader" && r.ID == r.Leader {
			req.Leader, req.Term = r.ID, r.Term
		}
	}
	if req.Leader == "" {
		printNotes(stderr, o.cmd, v)
		return o.noLeaderError()
	}
	req.Nonce = o.number()
	return nil
}

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
			return r, o.noLeaderError()
		}
	}
}

// noLeaderError says that no leader answered, and the usual reason.
func (o *Options) noLeaderError() error {
	return fmt.Errorf("no leader of group %q answered within %s%s", o.group, o.timeout, o.noAnswerHint())
}
