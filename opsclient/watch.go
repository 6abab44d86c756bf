package opsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
)

// Watch streams a group's leader changes as the agents see them to stdout:
// it subscribes to the group's events subject (agent.EventsSubject), prints
// the current state from a status request, then one line per event (one
// JSON object per line with --json) until ctx ends, or until the group's
// leader changed count times (0: no limit), once the new leader is named. Once the stream starts, SIGINT and SIGTERM
// end it too, with no error.
//
// With the members' keys (--config or --member-keys), an event counts only
// if it is signed by the member it names and numbered after the last one
// printed of that member's current epoch, which the status answers give (a
// captured event played back is refused). An event of an epoch not seen yet
// (the member restarted) is held until a new status answer confirms it.
func Watch(ctx context.Context, o *Options, count int, stdout, stderr io.Writer) error {
	nc, err := o.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(agent.EventsSubject(o.prefix, o.group), ch)
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	v := &verifier{keys: o.memberKeys}
	w := &eventWatch{o: o, v: v, known: map[string]wire.Numbering{}, held: map[string][]heldEvent{}, out: stdout, errOut: stderr}
	if err := w.start(nc); err != nil {
		return err
	}
	statusInbox := nc.NewRespInbox()
	statusCh := make(chan *nats.Msg, 256)
	ssub, err := nc.ChanSubscribe(statusInbox, statusCh)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer ssub.Unsubscribe()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	var lastQuery time.Time
	for count == 0 || w.changes < count {
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return errors.New("NATS connection closed")
		case m := <-ch:
			if w.event(m) && time.Since(lastQuery) >= time.Second {
				// An epoch not seen yet: ask the group again.
				lastQuery = time.Now()
				if req, err := o.request(wire.VerbStatus, statusInbox, nil); err == nil {
					_ = nc.PublishMsg(req)
				}
			}
		case m := <-statusCh:
			w.status(m)
		}
		w.flushNotes()
	}
	return nil
}

// start asks for the group's status and prints who leads now (a line of
// text, or with --json a WatchStart object): the answers' numbering marks
// the events before them as history, and the leader they agree on is the
// one the changes counted by --count start from.
func (w *eventWatch) start(nc *nats.Conn) error {
	answers, err := collectStatus(nc, w.o, w.v)
	if err != nil {
		return err
	}
	w.flushNotes()
	for id, num := range answers.nums {
		w.known[id] = num // the changes before the answer are history
	}
	leaders := map[string]uint64{}
	for _, r := range answers.reports {
		if r.Leader != "" && r.Term > leaders[r.Leader] {
			leaders[r.Leader] = r.Term
		}
		w.term = max(w.term, r.Term)
	}
	if len(leaders) == 1 {
		for l, t := range leaders {
			w.leader, w.term = l, t
		}
	}
	if w.o.json {
		ws := WatchStart{Start: true, Group: w.o.group, Leader: w.leader, Term: w.term, Agents: len(answers.reports), Time: time.Now().UTC()}
		if len(leaders) > 1 {
			for l := range leaders {
				ws.Leaders = append(ws.Leaders, l)
			}
			sort.Strings(ws.Leaders)
		}
		b, _ := json.Marshal(ws)
		fmt.Fprintf(w.out, "%s\n", b)
	} else {
		printWatchHeader(w.out, w.o.group, answers.reports)
	}
	return nil
}

// WatchStart is the first line of `watch --json`: who leads when the watch
// starts, as the agents that answered its status request say. Start is
// always true (the LeaderChange lines that follow have no "start" field).
type WatchStart struct {
	Start bool   `json:"start"`
	Group string `json:"group"`
	// Leader is the leader the agents name, "" when none names one or
	// they disagree (Leaders then lists the ones they name).
	Leader  string    `json:"leader"`
	Leaders []string  `json:"leaders,omitempty"`
	Term    uint64    `json:"term"`
	Agents  int       `json:"agents"`
	Time    time.Time `json:"time"`
}

// heldEvent is an event of an epoch not confirmed yet.
type heldEvent struct {
	num wire.Numbering
	c   agent.LeaderChange
}

// eventWatch decides which events to print (see cmdWatch).
type eventWatch struct {
	o     *Options
	v     *verifier
	known map[string]wire.Numbering // member -> its epoch and the last event printed (or the status answer's number)
	held  map[string][]heldEvent
	count int
	// leader and term are the group's leader as last known, and changes
	// how many times it changed since the watch started (--count).
	leader  string
	term    uint64
	changes int
	out     io.Writer
	errOut  io.Writer
}

