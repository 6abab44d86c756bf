package bus

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/ratelimit"
	"github.com/edge-agent/edge-agent/agent/wire"
)

// protocols follows the protocol versions of the group's members (see
// wire.ProtocolMax): what each announced, and whether its messages say so.
// A member is sent what it reads: a direct message at the member's own
// version, a broadcast at the site's, the highest every member speaks.
// A member counts at a version above 1 only while its announcement is fresh
// and the last message it sent said so ("pv"): a gateway flashed back to an
// older build never announces and never says, so its first message sends it
// back to 1. It is safe for concurrent use.
type protocols struct {
	self     string
	build    string
	interval time.Duration // the announcements' period on a site below wire.ProtocolQuiet
	onChange func(agent.ProtocolView)
	members  []string // the group, self included

	mu    sync.Mutex
	peers map[string]*peerState
	last  agent.ProtocolView // as last reported
	// onLouder, when set, is called (p.mu held) when the site's version
	// falls below wire.ProtocolQuiet: this member announces every interval
	// again, from at most an interval on.
	onLouder func()
	quietNow bool // the site ran wire.ProtocolQuiet or later when last reported
}

type peerState struct {
	announced time.Time     // zero: never (a build of protocol 1)
	ttl       time.Duration // its announcement is forgotten after this (forgets)
	min, max  int
	build     string
	confirmed bool          // its last message said its version (or it just announced)
	heard     time.Time     // its last election message or announcement
	every     time.Duration // the period its last announcement said, within interval..quiet()
}

// announcementsForgotten is how many of a member's periods pass before its
// announcement is forgotten: two may be lost.
const announcementsForgotten = 3

func newProtocols(self, build string, members []string, interval time.Duration, onChange func(agent.ProtocolView)) *protocols {
	return &protocols{self: self, build: build, interval: interval, onChange: onChange, members: members,
		peers: map[string]*peerState{},
		last:  agent.ProtocolView{Site: wire.ProtocolMax}}
}

// forgets is how long an announcement that said period every stays fresh:
// three of its member's periods, and for a build of protocol 2 (no period
// said) three intervals. A period is taken within interval..quiet(), so a
// member cannot make its word last longer than a quiet member's.
func (p *protocols) forgets(every time.Duration) time.Duration {
	return announcementsForgotten * min(max(every, p.interval), p.quiet())
}

// quiet is the announcements' period on a site that runs wire.ProtocolQuiet.
func (p *protocols) quiet() time.Duration { return wire.QuietAnnouncements * p.interval }

// fresh reports whether s's announcement is still remembered at now.
func fresh(s *peerState, now time.Time) bool {
	return !s.announced.IsZero() && now.Sub(s.announced) <= s.ttl
}

// period is how long until this member announces again, as the view at
// now allows (p.mu held): every member reads the period it says only from
// wire.ProtocolQuiet on.
func (p *protocols) period(now time.Time) time.Duration {
	if p.view(now, false).Site >= wire.ProtocolQuiet {
		return p.quiet()
	}
	return p.interval
}

func (p *protocols) peer(id string) *peerState {
	s := p.peers[id]
	if s == nil {
		s = &peerState{min: 1, max: 1}
		p.peers[id] = s
	}
	return s
}

// heard notes an election message from id that said protocol pv (0: none);
// direct is set for a message addressed to this member alone. A broadcast
// goes at the site's version, which a member that is down holds at 1, so
// only a direct message without pv tells that its sender runs an older
// build again; but not within an interval of its announcement: a member
// that just started announced itself and then, until it hears this one's
// announcement, sends to it at protocol 1 (its acknowledgements of the
// leader's heartbeats, its votes), and taking those for a flash-back held
// the whole site at protocol 1, and made every member announce every
// interval again, for as long as its next announcement took. A build of
// protocol 1 never announces, so a flash-back to one is still found by its
// first direct message after that interval.
func (p *protocols) heard(id string, pv int, direct bool, now time.Time) {
	p.mu.Lock()
	s := p.peer(id)
	s.heard = now
	switch {
	case pv >= 2:
		s.confirmed = true
	case direct && now.Sub(s.announced) > p.interval:
		s.confirmed = false
	}
	p.changed(now)
	p.mu.Unlock()
}

// announced notes a's announcement and reports whether it is news (a
// member not heard announcing before, or not lately): this member then
// announces itself at once, so that the two talk at their version soon.
func (p *protocols) announced(a wire.Announcement, now time.Time) (news bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.peer(a.From)
	// A member that changed its range (a build flashed without a pause)
	// is news as well as one that was forgotten. So is one that announces
	// more often than it said it would: it holds the site below
	// wire.ProtocolQuiet, which is how a member that just (re)started sees
	// the site until it heard every announcement. Restarted within the
	// three quiet periods that the others remember it for, it would
	// otherwise wait up to a quiet period (ten heartbeat periods) to hear
	// them, and send its broadcasts at protocol 1 meanwhile.
	every := min(max(a.Every, p.interval), p.quiet()) // as forgets reads it
	news = !fresh(s, now) || s.min != a.Min || s.max != a.Max || every < s.every
	s.every = every
	s.announced, s.min, s.max, s.build, s.heard = now, a.Min, a.Max, a.Build, now
	s.ttl = p.forgets(a.Every)
	s.confirmed = true
	p.changed(now)
	return news
}

