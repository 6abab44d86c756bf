package dutyguard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// A program that imports this package becomes the duty guard when it is
// started as one (argv[1] = Arg and Env set), before its main runs, and
// before most of its packages are initialized: this package imports little,
// so it is initialized early, and the guard never pays for the agent's.
// It exits with syscall.Exit: nothing of the program's is set up to be
// flushed, and a race-enabled build (the tests') would otherwise wait a
// second at exit, which the agent would count as the duty still running.
func init() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		if v, ok := os.LookupEnv(Env); ok {
			syscall.Exit(Run(os.Args[2:], v))
		}
	}
}

// guardArgs are the guard's command line after Arg (see the package doc).
type guardArgs struct {
	soft     int64  // SIGTERM then, unless renewed (= deadline if not given)
	deadline int64  // SIGKILL then, unless renewed
	label    string // for ps and the guard's own log lines: id/term
	vips     []vip  // the virtual IPs held during the run (vip_linux.go)
	path     string // "" with vips and no command: the run holds the VIPs
	argv     []string
}

func parseGuardArgs(args []string) (guardArgs, error) {
	var g guardArgs
	for i, a := range args {
		switch {
		case a == "--":
			rest := args[i+1:]
			switch {
			case len(rest) >= 2:
				g.path, g.argv = rest[0], rest[1:]
			case len(rest) > 0 || len(g.vips) == 0:
				return g, errors.New("no command after --")
			}
			if g.deadline == 0 {
				return g, errors.New("no --deadline")
			}
			if g.soft == 0 || g.soft > g.deadline {
				g.soft = g.deadline
			}
			return g, nil
		case hasPrefix(a, "--deadline="):
			v, err := strconv.ParseInt(a[len("--deadline="):], 10, 64)
			if err != nil || v <= 0 {
				return g, fmt.Errorf("bad %s", a)
			}
			g.deadline = v
		case hasPrefix(a, "--soft="):
			v, err := strconv.ParseInt(a[len("--soft="):], 10, 64)
			if err != nil || v <= 0 {
				return g, fmt.Errorf("bad %s", a)
			}
			g.soft = v
		case hasPrefix(a, "--label="):
			g.label = a[len("--label="):]
		case hasPrefix(a, "--vip="):
			v, err := parseVIP(a[len("--vip="):])
			if err != nil {
				return g, fmt.Errorf("bad %s: %v", a, err)
			}
			g.vips = append(g.vips, v)
		default:
			return g, fmt.Errorf("unknown argument %q", a)
		}
	}
	return g, errors.New("no -- before the command")
}

// guard is the state of one guard process.
type guard struct {
	self     int
	main     int // the command's pid
	mainDone bool
	status   syscall.WaitStatus // the command's, once mainDone
	ctl      int                // the control connection; -1 once the agent is gone
	label    string
	termSent bool // the tree got SIGTERM: once per run, from the agent or the soft deadline
	softStop bool // ... and it was the soft deadline's

	env       []string    // the command's environment
	vips      []vip       // to hold during the run
	vipsHeld  int         // how many of vips are added (the first ones)
	announce  *time.Timer // the next announcement round; nil: none due
	announced int         // rounds after the first scheduled so far
}

// Run is the guard process's main, given the arguments after Arg and the
// value of Env; it returns the exit code. Its steps: check the command line
// and the control connection, catch the signals, become the subreaper, wait
// for the control loop's first word on the deadlines, start the command,
// then supervise it until the tree is gone.
func Run(args []string, proto string) int {
	env, rest := os.Environ(), []byte(nil)
	if len(args) > 0 && args[0] == Standby {
		if proto != Protocol {
			return refuseProtocol(proto)
		}
		var code int
		if args, env, rest, code = awaitRun(ControlFD, args[1:]); args == nil {
			return code
		}
	}
	ga, code := prepare(args, proto)
	if code != 0 {
		return code
	}
	g := &guard{self: os.Getpid(), ctl: ControlFD, label: ga.label, vips: ga.vips, env: commandEnv(env)}
	defer g.removeVIPs() // removed on every way out; at once, on the usual ones
	chld, fwd := notifySignals()
	if err := setChildSubreaper(); err != nil {
		g.report(Done, Error, "PR_SET_CHILD_SUBREAPER: "+err.Error())
		return 1
	}
	events := make(chan event, 4)
	go (&control{fd: ControlFD, soft: ga.soft, deadline: ga.deadline, buf: rest}).run(events)
	if !g.awaitStart(events) {
		return 0
	}
	if err := g.addVIPs(); err != nil {
		g.report(Done, Error, err.Error())
		return 0
	}
	g.announceVIPs()
	if ga.path == "" {
		g.report(Started, "0") // the run is the VIPs held
		return g.supervise(events, chld, fwd)
	}
	if code, started := g.startCommand(ga); !started {
		return code
	}
	return g.supervise(events, chld, fwd)
}

