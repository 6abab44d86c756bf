package dutyguard

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// The test binary imports this package, so it is a guard when started as
// one (init): these tests run it from /proc/self/exe as the agent does.
// Started with Arg but without Env, it must not run the tests again (each
// would start more guards): TestMain refuses.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		os.Stderr.WriteString("dutyguard test binary started as a guard without " + Env + "\n")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// treeScript starts the processes a careless duty leaves behind: a wrapper
// shell that does not exec, a worker started with "&", and a double-forked
// worker in a session of its own (re-parented when its parent exits). Each
// writes its pid to DIR/pids; the wrapper waits.
const treeScript = `
echo $$ >> "$1/pids"
( setsid sh -c 'echo $$ >> "$0/pids"; while :; do sleep 1; done' "$1" & )
( while :; do sleep 1; done ) &
echo $! >> "$1/pids"
sleep 1000 &
echo $! >> "$1/pids"
wait
`

// testGuard is a guard process run by a test, as the agent runs one.
type testGuard struct {
	t     *testing.T
	cmd   *exec.Cmd
	conn  *net.UnixConn
	lines chan string
	done  chan struct{} // closed once the guard exited
	err   error         // its exit, set before done is closed
}

// startGuard starts a guard with a (hard) deadline d from now over argv.
func startGuard(t *testing.T, d time.Duration, env []string, argv ...string) *testGuard {
	t.Helper()
	return startGuardSoft(t, 0, d, env, argv...)
}

// startGuardSoft starts a guard with a soft deadline soft (0: none) and a
// hard one d from now over argv.
func startGuardSoft(t *testing.T, soft, d time.Duration, env []string, argv ...string) *testGuard {
	t.Helper()
	return startGuardArgs(t, soft, d, env, nil, argv...)
}

// startGuardArgs is startGuardSoft with extra guard arguments (--vip) and
// possibly no command.
func startGuardArgs(t *testing.T, soft, d time.Duration, env, extra []string, argv ...string) *testGuard {
	t.Helper()
	return spawnGuard(t, runArgs(t, soft, d, extra, argv...), append([]string{"PATH=" + os.Getenv("PATH"), Env + "=" + Protocol}, env...))
}

// runArgs is the command line after Arg of a guard with a soft deadline
// soft (0: none) and a hard one d from now, extra guard arguments, over
// argv (none: no command).
func runArgs(t *testing.T, soft, d time.Duration, extra []string, argv ...string) []string {
	t.Helper()
	now := ClockMonotonic()
	args := []string{"--deadline=" + strconv.FormatInt(now+int64(d), 10), "--label=test"}
	if soft != 0 {
		args = append(args, "--soft="+strconv.FormatInt(now+int64(soft), 10))
	}
	args = append(append(args, extra...), "--")
	if len(argv) > 0 {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			t.Fatal(err)
		}
		args = append(append(args, path), argv...)
	}
	return args
}

// spawnGuard starts this binary as a guard with args after Arg and the
// environment env, as the agent does.
func spawnGuard(t *testing.T, args, env []string) *testGuard {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", append([]string{Arg}, args...)...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	g := &testGuard{t: t, cmd: cmd, conn: fc.(*net.UnixConn), lines: make(chan string, 8), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(g.conn)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
		close(g.lines)
		g.err = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		g.conn.Close() // a guard still running kills its tree and exits
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return g
}

// line waits for the guard's next report.
func (g *testGuard) line() string {
	g.t.Helper()
	select {
	case l, ok := <-g.lines:
		if !ok {
			g.t.Fatal("the guard closed its connection")
		}
		return l
	case <-time.After(10 * time.Second):
		g.t.Fatal("no report from the guard within 10s")
	}
	return ""
}

// renew sends the deadlines soft and hard from now.
func (g *testGuard) renew(soft, hard time.Duration) {
	g.t.Helper()
	now := ClockMonotonic()
	g.send(Renew + " " + strconv.FormatInt(now+int64(soft), 10) + " " + strconv.FormatInt(now+int64(hard), 10))
}

func (g *testGuard) send(line string) {
	g.t.Helper()
	if _, err := g.conn.Write([]byte(line + "\n")); err != nil {
		g.t.Fatal(err)
	}
}

