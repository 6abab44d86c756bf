package duty

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-agent/edge-agent/edge/dutyguard"
)

// dutySysProcAttr puts a hook in a process group of its own (so the whole
// group can be signalled) and has the kernel SIGKILL it if the agent dies.
// Hooks are notifications and run without a guard; the duty command runs
// under one (startDutyProc).
func dutySysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// defaultGuardPath is the agent's own executable. /proc/self/exe rather
// than os.Executable: after a package upgrade replaced the file, it still
// names the image this agent runs, so agent and guard are of one version.
const defaultGuardPath = "/proc/self/exe"

// dutyStart is what starts one run of the duty command.
type dutyStart struct {
	argv     []string // empty: no command, the VIPs alone
	vips     []string // the guard's --vip arguments
	env      []string
	dir      string
	stdout   io.Writer // an *os.File is passed on as is
	stderr   io.Writer
	guard    string          // the guard's executable
	label    string          // id/term, for ps and the guard's log lines
	soft     int64           // CLOCK_MONOTONIC: the guard sends SIGTERM then unless renewed
	deadline int64           // CLOCK_MONOTONIC: the guard kills the tree then unless renewed
	leaseEnd time.Duration   // the lease end (agent's clock) they were made from
	wg       *sync.WaitGroup // counts the guard until it exited (startDutyProc)
	log      *slog.Logger

	vipHeld   func(bool) // nil-safe: see Host.VIPHeld
	announced func(int)
}

// dutyProc is one run of the duty command under its guard, or a standby
// guard waiting for one (startStandby).
type dutyProc struct {
	guardPid int
	pid      atomic.Int64  // the command's pid, once the guard reported it
	started  time.Duration // on the agent's monotonic clock
	done     chan struct{} // closed once the guard reported the whole tree gone

	// Set before done is closed.
	err     error // the command's exit: nil for status 0
	expired bool  // the guard killed the tree because the deadline passed
	soft    bool  // it ended after the guard's SIGTERM at the soft deadline

	conn *net.UnixConn
	sent time.Duration // the lease end last sent; supervise's goroutine only

	mu       sync.Mutex
	run      *dutyStart      // the run; nil while a standby waits for one
	dead     bool            // a standby that exited before it was given a run
	letGo    bool            // a standby closed by the agent (close)
	idleExit func(*dutyProc) // called when a standby exits idle, not let go
}

// spawnGuard starts the guard executable with args after dutyguard.Arg and
// the environment env (plus the guard's marker), and returns it with the
// agent's end of its control connection.
func spawnGuard(guard string, args, env []string, dir string, stdout, stderr io.Writer) (*exec.Cmd, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("duty guard: socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "duty-guard-control"), os.NewFile(uintptr(fds[1]), "duty-guard-control")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("duty guard: %w", err)
	}
	conn := fc.(*net.UnixConn)
	cmd := exec.Command(guard, append([]string{dutyguard.Arg}, args...)...)
	cmd.Args[0] = os.Args[0] // ps shows the agent's name, not /proc/self/exe
	cmd.Env = append(append([]string(nil), env...), dutyguard.Env+"="+dutyguard.Protocol)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{theirs}
	// No Pdeathsig: the guard must outlive the agent to kill the tree.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("duty guard %s: %w", guard, err)
	}
	return cmd, conn, nil
}

// guardArgs is the guard's command line after dutyguard.Arg for one run of
// s: the deadlines, the VIPs and the command, its path resolved here, with
// the agent's PATH, as exec.Command always did: a missing program is a
// start error, not an exit.
func guardArgs(s dutyStart) ([]string, error) {
	args := []string{"--soft=" + strconv.FormatInt(s.soft, 10), "--deadline=" + strconv.FormatInt(s.deadline, 10),
		"--label=" + s.label}
	args = append(append(args, s.vips...), "--")
	if len(s.argv) > 0 {
		path, err := exec.LookPath(s.argv[0])
		if err != nil {
			return nil, err
		}
		args = append(append(args, path), s.argv...)
	}
	return args, nil
}

func startDutyProc(s dutyStart, now time.Duration) (*dutyProc, error) {
	args, err := guardArgs(s)
	if err != nil {
		return nil, err
	}
	cmd, conn, err := spawnGuard(s.guard, args, s.env, s.dir, s.stdout, s.stderr)
	if err != nil {
		return nil, err
	}
	p := &dutyProc{guardPid: cmd.Process.Pid, started: now, done: make(chan struct{}), conn: conn, sent: s.leaseEnd, run: &s}
	s.wg.Add(1)
	go p.follow(cmd, s.wg)
	return p, nil
}

// startStandby starts a standby guard (see dutyguard.Standby): the guard
// process of the next run, started ahead of need, so that becoming leader
// costs a few lines on its control connection instead of a process start.
// It runs in dir, writes to stdout and stderr (the duty's: the run's
// command inherits them), is counted in wg until it exited, and waits for
// activate, or for its connection to close (close).
func startStandby(guard, label, dir string, stdout, stderr io.Writer, wg *sync.WaitGroup, idleExit func(*dutyProc)) (*dutyProc, error) {
	cmd, conn, err := spawnGuard(guard, []string{dutyguard.Standby, "--label=" + label}, nil, dir, stdout, stderr)
	if err != nil {
		return nil, err
	}
	p := &dutyProc{guardPid: cmd.Process.Pid, done: make(chan struct{}), conn: conn, idleExit: idleExit}
	wg.Add(1)
	go p.follow(cmd, wg)
	return p, nil
}

