package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Offline-safe time. Gateways without a real-time clock boot in 1970 and
// jump decades when NTP syncs; an operator may also set the clock by hand.
// None of that may start an election or end a lease. A test cannot move the
// system clock, so these tests show it by construction:
//
//   - the election core (election/) does not use package time at all: it
//     counts ticks;
//   - the agent reads the clock in exactly one place that matters, New,
//     whose time.Now() carries a monotonic reading, and measures everything
//     (lease ends, loop health, heartbeat send times) as time.Since that base,
//     which Go computes from the monotonic readings alone, whatever the wall
//     clock does; ticks come from a time.Ticker, which runs on the monotonic
//     clock;
//   - nothing strips the monotonic reading (Round, Truncate, UTC, Local, In)
//     or converts to wall-clock numbers (Unix*) on the way to a decision.
//
// TestClockReadingsAreListed fails on any new reading of the clock in agent/,
// bus/, election/ or edge/, so that each one is reviewed and listed here with why
// it is safe.
var allowedClockUse = map[string]string{
	"agent/agent.go: New: time.Now":    "the monotonic base of every duration the agent measures",
	"agent/agent.go: mono: time.Since": "monotonic: the base carries a monotonic reading",
	// An input's arrival, which the loop measures from the base with Sub
	// of two monotonic readings (inputAt).
	"agent/bus.go: Offer: time.Now":    "an input's arrival, measured from the base by Sub: monotonic",
	"agent/agent.go: step: time.Now":   "the algorithm guard's refusal window: now+d compared with Before, monotonic",
	"agent/agent.go: Status: time.Now": "the report's timestamp, shown to operators, never compared",
	"agent/agent.go: Status: UTC":      "the report's timestamp only",
	// A LeaderChange carries the wall time it was seen, for operators
	// (edge-agent watch); nothing compares it. The duty measures on mono.
	"agent/watch.go: leaderChange: time.Now": "the change's timestamp, shown to operators, never compared",
	// prometheus.Gauge's method: a gauge set to the wall time, for a
	// dashboard; the agent never calls it, and nothing compares it.
	"agent/families.go: SetToCurrentTime: time.Now": "a gauge's value, shown to operators, never compared",
	"agent/families.go: SetToCurrentTime: UnixNano": "a gauge's value only",
	"agent/watch.go: leaderChange: UTC":             "the change's timestamp only",
	// The status's last leader changes (leader_changes) carry the same
	// wall time, for operators and the site page; nothing compares it.
	"agent/agent.go: reportLeader: time.Now": "a leader change's timestamp in status, shown to operators, never compared",
	"agent/agent.go: reportLeader: UTC":      "a leader change's timestamp only",
	// The site page's round of asking the group stamps each answer when it
	// came: the page ages the leader's lease figure by Sub of two
	// readings, monotonic; nothing of the election depends on it.
	"bus/groupstatus.go: GroupStatus: time.Now": "an answer's arrival, for the site page's display: Sub, monotonic",
	// The site page: snapshot timestamps for display, answer ages and the
	// /site.json cache by Sub/Since of monotonic readings, a write
	// deadline on a stream's connection (monotonic in the poller).
	"edge/site/site.go: events: time.Now":         "a write deadline on the stream, monotonic in the poller",
	"edge/site/site.go: snapshotJSON: time.Since": "the age of the cached answers: monotonic",
	"edge/site/site.go: snapshotJSON: time.Now":   "the snapshot's timestamp (display) and the cache's base: monotonic",
	"edge/site/site.go: loop: time.Now":           "the snapshot's timestamp, shown to operators, never compared",
	// The leadership journal (an audit log, and the fault tests' record)
	// stamps lines with wall time so that journals of several agents can be
	// merged; the agent writes it and never reads it back.
	"agent/journal.go: write: time.Now":     "the journal line's timestamp, output only",
	"agent/journal.go: write: UnixNano":     "the journal line's timestamp, output only",
	"agent/journal.go: wallUntil: time.Now": "a monotonic lease end shown as wall time in the journal, output only",
	"agent/journal.go: wallUntil: UnixNano": "a monotonic lease end shown as wall time in the journal, output only",
	// A write deadline on the duty guard's control socket: the poller
	// turns it into a monotonic timeout.
	"agent/duty/proc_linux.go: send: time.Now":     "a socket write deadline, monotonic in the poller",
	"agent/duty/proc_linux.go: activate: time.Now": "a socket write deadline, monotonic in the poller",
	"edge/embedded.go: StartEmbedded: time.Now":    "a start-up deadline compared with After: monotonic",
	// Rate limits and challenge nonces measure from a base taken at start,
	// with Since: monotonic.
	"agent/wire/sign/signing.go: NewSigning: time.Now": "the base of nonce lifetimes and proof rates: monotonic",
	"agent/wire/sign/signing.go: now: time.Since":      "monotonic: the base carries a monotonic reading",
	"bus/transport.go: NewNATSTransport: time.Now":     "the base of the per-sender rate limit: monotonic",
	"bus/transport.go: admissible: time.Since":         "monotonic: the base carries a monotonic reading",
	"bus/control.go: serveControl: time.Now":           "the base of the control rate limits: monotonic",
	"bus/control.go: serveControl: time.Since":         "monotonic: the base carries a monotonic reading",
	// The members' protocol versions: an announcement's age and a
	// member's silence are differences of readings that carry monotonic
	// clocks (Sub uses them); the rate limit measures from a base.
	"bus/protocol.go: announce: time.Now":   "an announcement's arrival, the periodic re-reading and a louder site's next announcement (sooner: compared by After): ages by Sub, monotonic",
	"bus/protocol.go: announce: time.Since": "monotonic: the rate limit's base carries a monotonic reading",
	"bus/protocol.go: Protocol: time.Now":   "the instant of the view: ages by Sub, monotonic",
	// The periodic tasks' schedule: next runs are readings that carry a
	// monotonic clock, compared with Before and Until (monotonic).
	"bus/periodic.go: startPeriodic: time.Now": "a task's first run: compared by Until and Before, monotonic",
	"bus/periodic.go: loop: time.Now":          "a task's next run: compared by Until and Before, monotonic",
	"bus/periodic.go: loop: time.Until":        "monotonic: the next run carries a monotonic reading",
	"bus/transport.go: Send: time.Now":         "the instant a message's level is read at: ages by Sub, monotonic",
	"bus/transport.go: handle: time.Now":       "when a member was heard: ages by Sub, monotonic",
	// A witness's connection reads at most every --read-batch: the time
	// since its last read, on readings that carry a monotonic clock.
	"edge/readbatch.go: Read: time.Now":   "when the last read returned: compared by Since, monotonic",
	"edge/readbatch.go: Read: time.Since": "the time since the last read: monotonic",
	// The duty guard logs how long removing a virtual IP took.
	"edge/dutyguard/vip_linux.go: removeVIPs: time.Now":   "the start of a removal, for the log line",
	"edge/dutyguard/vip_linux.go: removeVIPs: time.Since": "how long the removal took, for the log line: monotonic",
	"edge/dutyguard/vip_linux.go: removeVIPs: Round":      "the log line's precision",
	// The route poller compares the routed servers at least every H,
	// measured from a monotonic reading; a jump of the wall clock can
	// neither hide a closed route nor report one.
	"agent/fastpath.go: WatchRoutes: time.Now":   "the time of the last full comparison: monotonic",
	"agent/fastpath.go: WatchRoutes: time.Since": "monotonic: the base carries a monotonic reading",
	"edge/loglimit.go: newLogLimiter: time.Now":  "the base of the log rate limits: monotonic",
	"edge/loglimit.go: allow: time.Since":        "monotonic: the base carries a monotonic reading",
	// The guard times how long killing the duty tree took, for its log line.
	"edge/dutyguard/guard_linux.go: onEvent: time.Now":   "a duration for the log line, never compared",
	"edge/dutyguard/guard_linux.go: onEvent: time.Since": "monotonic: the base carries a monotonic reading",
	"edge/dutyguard/guard_linux.go: onEvent: Round":      "a Duration rounded for the log line, not a Time",
	"edge/systemd.go: Run: time.Now":                     "the first Tick; Tick compares with Sub: monotonic",
}