// prepare checks the protocol version and the command line, and readies
// the control connection; a non-zero code is Run's exit code.
func prepare(args []string, proto string) (guardArgs, int) {
	if proto != Protocol {
		return guardArgs{}, refuseProtocol(proto)
	}
	ga, err := parseGuardArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "edge-agent duty-guard: %v (it is started by the agent, not by hand)\n", err)
		return guardArgs{}, 2
	}
	// The control connection: close-on-exec, so that the duty never
	// inherits it; non-blocking, read by the control loop (control).
	syscall.CloseOnExec(ControlFD)
	if err := syscall.SetNonblock(ControlFD, true); err != nil {
		fmt.Fprintf(os.Stderr, "edge-agent duty-guard: control connection: %v\n", err)
		return guardArgs{}, 2
	}
	return ga, 0
}

// refuseProtocol reports a guard started by an agent of another protocol
// version and returns the exit code.
func refuseProtocol(proto string) int {
	fmt.Fprintf(os.Stderr, "edge-agent duty-guard: protocol %q, this binary speaks %q: a guard from another version; not starting the duty\n", proto, Protocol)
	return 2
}

// maxStandbyRun bounds what a standby guard reads before start: a command
// line and an environment, not a stream.
const maxStandbyRun = 1 << 20

// awaitRun is a standby guard's wait (see the package doc): it reads the
// run's arguments and environment from the control connection fd, blocking,
// until start. It returns them and what followed start in the stream (for
// the control loop); args is nil when the guard is not to run, with its
// exit code: 0 when the agent closed the connection (it let the standby
// go), 2 on anything but this protocol. extra is the standby's own command
// line after Standby (--label=TEXT), checked, not used.
func awaitRun(fd int, extra []string) (args, env []string, rest []byte, code int) {
	for _, a := range extra {
		if !hasPrefix(a, "--label=") {
			fmt.Fprintf(os.Stderr, "edge-agent duty-guard: standby: unknown argument %q (it is started by the agent, not by hand)\n", a)
			return nil, nil, nil, 2
		}
	}
	var buf []byte
	var chunk [4096]byte
	for {
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			verb, arg, _ := bytes.Cut(buf[:i], []byte{' '})
			line := string(buf[:i])
			buf = buf[i+1:]
			switch string(verb) {
			case Start:
				return append([]string{}, args...), append([]string{}, env...), buf, 0
			case SetArg, SetEnv:
				v, err := strconv.Unquote(string(arg))
				if err != nil {
					fmt.Fprintf(os.Stderr, "edge-agent duty-guard: standby: bad line %q: %v\n", line, err)
					return nil, nil, nil, 2
				}
				if string(verb) == SetArg {
					args = append(args, v)
				} else {
					env = append(env, v)
				}
			default:
				fmt.Fprintf(os.Stderr, "edge-agent duty-guard: standby: unexpected line %q before start\n", line)
				return nil, nil, nil, 2
			}
		}
		n, err := syscall.Read(fd, chunk[:])
		switch {
		case errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN):
			pollReadable(fd, int64(time.Second))
			continue
		case err != nil || n == 0:
			return nil, nil, nil, 0
		}
		if buf = append(buf, chunk[:n]...); len(buf) > maxStandbyRun {
			fmt.Fprintf(os.Stderr, "edge-agent duty-guard: standby: more than %d bytes before start\n", maxStandbyRun)
			return nil, nil, nil, 2
		}
	}
}

