package dutye2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/election"
)

// dutyScript is a duty that logs "start ID TERM PID NANOS" when it starts and
// "stop ID TERM PID NANOS" on SIGTERM (unless its first argument is
// "stubborn", then it ignores SIGTERM), to the file named by DUTY_LOG.
const dutyScript = `now() { date +%s%N; }
if [ "$1" = stubborn ]; then trap '' TERM; else
trap 'echo "stop $EDGE_ELECTION_ID $EDGE_ELECTION_TERM $$ $(now)" >> "$DUTY_LOG"; exit 0' TERM; fi
echo "start $EDGE_ELECTION_ID $EDGE_ELECTION_TERM $$ $(now)" >> "$DUTY_LOG"
while :; do sleep 1 & wait $!; done
`

// dutyRecord is one line of the duty log.
type dutyRecord struct {
	event, id string
	term      uint64
	pid       int
	at        time.Time
}

func readDutyLog(t *testing.T, path string) []dutyRecord {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dutyRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			continue // a line being written
		}
		term, _ := strconv.ParseUint(fs[2], 10, 64)
		pid, _ := strconv.Atoi(fs[3])
		ns, _ := strconv.ParseInt(fs[4], 10, 64)
		out = append(out, dutyRecord{event: fs[0], id: fs[1], term: term, pid: pid, at: time.Unix(0, ns)})
	}
	return out
}

func findRecord(rs []dutyRecord, event, id string) (dutyRecord, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].event == event && rs[i].id == id {
			return rs[i], true
		}
	}
	return dutyRecord{}, false
}

// dutyFiles writes the duty script and returns its path and the log's.
func dutyFiles(t *testing.T) (script, log string) {
	dir := t.TempDir()
	script = filepath.Join(dir, "duty.sh")
	if err := os.WriteFile(script, []byte(dutyScript), 0o700); err != nil {
		t.Fatal(err)
	}
	return script, filepath.Join(dir, "duty.log")
}

