package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestE2EMixedVersions runs a site mid-upgrade: gw1 and gw2 on the build
// of the previous protocol release, gw3..gw5 on this tree, with the fast
// path on. It checks that the new members run the site at the old protocol
// and say why, that the old members never get a message they would drop
// (their malformed and unknown-key counts stay 0 through SIGKILL and SIGSTOP
// failovers), then upgrades gw1 and gw2 one at a time (SIGTERM, restart on
// this build) until the site runs this build's protocol, and downgrades gw5
// back, with no two leaders at any point (the journals).
func TestE2EMixedVersions(t *testing.T) {
	top, _ := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	proto, commit := previousRelease(t, strings.TrimSpace(string(top)))
	old := buildRelease(t, commit)
	t.Logf("previous release: protocol %d at %.12s", proto, commit)

	ns, err := harness.StartNATSWithSystemAccount()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 5, "--heartbeat", "100ms", "--preemption", "never",
		"--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword)
	site.Journals = true
	var mu sync.Mutex
	onOld := map[string]bool{"gw1": true, "gw2": true}
	site.Command = func(id string) []string {
		mu.Lock()
		defer mu.Unlock()
		if onOld[id] {
			return []string{old}
		}
		return []string{binary}
	}
	setOld := func(id string, v bool) { mu.Lock(); onOld[id] = v; mu.Unlock() }
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	cur, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// siteVersion waits until every member of this build reports the
	// site's version want, and the members below it as expected.
	siteVersion := func(want int, below ...string) {
		t.Helper()
		poll.UntilWhy(t, 10*time.Second, fmt.Sprintf("site protocol %d because of %v", want, below), func() (bool, string) {
			for _, id := range site.Running() {
				mu.Lock()
				isOld := onOld[id]
				mu.Unlock()
				if isOld {
					continue
				}
				st, err := site.Proc(id).Status(t.Context())
				if err != nil {
					return false, err.Error()
				}
				if st.SiteProtocolVersion != want || st.ProtocolVersion != wire.ProtocolMax {
					return false, fmt.Sprintf("%s: site %d, build %d", id, st.SiteProtocolVersion, st.ProtocolVersion)
				}
				for _, m := range st.Members {
					wantMax := wire.ProtocolMax
					for _, b := range below {
						if m.ID == b {
							wantMax = proto
						}
					}
					if m.ProtocolMax != wantMax {
						return false, fmt.Sprintf("%s says %s speaks up to %d, want %d", id, m.ID, m.ProtocolMax, wantMax)
					}
				}
			}
			return true, ""
		})
	}
	// dropped is what an old member dropped as malformed or of an unknown
	// type: what it could not read.
	dropped := func(id string) float64 {
		t.Helper()
		_, body := httpGet(t, "http://"+site.Proc(id).HTTPAddr+"/metrics")
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
	checkOld := func(when string) {
		t.Helper()
		for _, id := range []string{"gw1", "gw2"} {
			if n := dropped(id); n != 0 {
				t.Errorf("%s: %s (previous release) dropped %v messages it could not read", when, id, n)
			}
		}
	}
	siteVersion(proto, "gw1", "gw2")

	// Failovers on the mixed site: SIGKILL and SIGSTOP of whoever leads.
	for i := 0; i < 6; i++ {
		var survivors []string
		for _, id := range site.IDs() {
			if id != cur.Leader {
				survivors = append(survivors, id)
			}
		}
		t0 := time.Now()
		if i%2 == 0 {
			err = site.Kill(cur.Leader)
		} else {
			err = site.Freeze(cur.Leader)
		}
		if err != nil {
			t.Fatal(err)
		}
		next, err := site.WaitAgreement(survivors, cur.Leader, cur.Term, 2*time.Millisecond, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s of %s: %s leads term %d after %s", map[bool]string{true: "SIGKILL", false: "SIGSTOP"}[i%2 == 0],
			cur.Leader, next.Leader, next.Term, next.At.Sub(t0).Round(100*time.Microsecond))
		if i%2 == 0 {
			_, err = site.Start(cur.Leader)
		} else {
			err = site.Thaw(cur.Leader)
		}
		if err != nil {
			t.Fatal(err)
		}
		if cur, err = site.WaitAgreement(site.IDs(), "", next.Term-1, 5*time.Millisecond, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	checkOld("after the failovers")

	// The rolling upgrade of the two old members, one at a time.
	for i, id := range []string{"gw1", "gw2"} {
		if err := site.Terminate(id); err != nil {
			t.Logf("%s exited: %v", id, err)
		}
		setOld(id, false)
		if _, err := site.Start(id); err != nil {
			t.Fatal(err)
		}
		if cur, err = site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			siteVersion(proto, "gw2")
		}
	}
	siteVersion(wire.ProtocolMax)

	// A downgrade: gw5 back to the previous release.
	if err := site.Terminate("gw5"); err != nil {
		t.Logf("gw5 exited: %v", err)
	}
	setOld("gw5", true)
	if _, err := site.Start("gw5"); err != nil {
		t.Fatal(err)
	}
	if _, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	siteVersion(proto, "gw5")
	// gw5 may drop what was sent to it before its first message reached
	// the others (at most three heartbeat periods): report it.
	t.Logf("gw5, downgraded, dropped %v messages it could not read", dropped("gw5"))
	checkJournals(t, site)
}
