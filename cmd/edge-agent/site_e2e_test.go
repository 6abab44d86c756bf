package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// pageView is what the site page shows, read from its DOM and from the
// state its script keeps (window.site).
type pageView struct {
	Leader  string `json:"leader"`  // the Leader card
	Term    string `json:"term"`    // the Term card
	Quorum  string `json:"quorum"`  // the Quorum card
	Lease   string `json:"lease"`   // the Lease remaining card
	Duty    string `json:"duty"`    // the Duty card
	Conn    string `json:"conn"`    // live / reconnecting
	Loads   int    `json:"loads"`   // page loads in this tab
	Updates int    `json:"updates"` // snapshots rendered
	// Rows are the member table's rows: id -> the cells' text.
	Rows map[string][]string `json:"rows"`
	// Shown are the leaders the page showed, with the browser's time (ms
	// since the epoch) it first showed each.
	Shown []struct {
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
		At     int64  `json:"at"`
	} `json:"shown"`
	Changes int `json:"changes"` // rows of the leader changes table
	// Overflow is the page's width beyond the viewport (0: no sideways
	// scrolling of the page at phone width).
	Overflow int `json:"overflow"`
}

const readPage = `(function () {
  var rows = {};
  document.querySelectorAll("#members tr").forEach(function (tr) {
    rows[tr.id.replace("member-", "")] = Array.prototype.map.call(tr.cells, function (c) { return c.textContent; });
  });
  var s = window.site || {};
  return {
    leader: document.getElementById("leader").textContent,
    term: document.getElementById("term").textContent,
    quorum: document.getElementById("quorum").textContent,
    lease: document.getElementById("lease").textContent,
    duty: document.getElementById("duty").textContent,
    conn: document.getElementById("conn").textContent,
    loads: s.loads || 0, updates: s.updates || 0, shown: s.shown || [], rows: rows,
    changes: document.querySelectorAll("#changes tr").length,
    overflow: document.documentElement.scrollWidth - window.innerWidth
  };
})()`