// notifySignals catches the signals the guard acts on, before the command
// starts, so that no SIGCHLD of the command is lost. SIGTERM, SIGINT and
// SIGHUP (fwd) are passed on to the tree (a `systemctl stop` with
// KillMode=control-group sends SIGTERM to every process of the unit): the
// guard itself goes only once the tree is gone.
func notifySignals() (chld, fwd chan os.Signal) {
	chld = make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	fwd = make(chan os.Signal, 1)
	signal.Notify(fwd, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// A write to a closed stderr (the agent's, once it is gone, unless
	// that is the journal) fails instead of killing the guard. Notify, not
	// Ignore: an ignored signal would stay ignored in the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return chld, fwd
}

// awaitStart waits for the control loop's first event and reports whether
// the command may start. The agent may have renewed the deadline, or
// stopped the duty, while the guard was starting: the control loop reads
// that first. If not, the agent is told why nothing was started.
func (g *guard) awaitStart(events <-chan event) bool {
	switch <-events {
	case evReady:
		return true
	case evSoft:
		g.report(Done, Stopped, "not started")
	case evExpired:
		g.report(Done, Expired, "not started")
	case evGone:
	default: // term or kill
		g.report(Done, Killed, "not started")
	}
	return false
}

// startCommand starts the command and reports it started; if it cannot,
// it reports the error and returns Run's exit code with started false.
func (g *guard) startCommand(ga guardArgs) (code int, started bool) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		g.report(Done, Error, err.Error())
		return 1, false
	}
	// Its own process group, as the command always had (a terminal's
	// signals go to the agent, which stops the duty in order). Pdeathsig:
	// should the guard itself be killed, the command at least goes too.
	pid, err := syscall.ForkExec(ga.path, ga.argv, &syscall.ProcAttr{
		Env:   g.env,
		Files: []uintptr{null.Fd(), 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	null.Close()
	if err != nil {
		g.report(Done, Error, err.Error())
		return 0, false
	}
	g.main = pid
	g.report(Started, strconv.Itoa(pid))
	return 0, true
}

// commandEnv is environ without the guard's marker (Env).
func commandEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !hasPrefix(kv, Env+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// supervise acts on the control loop's events, the command's exit and the
// signals passed on to the tree, until the tree is gone; it returns Run's
// exit code.
func (g *guard) supervise(events <-chan event, chld <-chan os.Signal, fwd <-chan os.Signal) int {
	for {
		if g.main == 0 && g.termSent {
			// No command: the run ends when it is told to stop.
			reason := Exited
			if g.softStop {
				reason = Stopped
			}
			g.report(Done, reason, "exit status 0")
			return 0
		}
		select {
		case ev := <-events:
			if g.onEvent(ev, chld) {
				return 0
			}
		case <-g.announceC():
			g.announceVIPs()
		case <-chld:
			g.reap()
			if g.mainDone {
				g.removeVIPs()
				g.killTree(chld) // what the command left behind
				reason := Exited
				if g.softStop {
					reason = Stopped
				}
				g.report(Done, reason, g.statusText())
				return 0
			}
		case <-fwd:
			g.term(false)
		}
	}
}

// onEvent acts on one event of the control loop and reports whether the
// tree is gone (the guard's work is over).
func (g *guard) onEvent(ev event, chld <-chan os.Signal) (over bool) {
	switch ev {
	case evGone:
		// The agent is gone (or closed the connection to abort): no one
		// renews the deadline or stops the duty in order.
		g.ctl = -1
		began := time.Now()
		g.removeVIPs()
		n := g.killTree(chld)
		g.logf("the agent is gone: killed the leader duty (%d processes in %s)", n, time.Since(began).Round(time.Microsecond))
		return true
	case evExpired:
		began := time.Now()
		g.removeVIPs()
		n := g.killTree(chld)
		g.logf("the lease deadline passed without renewal: killed the leader duty (%d processes in %s)", n, time.Since(began).Round(time.Microsecond))
		g.report(Done, Expired, g.statusText())
		return true
	case evTerm:
		g.term(false)
	case evSoft:
		g.term(true)
	case evKill:
		g.removeVIPs()
		g.killTree(chld)
		g.report(Done, Killed, g.statusText())
		return true
	}
	return false
}

// term sends SIGTERM to the tree, once per run: the agent's stop and the
// soft deadline come at about the same time, and a command that traps
// SIGTERM must not run its handler twice.
func (g *guard) term(soft bool) {
	if g.termSent {
		return
	}
	g.termSent, g.softStop = true, soft
	g.removeVIPs() // the address goes first: its clients move on at once
	g.signalTree(syscall.SIGTERM)
}

// event is what the control loop tells the guard.
type event int

const (
	evReady   event = iota // the deadline has not passed: start the command
	evTerm                 // the agent asks for SIGTERM to the tree
	evKill                 // the agent asks for SIGKILL of the tree
	evSoft                 // the soft deadline passed without renewal: SIGTERM
	evExpired              // the deadline passed without renewal: SIGKILL
	evGone                 // the connection closed: the agent is gone
)

// control reads the agent's messages and holds the deadlines. It decides
// that a deadline passed only once the socket holds nothing more to read:
// a renewal the agent sent in time is never missed because the guard was
// slow to run. It sleeps in ppoll until a message comes or a deadline
// passes.
type control struct {
	fd             int
	soft, deadline int64 // CLOCK_MONOTONIC ns
	softSent       bool  // evSoft sent for the current soft deadline
	buf            []byte
}

func (c *control) run(out chan<- event) {
	ready := false
	for {
		if c.drain(out) {
			out <- evGone
			return
		}
		now := ClockMonotonic()
		if now >= c.deadline || (!c.softSent && now >= c.soft) {
			if c.wait(0) {
				continue // a message came meanwhile: read it first
			}
			if now >= c.deadline {
				out <- evExpired
				return
			}
			c.softSent = true
			out <- evSoft
			continue
		}
		if !ready {
			ready = true
			out <- evReady
		}
		next := c.deadline
		if !c.softSent {
			next = min(next, c.soft)
		}
		c.wait(next - now)
	}
}

// wait sleeps until the connection is readable (reporting true) or d ns
// have passed.
func (c *control) wait(d int64) bool { return pollReadable(c.fd, d) }

// drain reads and handles every message waiting in the socket, and reports
// whether the connection has ended.
func (c *control) drain(out chan<- event) (gone bool) {
	var chunk [512]byte
	for {
		// Lines first: a standby guard's stream may hold some already.
		c.lines(out)
		if len(c.buf) > 4096 {
			return true // not this protocol
		}
		n, err := syscall.Read(c.fd, chunk[:])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return false
		case err != nil || n == 0:
			return true
		}
		c.buf = append(c.buf, chunk[:n]...)
	}
}

// lines handles every whole line in the buffer.
func (c *control) lines(out chan<- event) {
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		verb, arg, _ := bytes.Cut(c.buf[:i], []byte{' '})
		c.buf = c.buf[i+1:]
		switch string(verb) {
		case Renew:
			soft, hard, _ := bytes.Cut(arg, []byte{' '})
			sv, err1 := strconv.ParseInt(string(soft), 10, 64)
			hv, err2 := strconv.ParseInt(string(hard), 10, 64)
			if err1 == nil && err2 == nil {
				if sv > c.soft {
					c.soft, c.softSent = min(sv, hv), false
				}
				c.deadline = max(c.deadline, hv)
			}
		case Term:
			out <- evTerm
		case Kill:
			out <- evKill
		}
	}
}

// report sends one line to the agent, if it is still there. The guard
// sends a few short lines in all (started, an announced per round, done),
// so the socket's buffer always has room.
func (g *guard) report(words ...string) {
	if g.ctl < 0 {
		return
	}
	var b []byte
	for i, w := range words {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	b = append(b, '\n')
	for len(b) > 0 {
		n, err := syscall.Write(g.ctl, b)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			g.ctl = -1
			return
		}
		b = b[n:]
	}
}

// logf writes a line to the guard's stderr (the agent's, which is the
// journal under systemd): for what the agent may not be there to log.
func (g *guard) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "edge-agent duty-guard %s: %s\n", g.label, fmt.Sprintf(format, args...))
}

