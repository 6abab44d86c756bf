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
	wg       *sync.WaitGroup // counts the guard until it exited
	log      *slog.Logger

	vipHeld   func(bool) // nil-safe: see Host.VIPHeld
	announced func(int)
}

// dutyProc is one run of the duty command under its guard.
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
}

func startDutyProc(s dutyStart, now time.Duration) (*dutyProc, error) {
	// Resolved here, with the agent's PATH, as exec.Command always did: a
	// missing program is a start error, not an exit.
	var command []string
	if len(s.argv) > 0 {
		path, err := exec.LookPath(s.argv[0])
		if err != nil {
			return nil, err
		}
		command = append([]string{path}, s.argv...)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duty guard: socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "duty-guard-control"), os.NewFile(uintptr(fds[1]), "duty-guard-control")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("duty guard: %w", err)
	}
	conn := fc.(*net.UnixConn)
	args := []string{dutyguard.Arg, "--soft=" + strconv.FormatInt(s.soft, 10), "--deadline=" + strconv.FormatInt(s.deadline, 10),
		"--label=" + s.label}
	args = append(append(append(args, s.vips...), "--"), command...)
	cmd := exec.Command(s.guard, args...)
	cmd.Args[0] = os.Args[0] // ps shows the agent's name, not /proc/self/exe
	cmd.Env = append(append([]string(nil), s.env...), dutyguard.Env+"="+dutyguard.Protocol)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	cmd.ExtraFiles = []*os.File{theirs}
	// No Pdeathsig: the guard must outlive the agent to kill the tree.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("duty guard %s: %w", s.guard, err)
	}
	p := &dutyProc{guardPid: cmd.Process.Pid, started: now, done: make(chan struct{}), conn: conn, sent: s.leaseEnd}
	s.wg.Add(1)
	go p.follow(cmd, s)
	return p, nil
}

// follow reads the guard's reports until it exits. done is closed at the
// guard's final report, once the tree is gone (a handover waits for that);
// the guard's own exit is waited for after it, counted in s.wg.
func (p *dutyProc) follow(cmd *exec.Cmd, s dutyStart) {
	defer s.wg.Done()
	reported, held := false, false
	sc := bufio.NewScanner(p.conn)
	for sc.Scan() {
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
	}
	p.conn.Close()
	werr := cmd.Wait()
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
