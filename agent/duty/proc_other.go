//go:build !linux

package duty

import (
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// dutySysProcAttr puts a duty process in a process group of its own. Without
// Linux's parent-death signal, a duty survives an agent killed with SIGKILL:
// run the agent under a supervisor that kills its process tree.
func dutySysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// Without Linux's child subreaper there is no duty guard: the command runs
// as the agent's child in its own process group, and only the agent stops
// it (a frozen or killed agent cannot).
const defaultGuardPath = ""

type dutyStart struct {
	argv     []string
	vips     []string
	env      []string
	dir      string
	stdout   io.Writer
	stderr   io.Writer
	guard    string
	label    string
	soft     int64
	deadline int64
	leaseEnd time.Duration
	wg       *sync.WaitGroup
	log      *slog.Logger

	vipHeld   func(bool)
	announced func(int)
}

type dutyProc struct {
	guardPid int
	pid      atomic.Int64
	started  time.Duration
	done     chan struct{}
	err      error
	expired  bool
	soft     bool
}

func startDutyProc(s dutyStart, now time.Duration) (*dutyProc, error) {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = s.env, s.dir, s.stdout, s.stderr
	cmd.SysProcAttr = dutySysProcAttr()
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &dutyProc{started: now, done: make(chan struct{})}
	p.pid.Store(int64(cmd.Process.Pid))
	s.log.Info("leader duty started", "pid", cmd.Process.Pid, "command", s.argv[0])
	go func() {
		p.err = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of its group
		close(p.done)
	}()
	return p, nil
}

// startStandby: there is no guard to start ahead of need (Duty.usesGuard).
func startStandby(string, string, string, io.Writer, io.Writer, *sync.WaitGroup, func(*dutyProc)) (*dutyProc, error) {
	return nil, errors.New("no duty guard without Linux")
}

func (p *dutyProc) activate(dutyStart, time.Duration) (bool, error) { return false, nil }
func (p *dutyProc) close()                                          {}

func (p *dutyProc) renew(time.Duration, func(time.Duration) (int64, int64)) {}

// signal sends sig to the command's whole process group.
func (p *dutyProc) signal(sig syscall.Signal) { _ = syscall.Kill(-int(p.pid.Load()), sig) }

// monoClock is the base of the guard's deadlines; there is no guard here.
func monoClock() int64 { return 0 }
