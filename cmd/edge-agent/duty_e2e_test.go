package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// dutyHelperSource is a stand-in for a singleton duty, built by the test.
// Run as `helper LOCKFILE LOGFILE`, it takes an exclusive flock on LOCKFILE,
// which the kernel releases the moment the process dies (even by SIGKILL),
// so finding the lock taken means another gateway's duty is still alive: it
// logs "overlap". It logs "start ID TERM PID NANOS" once it holds the lock
// and "stop ..." on SIGTERM, then exits.
const dutyHelperSource = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	logf, err := os.OpenFile(os.Args[2], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(3)
	}
	id, term := os.Getenv("EDGE_ELECTION_ID"), os.Getenv("EDGE_ELECTION_TERM")
	write := func(event string) {
		fmt.Fprintf(logf, "%s %s %s %d %d\n", event, id, term, os.Getpid(), time.Now().UnixNano())
	}
	if id == "" || term == "" || os.Getenv("EDGE_ELECTION_GROUP") != "site" {
		write("badenv")
	}
	lock, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		os.Exit(3)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		write("overlap")
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
	}
	write("start")
	<-sigs
	write("stop")
}
`

// buildDutyHelper compiles dutyHelperSource into dir.
func buildDutyHelper(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "helper.go")
	if err := os.WriteFile(src, []byte(dutyHelperSource), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "duty-helper")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the duty helper: %v\n%s", err, out)
	}
	return bin
}

// dutyEvent is one line of the helper's log.
type dutyEvent struct {
	event, id string
	term      uint64
	pid       int
	at        time.Time
}

func readDutyEvents(t *testing.T, path string) []dutyEvent {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dutyEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			continue
		}
		term, _ := strconv.ParseUint(fs[2], 10, 64)
		pid, _ := strconv.Atoi(fs[3])
		ns, _ := strconv.ParseInt(fs[4], 10, 64)
		out = append(out, dutyEvent{event: fs[0], id: fs[1], term: term, pid: pid, at: time.Unix(0, ns)})
	}
	return out
}

func hasDutyEvent(evs []dutyEvent, event, id string, term uint64) bool {
	for _, e := range evs {
		if e.event == event && e.id == id && e.term == term {
			return true
		}
	}
	return false
}

// TestE2EDutyNeverOnTwoGateways forces 50 leader changes on three agent
// processes, each with a duty command, by transfer, resign, SIGTERM and
// SIGKILL of the leader, and checks that the duty never ran on two gateways
// at once (the helper's lock would have been found taken), that every
// leadership ran it with its own term, and that a stopped duty logged its
// stop before the next one started.
func TestE2EDutyNeverOnTwoGateways(t *testing.T) {
	dir := t.TempDir()
	helper := buildDutyHelper(t, dir)
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	lockPath, logPath := filepath.Join(dir, "duty.lock"), filepath.Join(dir, "duty.log")
	command := fmt.Sprintf("[%q, %q, %q]", helper, lockPath, logPath)
	site := harness.NewSite(binary, ns.ClientURL(), dir, 3, "--heartbeat", "100ms", "--heartbeat-misses", "3",
		"--preemption", "never", "--leader-command", command)
	if testing.Verbose() && os.Getenv("E2E_LOG") != "" {
		site.Log = os.Stderr
	}
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	ids := site.IDs()
	cur, err := site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// waitDuty waits until the duty of leadership a, or of a later one (a
	// leadership may end, its lease lost on a loaded machine, before its
	// duty started), has started, and returns that leadership.
	waitDuty := func(a harness.Agreement) harness.Agreement {
		t.Helper()
		checked := time.Now()
		err := poll.For(20*time.Second, "a duty to start", func() (bool, string) {
			if hasDutyEvent(readDutyEvents(t, logPath), "start", a.Leader, a.Term) {
				return true, ""
			}
			if time.Since(checked) >= 100*time.Millisecond {
				checked = time.Now()
				if later, err := site.WaitAgreement(site.Running(), "", a.Term, 5*time.Millisecond, 10*time.Millisecond); err == nil {
					a = later
				}
			}
			return false, fmt.Sprintf("no duty started by %s for term %d", a.Leader, a.Term)
		})
		if err != nil {
			t.Fatalf("%v: %+v", err, readDutyEvents(t, logPath))
		}
		return a
	}
	cur = waitDuty(cur)
	ctl := func(args ...string) error {
		out, err := exec.Command(binary, append(args, "--nats-url", ns.ClientURL(), "--group", "site", "--timeout", "5s")...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("edge-agent %v: %v: %s", args, err, out)
		}
		return nil
	}
	const changes = 50
	modes := []string{"transfer", "resign", "transfer", "term", "transfer", "resign", "kill"}
	count := map[string]int{}
	for i, attempt := 0, 0; i < changes; attempt++ {
		if attempt > 2*changes {
			t.Fatalf("only %d of %d forced changes in %d attempts", i, changes, attempt)
		}
		// The current leader and its duty (a lease lost to a loaded machine
		// may have changed the leader on its own since the last change).
		if cur, err = site.WaitAgreement(ids, "", 0, 5*time.Millisecond, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		cur = waitDuty(cur)
		mode := modes[i%len(modes)]
		victim := cur.Leader
		var others []string
		for _, id := range ids {
			if id != victim {
				others = append(others, id)
			}
		}
		switch mode {
		case "transfer":
			err = ctl("transfer", others[i%len(others)])
		case "resign":
			err = ctl("resign")
		case "term":
			err = site.Terminate(victim)
		case "kill":
			err = site.Kill(victim)
		}
		if err != nil && (mode == "transfer" || mode == "resign") {
			t.Logf("change %d: %v; trying again", i, err) // the leader changed meanwhile
			continue
		} else if err != nil {
			t.Fatalf("change %d: %s of %s: %v", i, mode, victim, err)
		}
		// A new leadership: after a transfer or resign usually another
		// member's, but the old leader may win again (a nominee that just
		// restarted does not stand at once).
		wait, exclude := ids, ""
		if mode == "term" || mode == "kill" {
			wait, exclude = others, victim
		}
		next, err := site.WaitAgreement(wait, exclude, cur.Term, 2*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatalf("change %d (%s of %s): %v", i, mode, victim, err)
		}
		waitDuty(next)
		if mode == "term" || mode == "kill" {
			if _, err := site.Start(victim); err != nil {
				t.Fatal(err)
			}
		}
		count[mode]++
		i++
	}
	for _, id := range site.Running() {
		if err := site.Terminate(id); err != nil {
			t.Errorf("SIGTERM %s: %v", id, err)
		}
	}
	evs := readDutyEvents(t, logPath)
	terms := map[uint64]string{}
	var last *dutyEvent
	for i, e := range evs {
		switch e.event {
		case "overlap", "badenv":
			t.Errorf("%s: %s in term %d at %s; the events before it:", e.event, e.id, e.term, e.at.Format("15:04:05.000000"))
			for _, p := range evs[max(0, i-4):i] {
				t.Errorf("  %s %s term %d pid %d at %s", p.event, p.id, p.term, p.pid, p.at.Format("15:04:05.000000"))
			}
		case "start":
			// A leadership may restart its duty, never another gateway.
			if prev, ok := terms[e.term]; ok && prev != e.id {
				t.Errorf("term %d ran the duty on %s and %s", e.term, prev, e.id)
			}
			terms[e.term] = e.id
			if last != nil && last.event == "stop" && !last.at.Before(e.at) {
				t.Errorf("duty of %s started at %v, before %s's stopped at %v", e.id, e.at, last.id, last.at)
			}
		}
		last = &evs[i]
	}
	if len(terms) < changes+1 {
		t.Errorf("%d leaderships ran the duty, want at least %d", len(terms), changes+1)
	}
	if last == nil || last.event != "stop" {
		t.Errorf("the last duty did not stop on SIGTERM: %+v", last)
	}
	t.Logf("%d forced changes %v; %d leaderships ran the duty", changes, count, len(terms))
}
