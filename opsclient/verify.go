package opsclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
)

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
	key, num, err := sign.VerifyControl(m)
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
func collectStatus(nc *nats.Conn, o *Options, v *verifier) (statusAnswers, error) {
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
