package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// Row4 is what captured heartbeats of a dead leader, replayed after a power
// cut of the whole site, do to the survivors.
type Row4 struct {
	// Captured is how many of the leader's heartbeats were captured.
	Captured int
	// Baseline is the time from the survivors' restart until they agree on
	// a leader without any replay; WithReplay the same while the captured
	// heartbeats are replayed through a route (-1: not within 40 s).
	Baseline, WithReplay time.Duration
	// Followed: a survivor reported the dead leader as its leader during
	// the replay.
	Followed bool
}

func (r Row4) String() string {
	return fmt.Sprintf("%d heartbeats captured; survivors restarted after a power cut elect in %s without replay, %s with the dead leader's heartbeats replayed (followed the dead leader: %v)",
		r.Captured, Duration(r.Baseline), Duration(r.WithReplay), r.Followed)
}

// AttackRow4 runs row 4 on a started site: the attacker joins the cluster
// with the route password, records the leader's broadcasts for capture,
// the whole site loses power, the two survivors restart and the attacker
// plays the recording back, paced as recorded.
func AttackRow4(s *Site, capture time.Duration) (Row4, error) {
	r := Row4{Baseline: -1, WithReplay: -1}
	a, err := s.Agree(s.IDs(), "", 0, 30*time.Second)
	if err != nil {
		return r, err
	}
	ra, err := s.RouteAttacker()
	if err != nil {
		return r, err
	}
	defer ra.Close()
	var mu sync.Mutex
	var rec []*nats.Msg
	sub, err := ra.Subscribe(wire.BroadcastSubject(Prefix, Group, a.Leader), func(m *nats.Msg) {
		mu.Lock()
		rec = append(rec, m)
		mu.Unlock()
	})
	if err != nil {
		return r, err
	}
	time.Sleep(capture)
	_ = sub.Unsubscribe()
	mu.Lock()
	r.Captured = len(rec)
	mu.Unlock()
	var survivors []string
	for _, id := range s.IDs() {
		if id != a.Leader {
			survivors = append(survivors, id)
		}
	}
	powerCut := func() error {
		for _, id := range s.Running() {
			if err := s.Kill(id); err != nil {
				return err
			}
		}
		for _, id := range survivors {
			if _, err := s.Start(id); err != nil {
				return err
			}
		}
		return nil
	}
	// With replay, from the moment the survivors start, through a server
	// of the attacker's that joins the cluster at once (a route solicited
	// before the restart would only come back after its reconnect delay).
	stop := make(chan struct{})
	var followed sync.Once
	replay := func() {
		rb, err := s.RouteAttacker()
		if err != nil {
			return
		}
		defer rb.Close()
		for {
			for _, m := range rec {
				_ = rb.PublishMsg(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header})
				select {
				case <-stop:
					return
				case <-time.After(s.H):
				}
			}
		}
	}
	// The replay first: the survivors restart in the dead leader's term,
	// in which its heartbeats are not stale.
	t0 := time.Now()
	if err := powerCut(); err != nil {
		close(stop)
		return r, err
	}
	go replay()
	// Watched only once every old process is gone: before that a survivor
	// still running from before the cut reports the leader that was alive.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, id := range survivors {
				if l, _ := s.Leader(id); l == a.Leader {
					followed.Do(func() { r.Followed = true })
				}
			}
		}
	}()
	if _, err := s.Agree(survivors, a.Leader, 0, 40*time.Second); err == nil {
		r.WithReplay = time.Since(t0)
	}
	close(stop)
	<-watched
	// Without replay.
	t0 = time.Now()
	if err := powerCut(); err != nil {
		return r, err
	}
	if _, err := s.Agree(survivors, a.Leader, 0, 40*time.Second); err == nil {
		r.Baseline = time.Since(t0)
	}
	return r, nil
}

// Row5 is how a gateway whose state directory was lost (reflashed) rejoins.
type Row5 struct {
	// Rejoin is the time from the reflashed follower's start until it
	// follows the leader and the leader heard it within D (-1: not within
	// 15 s).
	Rejoin time.Duration
	// Elect is the time from killing the leader until the reflashed
	// gateway and the third member agree on a new leader (-1: not within
	// 40 s).
	Elect time.Duration
}

func (r Row5) String() string {
	return fmt.Sprintf("reflashed follower rejoins in %s; after the leader is killed, it and the third member elect in %s", Duration(r.Rejoin), Duration(r.Elect))
}

// AttackRow5 runs row 5 on a started site.
func AttackRow5(s *Site) (Row5, error) {
	r := Row5{Rejoin: -1, Elect: -1}
	a, err := s.Agree(s.IDs(), "", 0, 30*time.Second)
	if err != nil {
		return r, err
	}
	victim := "gw1"
	if a.Leader == victim {
		victim = "gw2"
	}
	// The gateway has restarted a few times in its life (its epoch grew),
	// then it is flashed anew: state directory lost, epoch back to 1.
	for i := 0; i < 2; i++ {
		if err := s.Kill(victim); err != nil {
			return r, err
		}
		if _, err := s.Start(victim); err != nil {
			return r, err
		}
		if _, err := s.Agree(s.IDs(), "", 0, 30*time.Second); err != nil {
			return r, err
		}
	}
	if err := s.Kill(victim); err != nil {
		return r, err
	}
	// The leader sees the victim gone, or 10 s pass: the restart goes on
	// either way.
	var statusErr error
	_ = poll.For(10*time.Second, "the leader to see "+victim+" gone", func() (bool, string) {
		ls, err := s.Status(a.Leader)
		if err != nil {
			statusErr = err
			return true, ""
		}
		dead := true
		for _, m := range ls.Members {
			dead = dead && !(m.ID == victim && m.Alive)
		}
		return dead, ""
	})
	if statusErr != nil {
		return r, statusErr
	}
	if err := os.RemoveAll(filepath.Join(s.Dir, victim)); err != nil {
		return r, err
	}
	t0 := time.Now()
	if _, err := s.Start(victim); err != nil {
		return r, err
	}
	// A fixed 5 ms interval (poll.Every): Rejoin is a measured time.
	_ = poll.Every(5*time.Millisecond, time.Until(t0.Add(40*time.Second)), victim+" to rejoin", func() (bool, string) {
		st, err1 := s.Status(victim)
		ls, err2 := s.Status(a.Leader)
		if err1 == nil && err2 == nil && st.Leader == a.Leader && ls.Role == "leader" {
			alive := false
			for _, m := range ls.Members {
				alive = alive || (m.ID == victim && m.Alive)
			}
			if alive {
				r.Rejoin = time.Since(t0)
				return true, ""
			}
		}
		return false, ""
	})
	if r.Rejoin < 0 {
		return r, nil
	}
	var others []string
	for _, id := range s.IDs() {
		if id != a.Leader {
			others = append(others, id)
		}
	}
	t0 = time.Now()
	if err := s.Kill(a.Leader); err != nil {
		return r, err
	}
	if _, err := s.Agree(others, a.Leader, 0, 40*time.Second); err == nil {
		r.Elect = time.Since(t0)
	}
	return r, nil
}