// event handles one event; it reports whether its epoch needs a status
// answer to be confirmed.
func (w *eventWatch) event(m *nats.Msg) bool {
	var c agent.LeaderChange
	if err := json.Unmarshal(m.Data, &c); err != nil || c.ID == "" {
		return false
	}
	if w.v.keys == nil {
		w.print(c)
		return false
	}
	num, err := w.v.check(m, c.ID)
	if err == nil && num.Epoch == 0 {
		err = errors.New("not numbered")
	}
	if err != nil {
		w.v.refuse("an event", c.ID, err)
		return false
	}
	k, ok := w.known[c.ID]
	if ok && num.Epoch == k.Epoch {
		if num.N > k.N {
			w.known[c.ID] = num
			w.print(c)
		}
		return false // an event already printed, or history: played back
	}
	if len(w.held[c.ID]) < 64 {
		w.held[c.ID] = append(w.held[c.ID], heldEvent{num, c})
	}
	return true
}

// status handles a status answer asked for to confirm an epoch: the held
// events of a member that restarted since the watch began are printed, in
// order; those of an epoch the member does not run are dropped.
func (w *eventWatch) status(m *nats.Msg) {
	var r agent.StatusReport
	if json.Unmarshal(m.Data, &r) != nil || r.ID == "" {
		return
	}
	num, err := w.v.check(m, r.ID)
	if err != nil {
		w.v.refuse("a status answer", r.ID, err)
		return
	}
	held := w.held[r.ID]
	delete(w.held, r.ID)
	prev, had := w.known[r.ID]
	if had && prev.Epoch == num.Epoch {
		return // nothing new: the held events were of other epochs
	}
	w.known[r.ID] = num
	if !had {
		return // not known at the start: what it sent before is history
	}
	sort.Slice(held, func(i, j int) bool { return held[i].num.N < held[j].num.N })
	last := uint64(0)
	for _, h := range held {
		if h.num.Epoch == num.Epoch && h.num.N > last && h.num.N < num.N {
			last = h.num.N
			w.print(h.c)
		}
	}
}

func (w *eventWatch) print(c agent.LeaderChange) {
	if w.o.json {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w.out, "%s\n", b)
	} else {
		fmt.Fprintf(w.out, "%s  %-12s leader %s -> %s  term %d  (#%d)\n",
			c.Time.Local().Format("15:04:05.000"), c.ID, dash(c.Previous), dash(c.Leader), c.Term, c.Seq)
	}
	// A leader named in a term not older than the last known leader's
	// is a change of the group's leader; the other agents' lines about
	// the same change, and stale ones, are not.
	if c.Leader != "" && c.Leader != w.leader && c.Term >= w.term {
		w.leader, w.term = c.Leader, c.Term
		w.changes++
	}
}

// flushNotes writes the verifier's notes once.
func (w *eventWatch) flushNotes() {
	if w.v.keys == nil {
		if w.count == 0 {
			fmt.Fprintf(w.errOut, "edge-agent watch: events are not verified: give --config FILE or --member-keys to check that they come from the members\n")
		}
		w.count = 1
		return
	}
	for _, n := range w.v.notes[w.count:] {
		fmt.Fprintf(w.errOut, "edge-agent watch: %s\n", n)
	}
	w.count = len(w.v.notes)
}

// printWatchHeader states who leads before the stream starts.
func printWatchHeader(w io.Writer, group string, reports []agent.StatusReport) {
	leaders := map[string]uint64{}
	for _, r := range reports {
		if r.Leader != "" && r.Term > leaders[r.Leader] {
			leaders[r.Leader] = r.Term
		}
	}
	now := time.Now().Format("15:04:05.000")
	switch len(leaders) {
	case 0:
		fmt.Fprintf(w, "%s  group %s: no leader, %d agent(s) answered; watching for changes\n", now, group, len(reports))
	case 1:
		for l, t := range leaders {
			fmt.Fprintf(w, "%s  group %s: leader %s, term %d, %d agent(s) answered; watching for changes\n", now, group, l, t, len(reports))
		}
	default:
		fmt.Fprintf(w, "%s  group %s: DISAGREEMENT: %d leaders reported by %d agent(s); watching for changes\n", now, group, len(leaders), len(reports))
	}
}