// sendLate sends a line the guard may no longer read: it may have exited
// and closed its end after its last report, so a broken pipe or a reset is
// not an error here.
func (g *testGuard) sendLate(line string) {
	g.t.Helper()
	_, err := g.conn.Write([]byte(line + "\n"))
	if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		g.t.Fatal(err)
	}
}

// ranToExit checks that the guard started the command, reported that it
// exited with status, and exited itself without error.
func (g *testGuard) ranToExit(status int) {
	g.t.Helper()
	if l := g.line(); !strings.HasPrefix(l, Started+" ") {
		g.t.Fatalf("first report %q", l)
	}
	if l, want := g.line(), Done+" "+Exited+" exit status "+strconv.Itoa(status); l != want {
		g.t.Fatalf("report %q, want %q", l, want)
	}
	if err := g.waitExit(); err != nil {
		g.t.Fatalf("guard exit: %v", err)
	}
}

// waitExit waits until the guard exited and reports its exit.
func (g *testGuard) waitExit() error {
	g.t.Helper()
	select {
	case <-g.done:
		return g.err
	case <-time.After(10 * time.Second):
		g.t.Fatal("the guard did not exit within 10s")
	}
	return nil
}

// tree starts the guard over treeScript and waits until the script's four
// processes are running, and returns them, each pinned by a pidfd.
func tree(t *testing.T, d time.Duration) (*testGuard, map[int]int) {
	t.Helper()
	dir := t.TempDir()
	g := startGuard(t, d, nil, "sh", "-c", treeScript, "sh", dir)
	if l := g.line(); !strings.HasPrefix(l, Started+" ") {
		t.Fatalf("first report %q", l)
	}
	return g, treePids(t, dir)
}

// treePids waits until treeScript, run over dir, has its four processes
// running, and returns them, each pinned by a pidfd.
func treePids(t *testing.T, dir string) map[int]int {
	t.Helper()
	var fs []string
	poll.UntilWhy(t, 10*time.Second, "the duty's processes to start", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		fs = strings.Fields(string(b))
		return len(fs) == 4, fmt.Sprintf("pids %q", b)
	})
	pids := map[int]int{}
	for _, f := range fs {
		pid, _ := strconv.Atoi(f)
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %d: %v", pid, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		pids[pid] = fd
	}
	return pids
}

// exited reports whether the process behind pidfd fd has exited.
func exited(fd int) bool {
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
	return err == nil && n > 0
}

