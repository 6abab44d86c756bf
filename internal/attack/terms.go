package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Row3 is what one signed message with a huge term does.
type Row3 struct {
	// Adopted is the highest term a member reports after a heartbeat of
	// term 2^64-1 signed with a stolen member key.
	Adopted uint64
	// ElectAfter is the time, from a second after that heartbeat, until the
	// honest members agree on a leader other than the forger (0: they never
	// stopped); ElectAfterRestart the same after every honest agent was
	// restarted (-1: not within 15 s).
	ElectAfter, ElectAfterRestart time.Duration
	// JumpRefused: a heartbeat of term MaxTerm-1 (below the bound, far
	// above what the group could have reached) changed no member's term
	// (new builds).
	JumpRefused bool
	// SmallJumpElect: after a forged heartbeat 1000 terms up (accepted: a
	// member may be that far behind), the time until the honest members
	// elect (new builds).
	SmallJumpElect time.Duration
	// AboveBound is what an agent whose state holds 2^64-1 does at start,
	// and WayBack the time to elect after `edge-agent reset-term` on every
	// gateway (new builds).
	AboveBound string
	WayBack    time.Duration
	// AtBound: with every state at election.MaxTerm the group stays
	// leaderless (it cannot stand in a higher term, and does not wrap);
	// AtBoundWayBack is the time to elect after reset-term.
	AtBoundLeaderless bool
	AtBoundWayBack    time.Duration
}

func (r Row3) String() string {
	return fmt.Sprintf("term after a 2^64-1 heartbeat: %d; honest members elect after it: %s, after restarting them: %s; MaxTerm-1 refused: %v; +1000 jump, elect after: %s; start with 2^64-1 stored: %s; reset-term way back: elect in %s; at MaxTerm leaderless: %v, reset-term way back: elect in %s",
		r.Adopted, Duration(r.ElectAfter), Duration(r.ElectAfterRestart), r.JumpRefused, Duration(r.SmallJumpElect), r.AboveBound, Duration(r.WayBack), r.AtBoundLeaderless, Duration(r.AtBoundWayBack))
}

// honestAgree waits until gw2 and gw3 agree on a leader other than gw1 in a
// term above minTerm, and returns how long that took from t0 (-1 if not
// within timeout).
func (s *Site) honestAgree(t0 time.Time, minTerm uint64, timeout time.Duration) time.Duration {
	if _, err := s.Agree([]string{"gw2", "gw3"}, "gw1", minTerm, timeout); err != nil {
		return -1
	}
	return time.Since(t0)
}

// bomb sends a heartbeat of term from the forger, three times 100 ms apart
// (the first one makes the members challenge the forger's epoch).
func bomb(f *Forger, term uint64) error {
	for i := 0; i < 3; i++ {
		if err := f.Send("", map[string]any{"type": "heartbeat", "term": term, "seq": uint64(i + 1), "alive": []string{"gw1", "gw2", "gw3"}}); err != nil {
			return err
		}
		if err := f.Flush(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// AttackRow3 runs row 3: gw1's key is stolen (its agent stopped), gw2 and
// gw3 are honest.
func AttackRow3(s *Site, bin string, newCLI bool) (Row3, error) {
	r := Row3{ElectAfter: -1, ElectAfterRestart: -1, SmallJumpElect: -1, WayBack: -1, AtBoundWayBack: -1}
	if _, err := s.Agree(s.IDs(), "", 0, 30*time.Second); err != nil {
		return r, err
	}
	if err := s.Kill("gw1"); err != nil {
		return r, err
	}
	a, err := s.Agree([]string{"gw2", "gw3"}, "gw1", 0, 10*time.Second)
	if err != nil {
		return r, err
	}
	f, err := s.Forger("gw1", "gw2")
	if err != nil {
		return r, err
	}
	defer f.Close()
	if newCLI {
		if err := bomb(f, election.MaxTerm-1); err != nil {
			return r, err
		}
		time.Sleep(2 * s.H)
		r.JumpRefused = s.MaxTerm() == a.Term
	}
	if err := bomb(f, ^uint64(0)); err != nil {
		return r, err
	}
	time.Sleep(time.Second)
	r.Adopted = s.MaxTerm()
	t0 := time.Now()
	r.ElectAfter = s.honestAgree(t0, 0, 15*time.Second)
	for _, id := range []string{"gw2", "gw3"} {
		if err := s.Kill(id); err != nil {
			return r, err
		}
	}
	t0 = time.Now()
	for _, id := range []string{"gw2", "gw3"} {
		if _, err := s.Start(id); err != nil {
			r.ElectAfterRestart = -1
			break
		}
	}
	if len(s.Running()) == 2 {
		r.ElectAfterRestart = s.honestAgree(t0, 0, 15*time.Second)
	}
	if !newCLI {
		return r, nil
	}

	// A forged heartbeat 1000 terms up is accepted; the forger then falls
	// silent and the honest members elect.
	b, err := s.Agree([]string{"gw2", "gw3"}, "gw1", 0, 10*time.Second)
	if err != nil {
		return r, err
	}
	g, err := s.Forger("gw1", "gw2")
	if err != nil {
		return r, err
	}
	defer g.Close()
	if err := bomb(g, b.Term+1000); err != nil {
		return r, err
	}
	t0 = time.Now()
	r.SmallJumpElect = s.honestAgree(t0, b.Term+1000, 10*time.Second)

	// The way back for a site whose stored terms are above the bound (an
	// older build took the 2^64-1 heartbeat) or at it.
	for _, stored := range []uint64{^uint64(0), election.MaxTerm} {
		s.Site.Stop()
		for _, id := range s.IDs() {
			if err := os.WriteFile(filepath.Join(s.Dir, id, "state.json"), []byte(fmt.Sprintf(`{"term":%d,"voted_for":""}`+"\n", stored)), 0o600); err != nil {
				return r, err
			}
		}
		if stored > election.MaxTerm {
			_, err := s.Start("gw2")
			if err == nil {
				r.AboveBound = "started"
				s.Site.Stop()
			} else {
				r.AboveBound = "refused to start"
				if strings.Contains(err.Error(), "exited") {
					r.AboveBound = "exited at start"
				}
			}
		} else {
			if err := s.StartAll(); err != nil {
				return r, err
			}
			_, err := s.Agree(s.IDs(), "", 0, 10*s.D())
			r.AtBoundLeaderless = err != nil
			s.Site.Stop()
		}
		for _, id := range s.IDs() {
			if code, _, errOut := CLI(bin, 10*time.Second, "reset-term", "--state-dir", filepath.Join(s.Dir, id)); code != 0 {
				return r, fmt.Errorf("reset-term %s: exit %d: %s", id, code, errOut)
			}
		}
		t0 = time.Now()
		if err := s.StartAll(); err != nil {
			return r, err
		}
		d := s.honestAgree(t0, 0, 15*time.Second)
		if stored > election.MaxTerm {
			r.WayBack = d
		} else {
			r.AtBoundWayBack = d
		}
	}
	return r, nil
}