// TestE2ESitePageInBrowser opens the site page of a follower of a
// three-agent site in a real headless Chromium at phone width and checks
// that it shows the leader, every member with its own role and version, and
// follows a transfer and a SIGKILL of the leader within 1 s of each new
// leader's election, without a reload, then the new leader's lease and
// running duty and the killed member gone. With EDGE_AGENT_SITE_SCREENSHOT=FILE
// it also writes a screenshot of the page (make site-screenshot).
func TestE2ESitePageInBrowser(t *testing.T) {
	chromium := harness.RequireChromium(t)
	ns, err := harness.StartNATSWithSystemAccount()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	// The leader duty is a sleep: the page shows it running on the leader.
	// H = 500 ms: a lease that outlasts this loaded machine's stalls, so
	// that leadership changes only when the test changes it. The page
	// follows changes as they come, whatever H is.
	site := harness.NewSite(binary, ns.ClientURL(), t.TempDir(), 3, "--heartbeat", "500ms", "--preemption", "never",
		"--nats-system-user", harness.SystemUser, "--nats-system-password", harness.SystemPassword,
		"--leader-command", "sleep 600")
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := site.WaitAgreement(site.IDs(), "", 0, 10*time.Millisecond, 15*time.Second); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(390, 844))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	// A phone: 390 CSS pixels wide.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(1))); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	page := "http://" + site.Proc("gw1").HTTPAddr + "/"
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	read := func() (pageView, error) { return chromedp.Run(ctx, chromedp.Evaluate[pageView](readPage)) }
	var v pageView
	waitPage := func(what string, d time.Duration, ok func(pageView) (bool, string)) {
		t.Helper()
		poll.UntilWhy(t, d, what, func() (bool, string) {
			var err error
			if v, err = read(); err != nil {
				return false, err.Error()
			}
			good, why := ok(v)
			return good, fmt.Sprintf("%s; page shows %+v", why, v)
		})
	}
	// The leader, every member with its own role and version (the
	// harness's binary reports version "dev"), the quorum, the duty, the
	// first leader change.
	waitPage("the page to show the leader and every member's own answer", 15*time.Second, func(v pageView) (bool, string) {
		if v.Leader == "" || v.Leader == "none" {
			return false, "no leader shown"
		}
		for _, id := range site.IDs() {
			role := "follower"
			if id == v.Leader {
				role = "leader"
			}
			r := v.Rows[id]
			if len(r) < 5 || r[1] != role || r[2] != "alive" || r[4] != "dev" {
				return false, fmt.Sprintf("row %s = %q, want %s, alive, version dev", id, r, role)
			}
		}
		return v.Conn == "live" && v.Quorum == "3 live / 2 needed" && strings.HasPrefix(v.Duty, "running") && v.Changes >= 1, "summary"
	})
	first, err := site.WaitAgreement(site.IDs(), "", 0, 10*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Leader != v.Leader {
		t.Fatalf("the page shows %s leading, the agents %s", v.Leader, first.Leader)
	}
	if v.Overflow > 0 {
		t.Errorf("the page is %d px wider than a 390 px phone screen", v.Overflow)
	}
	if v.Loads != 1 {
		t.Fatalf("page loaded %d times", v.Loads)
	}

	// shownWithin checks that the page showed leader in term within 1 s of
	// its election, dated by the new leader's own record of it.
	shownWithin := func(what, leader string, term uint64, cause time.Time) {
		t.Helper()
		waitPage("the page to show "+leader, 10*time.Second, func(v pageView) (bool, string) {
			return v.Leader == leader && v.Term == fmt.Sprint(term), "leader card"
		})
		var shownAt time.Time
		for _, s := range v.Shown {
			if s.Leader == leader && s.Term == term {
				shownAt = time.UnixMilli(s.At)
			}
		}
		elected := electedAt(t, site, leader, term)
		lag := shownAt.Sub(elected)
		t.Logf("site page: %s: %s elected in term %d %s after the %s, shown %s after its election (%s after the %s)",
			what, leader, term, elected.Sub(cause).Round(time.Millisecond), what, lag.Round(time.Millisecond),
			shownAt.Sub(cause).Round(time.Millisecond), what)
		// The browser's clock is in milliseconds: allow for the rounding.
		if shownAt.IsZero() || lag > time.Second || lag < -2*time.Millisecond {
			t.Errorf("%s: the page showed %s %s after its election, want within 1s", what, leader, lag)
		}
		if v.Loads != 1 {
			t.Errorf("%s: page loaded %d times: it must update without a reload", what, v.Loads)
		}
	}

	// A transfer to the member that neither leads nor serves the page.
	target := "gw3"
	if first.Leader == target {
		target = "gw2"
	}
	start := time.Now()
	out, err := exec.Command(binary, "transfer", target, "--nats-url", ns.ClientURL(), "--group", "site").CombinedOutput()
	if err != nil {
		t.Fatalf("transfer: %v\n%s", err, out)
	}
	second, err := site.WaitAgreement(site.IDs(), first.Leader, first.Term, 10*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	shownWithin("transfer", second.Leader, second.Term, start)

	// SIGKILL of that leader: its row goes down, a survivor takes over.
	start = time.Now()
	if err := site.Kill(second.Leader); err != nil {
		t.Fatal(err)
	}
	third, err := site.WaitAgreement(site.Running(), second.Leader, second.Term, 10*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	shownWithin("kill", third.Leader, third.Term, start)
	waitPage("the killed leader's row to show it gone", 10*time.Second, func(v pageView) (bool, string) {
		r := v.Rows[second.Leader]
		return len(r) > 2 && r[1] == "no answer" && r[2] == "down", fmt.Sprintf("row %q", r)
	})
	// The leader's own figures: its lease (its answer aged on gw1's
	// clock) and its duty.
	waitPage("the new leader's lease and duty", 10*time.Second, func(v pageView) (bool, string) {
		r := v.Rows[third.Leader]
		ok := len(r) > 1 && r[1] == "leader" && v.Lease != "\u2013" && v.Lease != "0 ms" && strings.HasPrefix(v.Duty, "running")
		return ok, "lease and duty cards"
	})
	if v.Loads != 1 || v.Updates < 3 {
		t.Fatalf("after both changes: %d loads, %d updates; want 1 load and live updates", v.Loads, v.Updates)
	}
	if path := os.Getenv("EDGE_AGENT_SITE_SCREENSHOT"); path != "" {
		screenshot(t, ctx, path)
	}
}

// electedAt is when leader recorded its own election in term (its
// status's leader_changes).
func electedAt(t *testing.T, site *harness.Site, leader string, term uint64) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := site.Proc(leader).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.LeaderChanges {
		if c.Leader == leader && c.Term == term {
			return c.Time
		}
	}
	b, _ := json.Marshal(st.LeaderChanges)
	t.Fatalf("%s's status records no election of its own in term %d: %s", leader, term, b)
	return time.Time{}
}

// screenshot writes the whole page to path, as a PNG of 256 colours (a
// few tens of KB instead of over a hundred: the page has few colours).
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	small := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.Draw(small, small.Rect, img, img.Bounds().Min, draw.Src)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, small); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s, %d bytes (%dx%d)", path, buf.Len(), img.Bounds().Dx(), img.Bounds().Dy())
}