// activate gives a standby guard its run, as startDutyProc would start it,
// and reports whether the guard took it: false if it had exited (the
// caller starts a guard of its own then). A guard that exits after it was
// given the run is that run ending without a report, as with any guard.
func (p *dutyProc) activate(s dutyStart, now time.Duration) (bool, error) {
	args, err := guardArgs(s)
	if err != nil {
		return false, err
	}
	var b []byte
	for _, a := range args {
		b = append(append(append(b, dutyguard.SetArg+" "...), strconv.Quote(a)...), '\n')
	}
	for _, e := range s.env {
		b = append(append(append(b, dutyguard.SetEnv+" "...), strconv.Quote(e)...), '\n')
	}
	b = append(b, dutyguard.Start+"\n"...)
	p.mu.Lock()
	if p.dead || p.run != nil {
		p.mu.Unlock()
		return false, nil
	}
	p.run, p.started, p.sent = &s, now, s.leaseEnd
	p.mu.Unlock()
	_ = p.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = p.conn.Write(b)
	return true, nil
}

// close lets a standby guard that was given no run go: it exits at the end
// of its connection.
func (p *dutyProc) close() {
	p.mu.Lock()
	idle := p.run == nil
	p.dead = p.dead || idle
	p.letGo = p.letGo || idle
	p.mu.Unlock()
	if idle {
		p.conn.Close()
	}
}

// follow reads the guard's reports until it exits. done is closed at the
// guard's final report, once the tree is gone (a handover waits for that);
// the guard's own exit is waited for after it, counted in wg. A standby
// guard reports nothing before its run.
func (p *dutyProc) follow(cmd *exec.Cmd, wg *sync.WaitGroup) {
	defer wg.Done()
	reported, held := false, false
	sc := bufio.NewScanner(p.conn)
	for sc.Scan() {
		p.mu.Lock()
		s := p.run
		p.mu.Unlock()
		if s == nil {
			continue // not this protocol
		}
		verb, rest, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case dutyguard.Started:
			pid, err := strconv.Atoi(rest)
			if err != nil {
				continue
			}
			if len(s.vips) > 0 {
				held = true
				if s.vipHeld != nil {
					s.vipHeld(true)
				}
				s.log.Info("virtual IPs held", "count", len(s.vips), "guard_pid", p.guardPid)
			}
			if pid > 0 {
				p.pid.Store(int64(pid))
				s.log.Info("leader duty started", "pid", pid, "guard_pid", p.guardPid, "command", s.argv[0])
			}
		case dutyguard.Announced:
			if n, err := strconv.Atoi(rest); err == nil && s.announced != nil {
				s.announced(n)
			}
		case dutyguard.Done:
			if reported {
				continue
			}
			reported = true
			if held && s.vipHeld != nil {
				s.vipHeld(false) // the guard removes them before it reports
			}
			p.finish(rest)
		}
	}
	p.conn.Close()
	p.mu.Lock()
	s := p.run
	p.dead = p.dead || s == nil
	idleExit := s == nil && !p.letGo
	p.mu.Unlock()
	werr := cmd.Wait()
	if s == nil {
		close(p.done) // a standby, given no run
		if idleExit && p.idleExit != nil {
			p.idleExit(p) // killed by someone: the agent starts another
		}
		return
	}
	if !reported {
		// The guard died without a report (killed by someone, or a guard
		// of another version): what it ran may be left. Its process group
		// is the best that is known.
		p.err = fmt.Errorf("the duty guard ended without a report: %v", werr)
		if held && s.vipHeld != nil {
			s.vipHeld(false) // not known to be removed; not held as far as the agent can tell
		}
		if pid := int(p.pid.Load()); pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		close(p.done)
	}
}

// finish records the guard's final report (REASON STATUS) and closes done.
func (p *dutyProc) finish(rest string) {
	reason, status, _ := strings.Cut(rest, " ")
	switch reason {
	case dutyguard.Exited, dutyguard.Stopped, dutyguard.Killed, dutyguard.Expired:
		p.expired = reason == dutyguard.Expired
		p.soft = reason == dutyguard.Stopped
		if status != "exit status 0" {
			p.err = errors.New(status)
		}
	case dutyguard.Error:
		p.err = fmt.Errorf("start: %s", status)
	default:
		p.err = fmt.Errorf("the duty guard reported %q", rest)
	}
	close(p.done)
}

// send writes one control line. The guard reads them as they come; the
// write deadline only bounds a guard that stopped reading (frozen), whose
// deadline then acts anyway.
func (p *dutyProc) send(line string) {
	_ = p.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = p.conn.Write([]byte(line + "\n"))
}

// renew gives the guard new deadlines (CLOCK_MONOTONIC, from at) when the
// lease end they are made from (on the agent's clock) moved forward.
func (p *dutyProc) renew(leaseEnd time.Duration, at func(time.Duration) (soft, hard int64)) {
	if leaseEnd > p.sent {
		p.sent = leaseEnd
		soft, hard := at(leaseEnd)
		p.send(dutyguard.Renew + " " + strconv.FormatInt(soft, 10) + " " + strconv.FormatInt(hard, 10))
	}
}

// signal asks the guard for SIGTERM to the tree, or for SIGKILL of it.
func (p *dutyProc) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p.send(dutyguard.Kill)
	} else {
		p.send(dutyguard.Term)
	}
}

// monoClock reads CLOCK_MONOTONIC, the clock of the guard's deadlines.
func monoClock() int64 { return dutyguard.ClockMonotonic() }
