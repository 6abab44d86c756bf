package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// previousRelease reads the last release of an older protocol from
// docs/PROTOCOL.md.
func previousRelease(t *testing.T, root string) (proto int, commit string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\| (\d+) \| ([0-9a-f]{40}) \|`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			var p int
			fmt.Sscan(m[1], &p)
			if p < wire.ProtocolMax {
				proto, commit = p, m[2]
			}
		}
	}
	if commit == "" {
		t.Fatal("docs/PROTOCOL.md lists no release of an older protocol")
	}
	return proto, commit
}

// buildRelease builds cmd/edge-agent at commit from this repository's
// history, once per commit (kept in the user's cache directory). Without
// the history (a source tarball) the test cannot run: it skips, except
// under CI, which clones.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run from a git clone: %v", err)
		}
		t.Skipf("not a git checkout (%v): cannot build the previous release", err)
	}
	root := strings.TrimSpace(string(top))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "edge-agent-releases", commit, "edge-agent")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git archive %s: %v: %s", commit, err, out)
		}
		t.Skipf("commit %s is not in this checkout's history (%v): cannot build the previous release", commit, err)
	}
	tmp := bin + ".tmp"
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/edge-agent")
	build.Dir = src
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the release at %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestE2EMixedVersions runs a rolling upgrade and a rolling downgrade, for
// each algorithm, with the fast path on: every member starts on the build
// of the previous protocol release, then gw1..gw5 are stopped with SIGTERM
// and restarted on this tree one at a time, so the site runs with 4, 3, 2, 1
// and 0 members on the release; at each stage a SIGKILL and a SIGSTOP
// failover of whoever leads. The members of this build must run the site at
// the old protocol and say why, and the old members must never get a
// message they would drop (their malformed and unknown-type counts stay 0).
// Then gw1..gw5 go back to the release one at a time, with a SIGKILL
// failover at each stage. No two leaders at any point (the journals).
func TestE2EMixedVersions(t *testing.T) {
	top, _ := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	proto, commit := previousRelease(t, strings.TrimSpace(string(top)))
	old := buildRelease(t, commit)
	t.Logf("previous release: protocol %d at %.12s", proto, commit)
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) { rollingUpgrade(t, alg, proto, old) })
	}
}

// mixedSite is a site whose members run this build or a release's.
type mixedSite struct {
	*harness.Site
	mu    sync.Mutex
	onOld map[string]bool
}

func (s *mixedSite) old(id string) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.onOld[id] }

func (s *mixedSite) oldIDs() []string {
	var ids []string
	for _, id := range s.IDs() {
		if s.old(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// restart stops id with SIGTERM and starts it again on the release's
// build (toOld) or this one, then waits for the site to agree.
func (s *mixedSite) restart(t *testing.T, id string, toOld bool) harness.Agreement {
	t.Helper()
	if err := s.Terminate(id); err != nil {
		t.Logf("%s exited: %v", id, err)
	}
	s.mu.Lock()
	s.onOld[id] = toOld
	s.mu.Unlock()
	if _, err := s.Start(id); err != nil {
		t.Fatal(err)
	}
	cur, err := s.WaitAgreement(s.IDs(), "", 0, 5*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// failover takes the leader away (SIGKILL, or SIGSTOP when freeze), waits
// for the others to agree on another, and brings it back.
func (s *mixedSite) failover(t *testing.T, cur harness.Agreement, freeze bool) harness.Agreement {
	t.Helper()
	var survivors []string
	for _, id := range s.IDs() {
		if id != cur.Leader {
			survivors = append(survivors, id)
		}
	}
	how := map[bool]string{false: "SIGKILL", true: "SIGSTOP"}[freeze]
	t0 := time.Now()
	var err error
	if freeze {
		err = s.Freeze(cur.Leader)
	} else {
		err = s.Kill(cur.Leader)
	}
	if err != nil {
		t.Fatal(err)
	}
	next, err := s.WaitAgreement(survivors, cur.Leader, cur.Term, 2*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatalf("%s of %s with %v on the release: %v", how, cur.Leader, s.oldIDs(), err)
	}
	t.Logf("%s of %s (release: %v): %s leads term %d after %s", how, cur.Leader, s.oldIDs(), next.Leader, next.Term,
		next.At.Sub(t0).Round(100*time.Microsecond))
	if freeze {
		err = s.Thaw(cur.Leader)
	} else {
		_, err = s.Start(cur.Leader)
	}
	if err != nil {
		t.Fatal(err)
	}
	if cur, err = s.WaitAgreement(s.IDs(), "", next.Term-1, 5*time.Millisecond, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return cur
}

// siteVersion waits until every member of this build reports the site's
// version want, and the members on the release as speaking proto; and
// until the members on the release report want too, if theirs is a
// release that reports it (protocol 2 on). A release may take a member
// that just restarted for one flashed back to protocol 1 for a moment (its
// first acknowledgements go out before it hears the others' announcements),
// and says so in its status until that member's next message.
func (s *mixedSite) siteVersion(t *testing.T, want, proto int) {
	t.Helper()
	below := s.oldIDs()
	poll.UntilWhy(t, 10*time.Second, fmt.Sprintf("site protocol %d because of %v", want, below), func() (bool, string) {
		for _, id := range s.Running() {
			st, err := s.Proc(id).Status(t.Context())
			if err != nil {
				return false, err.Error()
			}
			if s.old(id) {
				if proto >= 2 && st.SiteProtocolVersion != want {
					return false, fmt.Sprintf("%s (release): site %d", id, st.SiteProtocolVersion)
				}
				continue
			}
			if st.SiteProtocolVersion != want || st.ProtocolVersion != wire.ProtocolMax {
				return false, fmt.Sprintf("%s: site %d, build %d", id, st.SiteProtocolVersion, st.ProtocolVersion)
			}
			for _, m := range st.Members {
				wantMax := wire.ProtocolMax
				if slices.Contains(below, m.ID) {
					wantMax = proto
				}
				if m.ProtocolMax != wantMax {
					return false, fmt.Sprintf("%s says %s speaks up to %d, want %d", id, m.ID, m.ProtocolMax, wantMax)
				}
			}
		}
		return true, ""
	})
}

// dropped is what member id dropped as malformed or of an unknown type:
// what it could not read.
func (s *mixedSite) dropped(t *testing.T, id string) float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+s.Proc(id).HTTPAddr+"/metrics")
	samples, err := harness.ParseMetrics(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, reason := range []string{"malformed", "unknown_type"} {
		v, _ := harness.Find(samples, "edge_election_bad_messages_total", map[string]string{"reason": reason})
		n += v
	}
	return n
}

func rollingUpgrade(t *testing.T, alg string, proto int, oldBin string) {
	ns, err := harness.StartNATSWithSystemAccount()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	s := &mixedSite{Site: harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 5, "--algorithm", alg, "--heartbeat", "100ms",
		"--preemption", "never", "--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword),
		onOld: map[string]bool{}}
	for _, id := range s.IDs() {
		s.onOld[id] = true
	}
	s.Journals = true
	s.Command = func(id string) []string {
		if s.old(id) {
			return []string{oldBin}
		}
		return []string{binary}
	}
	defer s.Stop()
	if err := s.StartAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitAgreement(s.IDs(), "", 0, 5*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range s.IDs() {
		cur := s.restart(t, id, false)
		want := proto
		if len(s.oldIDs()) == 0 {
			want = wire.ProtocolMax
		}
		s.siteVersion(t, want, proto)
		if id == "gw2" {
			// The operator's view: each agent's build and protocol, and
			// why the site runs below this build's.
			out, errOut, code := runCLI(t, "status", "--nats-url", ns.ClientURL(), "--group", "site")
			wantLine := fmt.Sprintf("protocol: the site runs %d, below the newest build's %d, because gw3, gw4, gw5 run(s) an older build", proto, wire.ProtocolMax)
			if code != 0 || !strings.Contains(out, wantLine) || !strings.Contains(out, "PROTOCOL") {
				t.Errorf("edge-agent status on the mixed site (exit %d):\n%s%s\nwant a line %q", code, out, errOut, wantLine)
			}
		}
		cur = s.failover(t, cur, false)
		s.failover(t, cur, true)
		for _, o := range s.oldIDs() {
			if n := s.dropped(t, o); n != 0 {
				t.Errorf("after upgrading %s: %s (previous release) dropped %v messages it could not read", id, o, n)
			}
		}
	}
	for _, id := range s.IDs() {
		cur := s.restart(t, id, true)
		if len(s.oldIDs()) < len(s.IDs()) {
			s.siteVersion(t, proto, proto)
		}
		s.failover(t, cur, false)
		// A member flashed back may drop what was sent to it before its
		// first message reached the others (at most three heartbeat
		// periods): report it.
		t.Logf("%s, downgraded, dropped %v messages it could not read", id, s.dropped(t, id))
	}
	checkJournals(t, s.Site)
}
