package harness

import (
	"fmt"
	"syscall"
	"time"
)

// Freeze stops agent id with SIGSTOP: a silent failure. The process keeps
// its TCP connection to the NATS server open, so the server sees nothing
// and publishes no disconnect advisory; the other agents can only notice
// the missing heartbeats. The agent stays in Running (its /status does not
// answer while frozen); Thaw resumes it.
func (s *Site) Freeze(id string) error { return s.stopCont(id, syscall.SIGSTOP) }

// Thaw resumes agent id after Freeze with SIGCONT. A frozen leader wakes
// with its lease long expired: IsLeader answers false at once, and the
// first heartbeat of the new term makes it a follower.
func (s *Site) Thaw(id string) error { return s.stopCont(id, syscall.SIGCONT) }

func (s *Site) stopCont(id string, sig syscall.Signal) error {
	p := s.Proc(id)
	if p == nil {
		return fmt.Errorf("agent %s not running", id)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("agent %s has exited: %v", id, p.exitErr)
	default:
	}
	return p.Cmd.Process.Signal(sig)
}

// StopAsync sends sig (SIGKILL or SIGTERM) to id and returns at once, so
// that the caller can watch the others while id exits; wait waits for the
// exit exactly as Kill and Terminate do (and, after SIGKILL, journals the
// death as of the signal). id leaves Running at once.
func (s *Site) StopAsync(id string, sig syscall.Signal) (wait func() error, err error) {
	s.mu.Lock()
	p := s.procs[id]
	delete(s.procs, id)
	s.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("agent %s not running", id)
	}
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return nil, err
	}
	sent := time.Now()
	return func() error {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = p.Cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("agent %s did not exit within 20s of %v", id, sig)
		}
		if sig == syscall.SIGKILL {
			// A dead process holds no lease: its journal interval ends when
			// kill(2) returned. SIGKILL cannot be caught and lands within
			// microseconds, long before a successor can be elected; the exit
			// is only seen here after wait, which on a loaded machine can
			// lag by 100 ms and would show as a false overlap.
			return s.journalDeath(id, sent)
		}
		return p.exitErr
	}, nil
}