// TestDutyStopsBeforeTheSuccessorStarts: the duty runs on the leader with
// the election variables set, and a transfer stops it (SIGTERM, exit) before
// the successor's duty starts; the hooks run in pairs; Wait returns once the
// agents stopped.
func TestDutyStopsBeforeTheSuccessorStarts(t *testing.T) {
	script, log := dutyFiles(t)
	hooks := filepath.Join(t.TempDir(), "hooks.log")
	hook := `echo "$EDGE_ELECTION_EVENT $EDGE_ELECTION_ID $EDGE_ELECTION_TERM" >> ` + hooks
	ids := []string{"gw1", "gw2", "gw3"}
	duties := map[string]*agent.Duty{}
	// H = 200 ms: the default grace (lease - H - tick, 140 ms) leaves the
	// SIGTERM trap room to write its line on a loaded machine; at 100 ms
	// (a 70 ms grace) it was killed before it did in 2 runs of 20.
	const hb = 200 * time.Millisecond
	agents, stop := runSite(t, 3, hb, siteSetup{opts: func(id string) []agent.Option {
		d := testDuty(agent.DutyConfig{Command: []string{"sh", script}, Env: []string{"DUTY_LOG=" + log},
			OnElected: []string{"sh", "-c", hook}, OnDemoted: []string{"sh", "-c", hook}})
		duties[id] = d
		return []agent.Option{agent.WithDuty(d)}
	}})
	waitFor(t, 5*time.Second, "gw3 to lead and run its duty", func() bool {
		r, ok := findRecord(readDutyLog(t, log), "start", "gw3")
		return agreedLeader(agents, ids...) == "gw3" && ok && r.term == agents["gw3"].Term()
	})
	if g := duties["gw3"].Config().Grace; g <= 0 || g >= agents["gw3"].Config().Lease {
		t.Fatalf("default grace %s, lease %s", g, agents["gw3"].Config().Lease)
	}
	start, _ := findRecord(readDutyLog(t, log), "start", "gw3")
	if start.term != agents["gw3"].Term() {
		t.Fatalf("duty started with term %d, leader's term %d", start.term, agents["gw3"].Term())
	}
	if got := metric(t, agents["gw3"], "edge_election_duty_running"); got != 1 {
		t.Fatalf("duty_running = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := agents["gw3"].Transfer(ctx, "gw1"); err != nil {
		t.Fatal(err)
	}
	// Transfer returns once the successor was told: the old duty is gone.
	if rs := readDutyLog(t, log); rs[len(rs)-1].event != "stop" || rs[len(rs)-1].id != "gw3" {
		t.Fatalf("gw3's duty not stopped when Transfer returned: %+v", rs)
	}
	var started dutyRecord
	waitFor(t, 5*time.Second, "the successor's duty", func() bool {
		l := agreedLeader(agents, ids...)
		if l == "" || l == "gw3" {
			return false
		}
		r, ok := findRecord(readDutyLog(t, log), "start", l)
		started = r
		return ok && r.term == agents[l].Term()
	})
	stopped, _ := findRecord(readDutyLog(t, log), "stop", "gw3")
	if !stopped.at.Before(started.at) || started.term <= stopped.term {
		t.Fatalf("gw3's duty stopped at %v (term %d), %s's started at %v (term %d)", stopped.at, stopped.term, started.id, started.at, started.term)
	}
	stop()
	for _, d := range duties {
		d.Wait()
	}
	// (The agents stop in any order: the leader may hand over, or lose its
	// lease first and have its duty killed.)
	rs := readDutyLog(t, log)
	for _, r := range rs {
		if r.event == "start" && !processGone(r.pid) {
			t.Errorf("duty %+v still running after the agents stopped", r)
		}
	}
	b, err := os.ReadFile(hooks)
	if err != nil {
		t.Fatal(err)
	}
	// One elected/demoted pair per leadership, in order, for at least every
	// leadership whose duty ran. A leadership that ended at once may run
	// only hooks, and its on_elected may be killed before it wrote
	// anything: on_demoted still runs for it (it cleans up after an
	// on_elected that began), so a lone "demoted" is allowed for a
	// leadership whose duty never started.
	dutyRan := map[string]bool{}
	for _, r := range rs {
		if r.event == "start" {
			dutyRan[r.id+" "+strconv.FormatUint(r.term, 10)] = true
		}
	}
	// Hooks are ordered per gateway (each agent runs its own, one at a
	// time); across gateways the successor's on_elected may come before
	// the old leader's on_demoted, which the handover does not wait for.
	byID := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			byID[f[1]] = append(byID[f[1]], l)
		}
	}
	pairs := map[string]bool{}
	for _, lines := range byID {
		for i := 0; i < len(lines); {
			if k, ok := strings.CutPrefix(lines[i], "demoted "); ok && !dutyRan[k] {
				i++ // on_elected killed before it wrote its line
				continue
			}
			k, ok := strings.CutPrefix(lines[i], "elected ")
			if !ok || i+1 >= len(lines) || lines[i+1] != "demoted "+k {
				t.Fatalf("hooks out of pairs:\n%s", b)
			}
			pairs[k] = true
			i += 2
		}
	}
	for _, r := range rs {
		if k := r.id + " " + strconv.FormatUint(r.term, 10); r.event == "start" && !pairs[k] {
			t.Errorf("no hooks for the leadership %s:\n%s", k, b)
		}
	}
}

// TestDutyRestartsThenResigns: a duty that keeps exiting is restarted with
// backoff, and after max_failures the leader resigns so another member,
// whose duty works, takes over.
func TestDutyRestartsThenResigns(t *testing.T) {
	script, log := dutyFiles(t)
	ids := []string{"gw1", "gw2", "gw3"}
	agents, _ := runSite(t, 3, 50*time.Millisecond, siteSetup{opts: func(id string) []agent.Option {
		c := agent.DutyConfig{Command: []string{"sh", script}, Env: []string{"DUTY_LOG=" + log}}
		if id == "gw3" {
			c = agent.DutyConfig{Command: []string{"sh", "-c", "exit 3"}, MaxFailures: 3, RestartBackoff: 10 * time.Millisecond}
		}
		return []agent.Option{agent.WithDuty(testDuty(c))}
	}})
	waitFor(t, 10*time.Second, "gw2 to take over from the failing gw3", func() bool {
		_, ok := findRecord(readDutyLog(t, log), "start", "gw2")
		return agreedLeader(agents, ids...) == "gw2" && ok
	})
	if got := metric(t, agents["gw3"], "edge_election_duty_restarts_total"); got != 2 {
		t.Fatalf("gw3 duty_restarts_total = %v, want 2 (3 runs, then resign)", got)
	}
}

// stuckTransport blocks every Send while stuck is set, freezing the agent's
// loop the way a hung process would.
type stuckTransport struct {
	agent.Transport
	mu      sync.Mutex
	stuck   chan struct{} // non-nil while stuck; closed to release
	entered chan struct{} // gets a value when a Send blocks
}

