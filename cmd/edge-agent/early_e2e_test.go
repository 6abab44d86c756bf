package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestE2ECandidateKilledAroundItsFsync: a candidate sends its COORDINATOR
// before it persists its term and its vote for itself, so a power loss can
// land between the two and take the persist with it. Five agent processes on
// a real nats-server; each cycle SIGKILLs the leader, and the test,
// listening on the election subjects, SIGKILLs the first member whose
// COORDINATOR of a higher term it reads. A SIGKILL leaves what the process
// wrote in the page cache, so the test then plays the power loss: unless
// the victim led in that term (its journal would say so), its state.json
// and journal go back to what they held before the cycle, as if its fsync
// had not returned. The three left elect; both come back and rejoin, the
// victim from the older term, free to stand in the term it had called for
// again. Over every cycle the journals must show no lease overlap, no double
// vote, no term led twice and no term going back.
func TestE2ECandidateKilledAroundItsFsync(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	dir := t.TempDir()
	site := harness.NewSite(binary, ns.ClientURL(), dir, 5, "--heartbeat", "100ms", "--heartbeat-misses", "3", "--preemption", "never")
	site.Journals = true
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	type killed struct {
		id   string
		term uint64
		wait func() error
		err  error
	}
	armed := make(chan uint64, 1) // the term the next COORDINATOR to act on must exceed
	victims := make(chan killed, 1)
	sub, err := nc.Subscribe("edge.election.site.el.*", func(m *nats.Msg) {
		var w struct {
			Type string `json:"type"`
			From string `json:"from"`
			Term uint64 `json:"term"`
		}
		if json.Unmarshal(m.Data, &w) != nil || w.Type != "coordinator" {
			return
		}
		select {
		case above := <-armed:
			if w.Term <= above {
				armed <- above
				return
			}
		default:
			return
		}
		wait, err := site.StopAsync(w.From, syscall.SIGKILL)
		victims <- killed{w.From, w.Term, wait, err}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	const cycles = 8
	lost := 0 // candidacies whose persist the power loss took
	cur, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cycles; i++ {
		saved := map[string][2][]byte{} // state.json and journal before the cycle
		for _, id := range site.IDs() {
			saved[id] = [2][]byte{read(t, filepath.Join(dir, id, "state.json")), read(t, filepath.Join(dir, id+".journal"))}
		}
		armed <- cur.Term
		if err := site.Kill(cur.Leader); err != nil {
			t.Fatal(err)
		}
		var v killed
		select {
		case v = <-victims:
		case <-time.After(20 * time.Second):
			t.Fatalf("cycle %d: no COORDINATOR above term %d after %s was killed", i+1, cur.Term, cur.Leader)
		}
		if v.err != nil {
			t.Fatalf("cycle %d: kill %s: %v", i+1, v.id, v.err)
		}
		if err := v.wait(); err != nil {
			t.Fatal(err)
		}
		if powerLoss(t, dir, v.id, v.term, saved[v.id]) {
			lost++
		}
		var left []string
		for _, id := range site.IDs() {
			if id != cur.Leader && id != v.id {
				left = append(left, id)
			}
		}
		next, err := site.WaitAgreement(left, "", cur.Term, 5*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s led, %s killed standing in term %d): %v", i+1, cur.Leader, v.id, v.term, err)
		}
		for _, id := range []string{cur.Leader, v.id} {
			if _, err := site.Start(id); err != nil {
				t.Fatal(err)
			}
		}
		if cur, err = site.WaitAgreement(site.IDs(), "", next.Term-1, 5*time.Millisecond, 20*time.Second); err != nil {
			t.Fatalf("cycle %d: the restarted members did not rejoin: %v", i+1, err)
		}
	}
	t.Logf("the power loss took the candidacy's persist in %d of %d cycles", lost, cycles)
	if lost == 0 {
		t.Fatalf("every killed candidate had led already: the window between a call for votes and its persist was not tested")
	}
	checkJournals(t, site)
}

// powerLoss plays a power loss of member id, SIGKILLed while standing in
// term: its state.json and journal go back to saved, keeping only the
// journal's last line (the harness's record of the kill), unless it led in
// term, which it does only after its persist returned. It reports whether
// it rolled back.
func powerLoss(t *testing.T, dir, id string, term uint64, saved [2][]byte) bool {
	t.Helper()
	jpath := filepath.Join(dir, id+".journal")
	now := read(t, jpath)
	if !bytes.HasPrefix(now, saved[1]) {
		t.Fatalf("%s's journal was rewritten", id)
	}
	lines := bytes.Split(bytes.TrimSpace(now[len(saved[1]):]), []byte("\n"))
	for _, l := range lines {
		var e agent.JournalEntry
		if json.Unmarshal(l, &e) == nil && e.Event == "lead" && e.Term >= term {
			return false
		}
	}
	write(t, filepath.Join(dir, id, "state.json"), saved[0])
	write(t, jpath, append(slices.Clone(saved[1]), append(lines[len(lines)-1], '\n')...))
	return true
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