func (g *guard) statusText() string {
	if g.main == 0 && len(g.vips) > 0 {
		return "exit status 0" // no command: holding the VIPs cannot fail
	}
	if !g.mainDone {
		return "unknown"
	}
	return waitStatusText(g.status)
}

// waitStatusText prints a wait status as os.ProcessState.String does.
func waitStatusText(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		s := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			s += " (core dumped)"
		}
		return s
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// reap collects every child that has exited and reports whether any child
// is left.
func (g *guard) reap() (children bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return false
		case err != nil:
			return false // only a bad argument: nothing to wait for
		case pid == 0:
			return true // children left, none exited
		}
		if pid == g.main && !g.mainDone {
			g.mainDone, g.status = true, ws
		}
	}
}

// killTree SIGKILLs every descendant, again and again, until none is left
// and all are reaped, and returns how many processes it killed. Every
// orphan of the tree is re-parented to the guard (the subreaper), so once
// the guard has no child left, nothing of the tree is. A SIGKILLed process
// cannot fork any more; a child forked before the signal is found on a
// later round.
func (g *guard) killTree(chld <-chan os.Signal) int {
	killed := map[int]bool{}
	if g.main > 0 && !g.mainDone {
		// The command's process group first, in one call. Its id cannot
		// have been reused: the command is not reaped yet.
		_ = syscall.Kill(-g.main, syscall.SIGKILL)
	}
	var t *time.Timer
	for {
		tree := descendants(g.self)
		for pid := range tree {
			if signalDescendant(g.self, pid, tree, syscall.SIGKILL) {
				killed[pid] = true
			}
		}
		if !g.reap() {
			return len(killed)
		}
		// Wait for the next exit: its SIGCHLD (one that came before reap
		// was drained from the channel first, so none is lost). Look again
		// after 10 ms in any case: a listing is a snapshot that may miss a
		// process being created.
		if t == nil {
			t = time.NewTimer(10 * time.Millisecond)
			defer t.Stop()
		} else {
			t.Reset(10 * time.Millisecond)
		}
		select {
		case <-chld:
		case <-t.C:
		}
	}
}

