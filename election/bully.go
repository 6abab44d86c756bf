package election

// NewBully returns a Node that elects with the Bully algorithm: the highest
// ranked live member leads (see the package documentation).
func NewBully(cfg Config) (Node, error) {
	c, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	c.alg = &bully{c: c}
	return c, nil
}

type bullyPhase uint8

const (
	bullyIdle         bullyPhase = iota
	bullyAwaitCoord              // waiting for the expected member to proclaim
	bullyAwaitOK                 // sent ELECTION up the ranks, waiting for an OK
	bullyAwaitCoordOK            // got an OK, waiting for that member's COORDINATOR
)

type bully struct {
	c      *core
	phase  bullyPhase
	expect string
	until  int64
}

func (b *bully) busy() bool      { return b.phase != bullyIdle }
func (b *bully) deadline() int64 { return b.until }
func (b *bully) reset()          { b.phase, b.expect = bullyIdle, "" }

// leaderReleased implements algorithm: Bully holds nothing back (a kept
// COORDINATOR is the core's pending request).
func (b *bully) leaderReleased() bool { return false }

// announcesAlive implements algorithm: a Bully member waits for a silent
// member at most one answer window and then asks the ranks above it, so
// none needs to be told who is alive.
func (b *bully) announcesAlive() bool { return false }

func (b *bully) wait(p bullyPhase, expect string, ticks int) {
	b.phase, b.expect, b.until = p, expect, b.c.now+int64(ticks)
}

func (b *bully) startElection(expected string) {
	c := b.c
	if expected == "" {
		expected = c.highestInView()
	}
	if expected == c.self.ID {
		b.reset()
		c.tryProclaim()
		return
	}
	c.suspect(expected)
	b.wait(bullyAwaitCoord, expected, c.cfg.AnswerTicks)
}

func (b *bully) onDeadline() {
	c := b.c
	switch b.phase {
	case bullyAwaitCoord:
		// The member we expected stayed silent: fall back to the textbook
		// exchange with every higher-ranked member.
		c.markDown(b.expect)
		sent := false
		for _, m := range c.members {
			if m.ID == c.self.ID {
				break
			}
			if c.witness[m.ID] {
				continue // it never answers OK: asking it would only cost the wait
			}
			c.send(Message{Type: MsgElection, To: m.ID, Term: c.hs.Term})
			sent = true
		}
		if !sent {
			b.reset()
			c.tryProclaim()
			return
		}
		b.wait(bullyAwaitOK, "", c.cfg.AnswerTicks)
	case bullyAwaitOK:
		// No higher-ranked member answered: we are the highest alive.
		b.reset()
		c.tryProclaim()
	case bullyAwaitCoordOK:
		// A higher member answered but never proclaimed: back off, then
		// start over.
		c.markDown(b.expect)
		b.reset()
		c.standAfter = c.now + int64(c.backoffTicks())
	default:
		b.reset()
	}
}

func (b *bully) step(m Message) error {
	c := b.c
	switch m.Type {
	case MsgElection:
		if !c.outranks(c.self.ID, m.From) {
			return nil // only higher-ranked members answer
		}
		c.markUp(m.From)
		if !c.mayStand() {
			return nil // drained: an OK would hold the asker back, and no COORDINATOR would come
		}
		if c.role == Follower && !c.leaderLive() && c.now < c.standAfter {
			// Backing off: this member will not stand before its backoff
			// ends, so it must not answer OK either. An OK tells the asker
			// to wait for this member's COORDINATOR; none would come for up
			// to 30 heartbeats, and the asker would then back off in turn,
			// leaving the group without a leader meanwhile. Silent, it lets
			// the asker stand; preemption hands leadership back later.
			return nil
		}
		c.send(Message{Type: MsgOK, To: m.From, Term: c.hs.Term})
		if c.role != Follower || c.leaderLive() || b.busy() || c.now < c.standAfter {
			return nil
		}
		b.startElection("")
	case MsgOK:
		if !c.outranks(m.From, c.self.ID) {
			return nil
		}
		c.markUp(m.From)
		if b.phase == bullyAwaitOK || b.phase == bullyAwaitCoord {
			b.wait(bullyAwaitCoordOK, m.From, 2*c.cfg.AnswerTicks)
		}
	default:
		return nil // Ring traffic in a Bully group: ignored
	}
	return nil
}
