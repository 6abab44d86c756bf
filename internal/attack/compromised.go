package attack

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// Compromised is what one compromised member key can do once it stops:
// gw1's key is stolen and its agent stopped; each trial sends a random
// sequence of messages in gw1's name (every type, terms around the group's
// and far above it, at up to 50 messages a period), ends it with a message
// chosen to linger (a COORDINATOR that wins votes, a heartbeat as leader, a
// resignation, a pre-vote), all paced within a member's rate so that none is
// dropped for flooding, and measures the time until the honest members
// agree on a leader, and keep agreeing for 2D.
type Compromised struct {
	Trials []time.Duration // per trial, -1 when not within 10 s
	// Rotated is the time from the honest agents' restart with a new key
	// for gw1 until they agree on a leader, while the old key's messages
	// keep coming through a route (-1: not within 10 s).
	Rotated time.Duration
	D       time.Duration
}

// Worst returns the longest trial (-1 if one failed).
func (c Compromised) Worst() time.Duration {
	w := time.Duration(0)
	for _, t := range c.Trials {
		if t < 0 {
			return -1
		}
		w = max(w, t)
	}
	return w
}

// Over returns how many trials took longer than D + 1 s (or failed).
func (c Compromised) Over() int {
	n := 0
	for _, t := range c.Trials {
		if t < 0 || t > c.D+time.Second {
			n++
		}
	}
	return n
}

func (c Compromised) String() string {
	s := slices.Clone(c.Trials)
	slices.Sort(s)
	med := time.Duration(-1)
	if len(s) > 0 {
		med = s[len(s)/2]
	}
	return fmt.Sprintf("%d sequences from a stolen member key: honest members agree %s (median) and %s (worst) after the last message, %d over D + 1 s = %s; after rotating the key: %s",
		len(c.Trials), Duration(med), Duration(c.Worst()), c.Over(), c.D+time.Second, Duration(c.Rotated))
}

// AttackCompromised runs trials sequences with seed on a started site.
func AttackCompromised(s *Site, trials int, seed uint64) (Compromised, error) {
	c := Compromised{D: s.D(), Rotated: -1}
	if _, err := s.Agree(s.IDs(), "", 0, 30*time.Second); err != nil {
		return c, err
	}
	if err := s.Kill("gw1"); err != nil {
		return c, err
	}
	if _, err := s.Agree([]string{"gw2", "gw3"}, "gw1", 0, 10*time.Second); err != nil {
		return c, err
	}
	f, err := s.Forger("gw1", "gw2")
	if err != nil {
		return c, err
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(seed, 15))
	for i := 0; i < trials; i++ {
		base := s.MaxTerm()
		// Paced just under a member's rate (20 messages a period), so that
		// every message is taken in, none is dropped for flooding.
		n := 20 + rng.IntN(100)
		for j := 0; j < n; j++ {
			to, fields := randomMessage(rng, base)
			_ = f.Send(to, fields)
			time.Sleep(s.H/18 + time.Duration(rng.Int64N(int64(s.H/10))))
		}
		time.Sleep(s.H / 5)
		to, fields := lingering(rng, s.MaxTerm())
		_ = f.Send(to, fields)
		_ = f.Flush()
		s.note("trial %d: %d messages, last %v to %q", i, n+1, fields, to)
		c.Trials = append(c.Trials, s.stableAgreement(time.Now(), 3*s.D()+6*time.Second))
		s.note("trial %d: agreement after %s", i, Duration(c.Trials[i]))
	}

	// Rotate the stolen key: the honest agents restart with a new key for
	// gw1, and the old key's messages keep coming through a route.
	kp, err := nkeys.CreateUser()
	if err != nil {
		return c, err
	}
	pub, _ := kp.PublicKey()
	for i, a := range s.Args {
		if i > 0 && s.Args[i-1] == "--member-keys" {
			s.Args[i] = strings.Replace(a, "gw1="+s.Keys["gw1"], "gw1="+pub, 1)
		}
	}
	ra, err := s.RouteAttacker()
	if err != nil {
		s.note("rotation not measured: %v", err)
		return c, nil // Rotated stays -1
	}
	defer ra.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		g := &Forger{nc: ra, id: "gw1", kp: s.Pairs["gw1"], ep: f.ep}
		g.n = 1 << 40
		for {
			select {
			case <-stop:
				return
			case <-time.After(s.H / 2):
			}
			to, fields := lingering(rng, s.MaxTerm())
			_ = g.Send(to, fields)
		}
	}()
	for _, id := range []string{"gw2", "gw3"} {
		if err := s.Kill(id); err != nil {
			return c, err
		}
	}
	for _, id := range []string{"gw2", "gw3"} {
		if _, err := s.Start(id); err != nil {
			return c, err
		}
	}
	c.Rotated = s.stableAgreement(time.Now(), 3*s.D()+6*time.Second)
	return c, nil
}