// clockCalls are the package-time functions that read the clock or make
// times from wall-clock numbers, and the methods that strip the monotonic
// reading or turn a time into wall-clock numbers.
var (
	clockFuncs   = map[string]bool{"Now": true, "Since": true, "Until": true, "Unix": true, "UnixMilli": true, "UnixMicro": true, "Date": true, "Parse": true, "ParseInLocation": true}
	clockMethods = map[string]bool{"Round": true, "Truncate": true, "UTC": true, "Local": true, "In": true, "Unix": true, "UnixNano": true, "UnixMilli": true, "UnixMicro": true, "AddDate": true}
)

func TestClockReadingsAreListed(t *testing.T) {
	found := map[string]bool{}
	for _, dir := range []string{"../agent", "../agent/wire", "../agent/wire/sign", "../agent/duty", "../bus", "../election", "../edge", "../edge/dutyguard", "../edge/site"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "time" && strings.HasPrefix(rel, "election/") {
					t.Errorf("%s imports time: the election core counts ticks and must not read any clock", rel)
				}
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					name := sel.Sel.Name
					pkg, isIdent := sel.X.(*ast.Ident)
					switch {
					case isIdent && pkg.Name == "time" && clockFuncs[name]:
						found[rel+": "+fn.Name.Name+": time."+name] = true
					case !(isIdent && pkg.Name == "time") && clockMethods[name] && len(call.Args) <= 1:
						// Durations have Round and Truncate too; those are
						// listed only if they ever appear.
						found[rel+": "+fn.Name.Name+": "+name] = true
					}
					return true
				})
			}
		}
	}
	var unlisted []string
	for use := range found {
		if _, ok := allowedClockUse[use]; !ok {
			unlisted = append(unlisted, use)
		}
	}
	sort.Strings(unlisted)
	for _, use := range unlisted {
		t.Errorf("clock use not reviewed: %s (list it in allowedClockUse with why a wall-clock jump cannot affect it)", use)
	}
	for use := range allowedClockUse {
		if !found[use] {
			t.Errorf("allowedClockUse lists %q, which the code no longer has: drop it", use)
		}
	}
}

// TestAgentClockBaseIsMonotonic checks the one base the agent measures from
// at run time: it carries a monotonic reading, so time.Since(base) ignores
// the wall clock. A base without one (as Round(0) makes, or a time from the
// wall clock) would follow the wall clock instead: that is what the listing
// above keeps out.
func TestAgentClockBaseIsMonotonic(t *testing.T) {
	members := []election.Member{{ID: "gw1"}}
	net := NewMemNetwork()
	a, err := New(Config{ID: "gw1", Group: "site", Members: members, Heartbeat: 20 * time.Millisecond, StateDir: t.TempDir()},
		WithTransport(net.Join("gw1")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer a.store.Close()
	if !strings.Contains(a.lease.start.String(), " m=") {
		t.Fatalf("the agent's clock base %s has no monotonic reading", a.lease.start)
	}
	if strings.Contains(a.lease.start.Round(0).String(), " m=") {
		t.Fatal("Round(0) kept the monotonic reading: this test's premise is wrong")
	}
	if d := a.mono(); d < 0 || d > time.Minute {
		t.Fatalf("mono() = %s right after New", d)
	}
}