// signalTree sends sig to every descendant.
func (g *guard) signalTree(sig syscall.Signal) {
	tree := descendants(g.self)
	for pid := range tree {
		signalDescendant(g.self, pid, tree, sig)
	}
}

// descendants returns the processes below root. It follows the kernel's
// lists of each process's children (/proc/PID/task/TID/children), whose
// cost is the tree's size, not the machine's; without them (a kernel built
// without CONFIG_PROC_CHILDREN) it reads every process's parent from /proc.
func descendants(root int) map[int]bool {
	out := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		kids, ok := childrenOf(p)
		if !ok {
			return descendantsByScan(root)
		}
		for _, c := range kids {
			if c != root && !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// childrenOf lists pid's children from the children files of its threads;
// ok is false if the kernel has no such files.
func childrenOf(pid int) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := readDir(dir)
	if err != nil {
		return nil, true // gone
	}
	ok = len(tids) == 0
	for _, tid := range tids {
		b, err := readProc(dir + tid + "/children")
		if errors.Is(err, syscall.ENOENT) {
			var st syscall.Stat_t
			if syscall.Stat(dir+tid, &st) == nil {
				continue // the file does not exist for a live thread: no support
			}
			ok = true // the thread exited meanwhile
			continue
		}
		ok = true
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				kids = append(kids, c)
			}
		}
	}
	return kids, ok
}

// descendantsByScan returns the processes below root from every process's
// parent in /proc.
func descendantsByScan(root int) map[int]bool {
	names, err := readDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	out := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// parentOf reads a process's parent pid from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := readProc("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// signalDescendant sends sig to pid if it is still below root: its parent
// is root or in tree (the descendants just listed). A pid listed may have
// exited and been reused by an unrelated process since: the pidfd pins the
// process, and its parent is checked after the pidfd was taken, so the
// signal reaches the process checked or none. (Without pidfds, before
// Linux 5.3, the check and kill(2) leave a window of microseconds.)
func signalDescendant(root, pid int, tree map[int]bool, sig syscall.Signal) bool {
	below := func() bool {
		ppid, ok := parentOf(pid)
		return ok && (ppid == root || tree[ppid])
	}
	fd, err := pidfdOpen(pid)
	if errors.Is(err, syscall.ENOSYS) {
		return below() && syscall.Kill(pid, sig) == nil
	}
	if err != nil {
		return false // gone
	}
	defer syscall.Close(fd)
	return below() && pidfdSendSignal(fd, sig) == nil
}

// readProc reads a small /proc file with three system calls (os.ReadFile
// takes about eight: the guard reads a few per process of the tree while
// it stops it).
func readProc(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var out []byte
	var buf [1024]byte
	for {
		n, err := syscall.Read(fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// readDir lists a directory's entries.
func readDir(path string) ([]string, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var names []string
	var buf [8192]byte
	for {
		n, err := syscall.ReadDirent(fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// hasPrefix is strings.HasPrefix: package strings sorts after the
// program's github.com packages, and importing it would let them initialize
// first (see sys_linux.go).
func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