// stableAgreement returns the time from t0 until gw2 and gw3 agree on a
// leader other than gw1, in an agreement that then holds for 2D (-1 if none
// within timeout). It polls both agents' /status continuously, so that an
// agreement from before the attack took effect is not taken for the result.
func (s *Site) stableAgreement(t0 time.Time, timeout time.Duration) time.Duration {
	cur, since := "", time.Time{}
	// A fixed 2 ms interval (poll.Every): the result is a measured time.
	err := poll.Every(2*time.Millisecond, timeout-time.Since(t0), "a stable agreement of gw2 and gw3", func() (bool, string) {
		now := time.Now()
		l2, t2 := s.Leader("gw2")
		l3, t3 := s.Leader("gw3")
		key := ""
		if l2 != "" && l2 != "gw1" && l2 == l3 && t2 == t3 {
			key = fmt.Sprintf("%s/%d", l2, t2)
			if st, err := s.Status(l2); err != nil || st.Role != "leader" {
				key = ""
			}
		}
		if key != cur {
			cur, since = key, now
		}
		return cur != "" && time.Since(since) >= 2*s.D(), ""
	})
	if err != nil {
		return -1
	}
	return max(0, since.Sub(t0))
}

// randomMessage is one message of a random type, with random fields, terms
// around base or far above it, to a random honest member or to all.
func randomMessage(rng *rand.Rand, base uint64) (string, map[string]any) {
	terms := []uint64{0, base - 1, base, base, base + 1, base + 1, base + 2, base + uint64(rng.IntN(1000)),
		base + 1<<24, base + 1<<24 + 1, election.MaxTerm, election.MaxTerm + 1, ^uint64(0)}
	// No Ring messages and no "alg": a Bully member sending those is refused
	// outright for ten minutes (the algorithm guard), which would end the
	// attack there.
	types := []string{"heartbeat", "ack", "election", "ok", "coordinator", "vote", "resign", "pre_vote", "pre_vote_reply", "challenge", "proof"}
	typ := types[rng.IntN(len(types))]
	honest := []string{"gw2", "gw3"}
	to := ""
	if rng.IntN(2) == 0 || typ == "vote" || typ == "ack" || typ == "pre_vote_reply" || typ == "proof" {
		to = honest[rng.IntN(2)]
	}
	w := map[string]any{"type": typ, "term": terms[rng.IntN(len(terms))]}
	seqs := []uint64{1, 2, uint64(rng.IntN(100)) + 1, ^uint64(0)}
	if rng.IntN(4) > 0 {
		w["seq"] = seqs[rng.IntN(len(seqs))]
	}
	switch typ {
	case "heartbeat":
		w["alive"] = []string{"gw1", "gw2", "gw3"}[:1+rng.IntN(3)]
	case "vote", "pre_vote_reply":
		w["granted"] = rng.IntN(2) == 0
	case "resign":
		if rng.IntN(2) == 0 {
			w["nominee"] = honest[rng.IntN(2)]
		}
	}
	return to, w
}

// lingering is a last message chosen to outlast the sequence: one that
// wins a vote, claims leadership, hands over or asks for pre-votes.
func lingering(rng *rand.Rand, base uint64) (string, map[string]any) {
	switch rng.IntN(5) {
	case 0:
		return "", map[string]any{"type": "coordinator", "term": base + 1, "seq": uint64(1)}
	case 1:
		return "", map[string]any{"type": "heartbeat", "term": base + 1, "seq": uint64(1), "alive": []string{"gw1", "gw2", "gw3"}}
	case 2:
		return "", map[string]any{"type": "resign", "term": base, "nominee": "gw2"}
	case 3:
		return "", map[string]any{"type": "pre_vote", "term": base + 1, "seq": uint64(1)}
	default:
		return "", map[string]any{"type": "heartbeat", "term": base + 1<<24, "seq": uint64(1), "alive": []string{"gw1"}}
	}
}