// levelOf is the version a member reads (p.mu held).
func (p *protocols) levelOf(s *peerState, now time.Time) int {
	if s == nil || !fresh(s, now) || !s.confirmed || !wire.Overlaps(s.min, s.max) {
		return 1
	}
	return min(s.max, wire.ProtocolMax)
}

// level is the version to send a message to member to at ("" for a
// broadcast: the site's).
func (p *protocols) level(to string, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to == "" {
		return p.view(now, false).Site
	}
	return p.levelOf(p.peers[to], now)
}

// refused reports whether id announced a range this build cannot speak.
func (p *protocols) refused(id string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.peers[id]
	return s != nil && fresh(s, now) && !wire.Overlaps(s.min, s.max)
}

// view computes the protocol view at now (p.mu held). Every member of the
// group counts, not only those known to be alive: a build of protocol 1
// never announces, and a follower never hears the other followers (their
// acknowledgements go to the leader), so no member can tell that an older
// one is down rather than quiet. A member that does not announce holds the
// site at protocol 1, whether it runs an older build or is down: the site
// runs a version once every member has announced it. With members false it
// leaves out v.Members (changed runs on every message it hears).
func (p *protocols) view(now time.Time, members bool) agent.ProtocolView {
	v := agent.ProtocolView{Site: wire.ProtocolMax}
	if members {
		v.Members = map[string]agent.PeerProtocol{}
	}
	for _, id := range p.members {
		if id == p.self {
			continue
		}
		s := p.peers[id]
		if s == nil {
			s = &peerState{min: 1, max: 1}
		}
		heard := fresh(s, now)
		if members {
			if heard {
				v.Members[id] = agent.PeerProtocol{Min: s.min, Max: s.max, Build: s.build}
			} else {
				v.Members[id] = agent.PeerProtocol{Min: 1, Max: 1}
			}
		}
		if heard && !wire.Overlaps(s.min, s.max) {
			v.Mismatch = append(v.Mismatch, id)
			continue // refused: it does not hold the site back
		}
		if l := p.levelOf(s, now); l < wire.ProtocolMax {
			v.Below = append(v.Below, id)
			v.Site = min(v.Site, l)
		}
	}
	slices.Sort(v.Below)
	slices.Sort(v.Mismatch)
	return v
}

// changed reports the view if the site's version or the members that set
// it changed (p.mu held).
func (p *protocols) changed(now time.Time) {
	v := p.view(now, false)
	if v.Site == p.last.Site && slices.Equal(v.Below, p.last.Below) && slices.Equal(v.Mismatch, p.last.Mismatch) {
		return
	}
	if quiet := v.Site >= wire.ProtocolQuiet; quiet != p.quietNow {
		p.quietNow = quiet
		if !quiet && p.onLouder != nil {
			p.onLouder()
		}
	}
	p.last = v
	if p.onChange != nil {
		p.onChange(p.view(now, true))
	}
}

// snapshot is the view now, with this member's own entry.
func (p *protocols) snapshot(now time.Time) agent.ProtocolView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.view(now, true)
	v.Members[p.self] = agent.PeerProtocol{Min: wire.ProtocolMin, Max: wire.ProtocolMax, Build: p.build}
	return v
}