// checkTree checks that every process of the tree is below the guard (the
// double-forked worker re-parented to it) while it runs.
func checkTree(t *testing.T, g *testGuard, pids map[int]int) {
	t.Helper()
	below := descendants(g.cmd.Process.Pid)
	for pid := range pids {
		if !below[pid] {
			t.Errorf("process %d is not below the guard %d: %v", pid, g.cmd.Process.Pid, below)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func checkGone(t *testing.T, pids map[int]int) {
	t.Helper()
	for pid, fd := range pids {
		if !exited(fd) {
			t.Errorf("process %d of the duty's tree is still alive", pid)
		}
	}
}

// TestGuardKillsTreeWhenAgentGone: the agent's end of the connection closes
// (as when the agent is SIGKILLed): every process of the tree dies, the
// double-forked one included, and the guard exits.
func TestGuardKillsTreeWhenAgentGone(t *testing.T) {
	g, pids := tree(t, time.Hour)
	checkTree(t, g, pids)
	g.conn.Close()
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	checkGone(t, pids)
}

// TestGuardKillsTreeAtDeadline: without renewals the guard kills the tree
// when the deadline passes, reports it, and exits; renewals before that
// keep it running past the first deadline.
func TestGuardKillsTreeAtDeadline(t *testing.T) {
	const d = time.Second
	g, pids := tree(t, d)
	// Renew twice, each time to d from now: the tree outlives the first
	// deadline, and dies at the last one.
	var last time.Time
	for i := range 2 {
		if i > 0 {
			time.Sleep(d / 3)
		}
		last = time.Now()
		g.renew(d, d)
	}
	if l := g.line(); !strings.HasPrefix(l, Done+" "+Expired+" ") {
		t.Fatalf("report %q, want done expired", l)
	}
	if took := time.Since(last); took < d {
		t.Fatalf("expired %s after the last renewal of %s", took, d)
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	checkGone(t, pids)
}

// TestGuardReadsRenewalBeforeExpiring: a guard that was not scheduled
// until after its deadline (here: stopped) reads the renewal the agent sent
// in time before it decides: it does not kill a duty whose lease was
// renewed.
func TestGuardReadsRenewalBeforeExpiring(t *testing.T) {
	const d = 2 * time.Second
	first := time.Now().Add(d)
	g, pids := tree(t, d)
	if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	g.renew(time.Hour, time.Hour)
	time.Sleep(time.Until(first) + 200*time.Millisecond) // past the first deadline, the renewal waiting
	if err := g.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A kill the agent sends after the renewal: the duty must still be
	// running when it is read, so the report is "killed", not "expired".
	g.send(Kill)
	if l := g.line(); !strings.HasPrefix(l, Done+" "+Killed+" ") {
		t.Fatalf("report %q, want done killed: the guard expired with a renewal waiting", l)
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	checkGone(t, pids)
}

// TestGuardTermThenCommandExits: term sends SIGTERM to every process of the
// tree; when the command exits, what is left is killed and the exit is
// reported.
func TestGuardTermThenCommandExits(t *testing.T) {
	dir := t.TempDir()
	// The command traps SIGTERM and exits 7 once its setsid'ed worker has
	// written a line on SIGTERM, which proves the worker got it too (what
	// is left when the command exits is killed at once).
	script := `
( setsid sh -c 'trap "echo worker >> $0/term; exit 0" TERM; echo > $0/wready; while :; do sleep 0.05; done' "$1" & )
trap 'while [ ! -s "$1/term" ]; do sleep 0.01; done; exit 7' TERM
echo > "$1/ready"
while :; do sleep 0.05; done
`
	g := startGuard(t, time.Hour, nil, "sh", "-c", script, "sh", dir)
	if l := g.line(); !strings.HasPrefix(l, Started+" ") {
		t.Fatalf("first report %q", l)
	}
	// Wait until both have set their traps.
	poll.Until(t, 10*time.Second, "the command and the worker to set their traps", func() bool {
		return exists(filepath.Join(dir, "ready")) && exists(filepath.Join(dir, "wready"))
	})
	g.send(Term)
	if l := g.line(); l != Done+" "+Exited+" exit status 7" {
		t.Fatalf("report %q, want done exited exit status 7", l)
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "term"))
	if strings.TrimSpace(string(b)) != "worker" {
		t.Fatalf("the double-forked worker got no SIGTERM: %q", b)
	}
}

// TestGuardCommandExitLeavesNothing: a command that exits leaving a
// daemon behind: the daemon is killed and the exit reported.
func TestGuardCommandExitLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	g := startGuard(t, time.Hour, nil, "sh", "-c", `( setsid sleep 1000 & echo $! > "$1/pid" ) ; sleep 0.1; exit 3`, "sh", dir)
	g.ranToExit(3)
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("daemon pid %q", b)
	}
	if err := unix.Kill(pid, 0); err == nil {
		if ppid, ok := parentOf(pid); ok && ppid == g.cmd.Process.Pid {
			t.Fatalf("the daemon %d survived the guard", pid)
		}
	}
}

// TestGuardEnvironment: the guard's marker does not reach the command.
func TestGuardEnvironment(t *testing.T) {
	dir := t.TempDir()
	g := startGuard(t, time.Hour, []string{"KEEP=1"}, "sh", "-c", `env > "$1/env"`, "sh", dir)
	g.line()
	if l := g.line(); l != Done+" "+Exited+" exit status 0" {
		t.Fatalf("report %q", l)
	}
	g.waitExit()
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), Env) || !strings.Contains(string(b), "KEEP=1") {
		t.Fatalf("command environment:\n%s", b)
	}
}