func (s *stuckTransport) Send(m election.Message) error {
	s.mu.Lock()
	ch := s.stuck
	s.mu.Unlock()
	if ch != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-ch
	}
	return s.Transport.Send(m)
}

func (s *stuckTransport) freeze() {
	s.mu.Lock()
	s.stuck = make(chan struct{})
	s.mu.Unlock()
}

func (s *stuckTransport) thaw() {
	s.mu.Lock()
	if s.stuck != nil {
		close(s.stuck)
		s.stuck = nil
	}
	s.mu.Unlock()
}

// TestDutyKilledBeforeLeaseEndsWhenLoopStuck: with the leader's loop stuck
// (it neither renews its lease nor notices it ran out), the duty is still
// stopped, SIGTERM first and then SIGKILL for one that ignores SIGTERM, before
// the lease ends; the successor's duty starts only after that.
func TestDutyKilledBeforeLeaseEndsWhenLoopStuck(t *testing.T) {
	for _, mode := range []string{"graceful", "stubborn"} {
		t.Run(mode, func(t *testing.T) {
			script, log := dutyFiles(t)
			ids := []string{"gw1", "gw2", "gw3"}
			stuck := map[string]*stuckTransport{}
			const hb = 200 * time.Millisecond // room for the SIGTERM trap on a loaded machine
			agents, _ := runSite(t, 3, hb, siteSetup{
				opts: func(id string) []agent.Option {
					return []agent.Option{agent.WithDuty(testDuty(agent.DutyConfig{Command: []string{"sh", script, mode}, Env: []string{"DUTY_LOG=" + log}}))}
				},
				wrap: func(id string, tr agent.Transport) agent.Transport {
					st := &stuckTransport{Transport: tr, entered: make(chan struct{}, 1)}
					stuck[id] = st
					return st
				},
			})
			defer func() {
				for _, st := range stuck {
					st.thaw()
				}
			}()
			// Freeze the leader's loop while it leads with its duty running.
			// (If its lease runs out on its own just then, try again.)
			var (
				id       string
				a        *agent.Agent
				leaseEnd time.Time
				start    dutyRecord
			)
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("the leader kept losing its lease before its loop froze")
				}
				waitFor(t, 5*time.Second, "a leader running its duty", func() bool {
					id = agreedLeader(agents, ids...)
					if id == "" {
						return false
					}
					r, ok := findRecord(readDutyLog(t, log), "start", id)
					start = r
					return ok && r.term == agents[id].Term()
				})
				a = agents[id]
				st := stuck[id]
				st.freeze()
				select {
				case <-st.entered:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s's loop never sent", id)
				}
				// The clock is read before the lease: the lease end noted
				// is never later than the agent's own.
				now := time.Now()
				if rem := a.LeaseRemaining(); rem > 0 {
					leaseEnd = now.Add(rem)
					break
				}
				st.thaw()
			}
			// Poll until the process is gone (or a zombie: killed, not yet
			// reaped), and note the first time it was seen gone.
			var gone time.Time
			waitFor(t, 5*time.Second, id+"'s duty to die", func() bool {
				if processGone(start.pid) {
					gone = time.Now()
					return true
				}
				return false
			})
			// The kill is due one tick before the lease ends; allow one more
			// tick for a loaded machine.
			cfg := a.Config()
			if late := gone.Sub(leaseEnd); late > cfg.Tick() {
				t.Fatalf("%s's duty seen alive %s after its lease ended", id, late)
			}
			if mode == "graceful" {
				stop, ok := findRecord(readDutyLog(t, log), "stop", id)
				if !ok || stop.term != start.term || !stop.at.Before(leaseEnd) {
					t.Fatalf("no SIGTERM before the lease end %v: %+v", leaseEnd, readDutyLog(t, log))
				}
			}
			var others []string
			for _, o := range ids {
				if o != id {
					others = append(others, o)
				}
			}
			var next dutyRecord
			waitFor(t, 5*time.Second, "a successor's duty", func() bool {
				l := agreedLeader(agents, others...)
				if l == "" || l == id {
					return false
				}
				r, ok := findRecord(readDutyLog(t, log), "start", l)
				next = r
				return ok && r.term == agents[l].Term()
			})
			if !next.at.After(gone) {
				t.Fatalf("%s's duty started at %v, before %s's was gone at %v", next.id, next.at, id, gone)
			}
			if a.IsLeader() {
				t.Fatalf("%s still claims leadership", id)
			}
		})
	}
}

// processGone reports whether pid has exited (it may be a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