// announce runs this member's announcements: at once, every period, at
// once again when a member announces news (a restart, a new member, a
// changed range; at most once an interval), and re-reads the view every
// period so that members that went quiet stop counting. The period is the
// interval, and QuietAnnouncements intervals on a site that runs
// wire.ProtocolQuiet (every member reads the period an announcement says);
// when the site falls below it, the next announcement comes within an
// interval. Each announcement says the period until the next at the
// latest. It subscribes on nc and returns the undo.
func (b *Bus) announce(t *NATSTransport, p *protocols, interval time.Duration) (func(), error) {
	cfg := b.c.Config
	prefix, group := cfg.SubjectPrefix, cfg.Group
	rates := ratelimit.NewLimiter(2/interval.Seconds(), 4, len(cfg.Members))
	start := time.Now()
	members := map[string]bool{}
	for _, m := range cfg.Members {
		members[m.ID] = true
	}
	answer := newsAnswers{interval: interval}
	// The first announcement goes once subscribed (below), so that a
	// member answering it at once is heard.
	var ann *periodic
	// publish announces with the period as the view at now allows, which
	// the next regular announcement keeps (setEvery: under p.mu, so that
	// a louder view's sooner, below, cannot be undone).
	publish := func() {
		now := time.Now()
		p.mu.Lock()
		p.changed(now)
		every := p.period(now)
		ann.setEvery(every)
		p.mu.Unlock()
		b.publishAnnouncement(every)
	}
	// Started under p.mu, which publish takes before it reads ann.
	p.mu.Lock()
	ann = startPeriodic(interval, interval, publish)
	p.onLouder = func() {
		ann.setEvery(interval)
		ann.sooner(time.Now().Add(interval))
	}
	p.mu.Unlock()
	_, unsub, err := b.subscribe(dispatchAnnounce, wire.AnnounceWildcard(prefix, group), func(msg *nats.Msg) {
		from, ok := wire.AnnounceSender(msg.Subject, prefix, group)
		if !ok || !members[from] || from == cfg.ID {
			return
		}
		if !rates.Allow(from, time.Since(start)) {
			t.bad(wire.ReasonRateLimited)
			return
		}
		if b.signer != nil {
			sig := ""
			if msg.Header != nil {
				sig = msg.Header.Get(wire.SignatureHeader)
			}
			if reason := b.signer.Verify(from, msg.Subject, msg.Data, sig); reason != "" {
				t.bad(reason)
				return
			}
		}
		a, err := wire.DecodeAnnouncement(msg.Data, msg.Subject, prefix, group)
		if err != nil {
			t.bad(badReason(err))
			return
		}
		if at := time.Now(); p.announced(a, at) {
			ann.also(func() {
				if answer.allow(at) {
					publish()
				}
			})
		}
	}, func() { t.bad(wire.ReasonRateLimited) })
	if err != nil {
		ann.stop()
		return nil, err
	}
	ann.also(publish)
	return func() {
		ann.stop()
		unsub()
	}, nil
}

// newsAnswers bounds the announcements made at once for news to one an
// interval: news is decided when an announcement is handled, not when it
// arrived, so a member whose handling lags more than the ttl (a starved
// process) finds news in every announcement, and answering each would add
// to the load that starves it. The regular announcement follows anyway.
type newsAnswers struct {
	interval time.Duration
	last     time.Time // the last answer; zero: none yet
}

func (n *newsAnswers) allow(at time.Time) bool {
	if !n.last.IsZero() && at.Sub(n.last) < n.interval {
		return false
	}
	n.last = at
	return true
}

// publishAnnouncement says this member's protocol range and build, and
// that it announces again within every.
func (b *Bus) publishAnnouncement(every time.Duration) {
	cfg := b.c.Config
	if !b.nc.IsConnected() {
		return
	}
	build := b.c.Version
	if len(build) > 64 {
		build = build[:64]
	}
	data, err := wire.EncodeAnnouncement(cfg.Group, wire.Announcement{From: cfg.ID, Min: wire.ProtocolMin, Max: wire.ProtocolMax, Build: build, Every: every})
	if err != nil {
		return
	}
	subj := wire.AnnounceSubject(cfg.SubjectPrefix, cfg.Group, cfg.ID)
	msg := &nats.Msg{Subject: subj, Data: data}
	if b.signer != nil {
		sig, err := b.signer.Sign(subj, data)
		if err != nil {
			return
		}
		msg.Header = nats.Header{wire.SignatureHeader: []string{sig}}
	}
	_ = b.nc.PublishMsg(msg)
}

// Protocol implements agent.ProtocolReporter.
func (b *Bus) Protocol() agent.ProtocolView {
	b.mu.Lock()
	p := b.proto
	b.mu.Unlock()
	if p == nil {
		return agent.ProtocolView{Site: wire.ProtocolMax}
	}
	return p.snapshot(time.Now())
}

// badReason is the metrics label of a wire error.
func badReason(err error) string {
	var be *wire.BadMessageError
	if errors.As(err, &be) {
		return be.Reason
	}
	return wire.ReasonMalformed
}

// announceInterval is how often a member announces its protocol range on a
// site below wire.ProtocolQuiet: once per heartbeat period H (at least
// 100 ms). Announcements are forgotten after three of their member's
// periods (D at the default k = 3 on such a site). A gateway flashed back to
// a build of protocol 1, which announces nothing and cannot read what a
// newer one sends, is sent messages it drops until its first message
// (without "pv") reaches the others, or its announcement is forgotten: on
// a site of protocol 3, which announces every wire.QuietAnnouncements
// periods, that is 30 H, but its first message comes sooner (it hears no
// leader it can read, and stands after D), and a member that restarted
// waits D before it votes or stands anyway. A build of protocol 2 or later
// announces at once when it starts, which is news to the others.
func announceInterval(h time.Duration) time.Duration { return max(h, 100*time.Millisecond) }
