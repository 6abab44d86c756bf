package agent

import (
	"testing"
	"testing/synctest"

	"github.com/edge-agent/edge-agent/election"
)

// TestMailboxDisconnectedWithRoom: with room, a disconnection report is in
// the channel when Disconnected returns, after what was offered before it;
// an idle mailbox runs no goroutine (the bubble would not end with one
// blocked in it, and the mailbox is never closed here).
func TestMailboxDisconnectedWithRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mb := NewMailbox(4)
		if !mb.Offer(Input{Kind: InputMessage, Msg: &election.Message{Type: election.MsgHeartbeat, Term: 7}}) {
			t.Fatal("an empty mailbox refused an input")
		}
		mb.Disconnected()
		if n := len(mb.C()); n != 2 {
			t.Fatalf("%d inputs waiting after an offer and a report, want 2", n)
		}
		if in := <-mb.C(); in.Kind != InputMessage || in.Msg == nil || in.Msg.Term != 7 {
			t.Fatalf("first input %+v, want the heartbeat of term 7", in)
		}
		if in := <-mb.C(); in.Kind != InputDisconnected {
			t.Fatalf("second input %+v, want the disconnection report", in)
		}
	})
}

// TestMailboxDisconnectedWhenFull: a report made while the mailbox is full
// is not lost: it arrives once the loop makes room, once however many
// reports were made meanwhile, and nothing waits after it.
func TestMailboxDisconnectedWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mb := NewMailbox(1)
		defer mb.Close()
		if !mb.Offer(Input{Kind: InputMessage, Msg: &election.Message{Type: election.MsgHeartbeat}}) {
			t.Fatal("an empty mailbox refused an input")
		}
		for range 3 {
			mb.Disconnected()
		}
		if mb.Offer(Input{Kind: InputMessage, Msg: &election.Message{}}) {
			t.Fatal("a full mailbox took an input")
		}
		if in := <-mb.C(); in.Kind != InputMessage {
			t.Fatalf("first input %+v, want the message offered before the reports", in)
		}
		synctest.Wait() // the waiting report goes in
		if n := len(mb.C()); n != 1 {
			t.Fatalf("%d inputs waiting once there was room, want the one report", n)
		}
		if in := <-mb.C(); in.Kind != InputDisconnected {
			t.Fatalf("input %+v, want the disconnection report", in)
		}
		synctest.Wait()
		if n := len(mb.C()); n != 0 {
			t.Fatalf("%d more inputs after the report, want none (three reports coalesced)", n)
		}
		// The next report finds room again.
		mb.Disconnected()
		if n := len(mb.C()); n != 1 {
			t.Fatalf("%d inputs after a report with room, want 1", n)
		}
	})
}

// TestMailboxCloseWithAReportWaiting: closing a full mailbox whose report
// still waits neither blocks nor sends on the closed channel; later offers
// and reports are refused quietly.
func TestMailboxCloseWithAReportWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mb := NewMailbox(1)
		mb.Offer(Input{Kind: InputMessage, Msg: &election.Message{}})
		mb.Disconnected()
		mb.Close()
		n := 0
		for range mb.C() {
			n++
		}
		if n != 1 {
			t.Fatalf("%d inputs drained after Close, want the one offered before", n)
		}
		if mb.Offer(Input{Kind: InputMessage, Msg: &election.Message{}}) {
			t.Fatal("a closed mailbox took an input")
		}
		mb.Disconnected()
		mb.Close()
	})
}