// TestGuardRefusals: an expired first deadline starts nothing; a program
// that cannot be executed is an error report; a guard of another protocol
// version refuses to start.
func TestGuardRefusals(t *testing.T) {
	g := startGuard(t, -time.Second, nil, "sleep", "1000")
	if l := g.line(); l != Done+" "+Expired+" not started" {
		t.Fatalf("expired start: report %q", l)
	}
	g.waitExit()

	dir := t.TempDir()
	notExec := filepath.Join(dir, "x")
	if err := os.WriteFile(notExec, []byte("#!/nonexistent\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	g = startGuard(t, time.Hour, nil, notExec)
	if l := g.line(); !strings.HasPrefix(l, Done+" "+Error+" ") {
		t.Fatalf("exec error: report %q", l)
	}
	g.waitExit()

	g = startGuard(t, time.Hour, []string{Env + "=0"}, "sleep", "1000")
	err := g.waitExit()
	var ee *exec.ExitError
	if !asExitError(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("protocol mismatch: exit %v", err)
	}
}

func asExitError(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// TestGuardForwardsTermination: a guard that gets SIGTERM (systemd's
// KillMode=control-group stops every process of the unit) passes it on to
// the tree and stays until the tree is gone.
func TestGuardForwardsTermination(t *testing.T) {
	g, pids := tree(t, time.Hour)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The wrapper shell ends (of SIGTERM, or with status 0 when its
	// children died of theirs first and its wait returned), so the guard
	// reports its exit and kills the rest.
	if l := g.line(); !strings.HasPrefix(l, Done+" "+Exited+" ") {
		t.Fatalf("report %q", l)
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	checkGone(t, pids)
}

// TestGuardSoftDeadline: when the soft deadline passes without renewal the
// tree gets SIGTERM (once, even if the agent's own stop comes too); a
// command that exits on it is reported stopped. One that ignores it is
// killed at the hard deadline.
func TestGuardSoftDeadline(t *testing.T) {
	dir := t.TempDir()
	script := `trap 'echo term >> "$1/terms"; exit 0' TERM; echo > "$1/ready"; while :; do sleep 0.05; done`
	// The deadlines leave the guard seconds to start the command: a race
	// build on a loaded machine took over 500 ms.
	g := startGuardSoft(t, 3*time.Second, time.Hour, nil, "sh", "-c", script, "sh", dir)
	if l := g.line(); !strings.HasPrefix(l, Started+" ") {
		t.Fatalf("first report %q", l)
	}
	poll.Until(t, 10*time.Second, "the command to set its trap", func() bool { return exists(filepath.Join(dir, "ready")) })
	start := time.Now()
	if l := g.line(); l != Done+" "+Stopped+" exit status 0" {
		t.Fatalf("report %q, want done stopped exit status 0", l)
	}
	g.sendLate(Term) // the agent's stop, late: no second SIGTERM (the guard may be gone already)
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "terms")); string(b) != "term\n" {
		t.Fatalf("SIGTERMs: %q", b)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("too slow")
	}

	// Ignoring SIGTERM: the agent's term and the soft deadline give one
	// SIGTERM between them, and the hard deadline kills.
	dir = t.TempDir()
	script = `trap 'echo term >> "$1/terms"' TERM; echo > "$1/ready"; while :; do sleep 0.05; done`
	g = startGuardSoft(t, 3*time.Second, 4*time.Second, nil, "sh", "-c", script, "sh", dir)
	g.line()
	poll.Until(t, 10*time.Second, "the command to set its trap", func() bool { return exists(filepath.Join(dir, "ready")) })
	g.send(Term)
	if l := g.line(); !strings.HasPrefix(l, Done+" "+Expired+" ") {
		t.Fatalf("report %q, want done expired", l)
	}
	g.waitExit()
	if b, _ := os.ReadFile(filepath.Join(dir, "terms")); string(b) != "term\n" {
		t.Fatalf("SIGTERMs: %q, want one", b)
	}
}

func TestParseGuardArgs(t *testing.T) {
	g, err := parseGuardArgs([]string{"--deadline=5", "--label=gw1/3", "--", "/bin/sh", "sh", "-c", "x"})
	if err != nil || g.deadline != 5 || g.soft != 5 || g.label != "gw1/3" || g.path != "/bin/sh" || strings.Join(g.argv, " ") != "sh -c x" {
		t.Fatalf("%+v %v", g, err)
	}
	if g, err := parseGuardArgs([]string{"--soft=3", "--deadline=5", "--", "/bin/sh", "sh"}); err != nil || g.soft != 3 {
		t.Fatalf("soft: %+v %v", g, err)
	}
	for _, bad := range [][]string{
		nil, {"--deadline=5"}, {"--", "/bin/sh", "sh"}, {"--deadline=x", "--", "/bin/sh", "sh"},
		{"--deadline=5", "--"}, {"--bogus", "--", "/bin/sh", "sh"}, {"--deadline=-1", "--", "/bin/sh", "sh"},
	} {
		if _, err := parseGuardArgs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
