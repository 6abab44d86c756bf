package bus

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// heardAnnouncement is one announcement a watcher received.
type heardAnnouncement struct {
	at    time.Time
	from  string
	max   int
	every time.Duration
}

// announcementLog is what a watcher of a group's announcements received.
type announcementLog struct {
	mu  sync.Mutex
	got []heardAnnouncement
}

func (l *announcementLog) add(m *nats.Msg) {
	var w struct {
		From  string `json:"from"`
		Max   int    `json:"max"`
		Every int64  `json:"every"`
	}
	if json.Unmarshal(m.Data, &w) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, heardAnnouncement{time.Now(), w.From, w.Max, time.Duration(w.Every) * time.Millisecond})
}

// since returns from's announcements received after t.
func (l *announcementLog) since(from string, t time.Time) []heardAnnouncement {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []heardAnnouncement
	for _, a := range l.got {
		if a.from == from && a.at.After(t) {
			out = append(out, a)
		}
	}
	return out
}

// A site whose members all run protocol 3 announces every
// QuietAnnouncements intervals, each announcement saying so; a member whose
// site falls below protocol 3 announces within an interval again, whether
// it learns so from an announcement (a member flashed to a build of
// protocol 2 announces at once) or from a direct message without "pv" (a
// build of protocol 1). gw1 and gw2 are agents; gw3 is played by the test,
// first as a build of protocol 3 that announces and sends nothing else.
func TestQuietAnnouncements(t *testing.T) {
	s := startPlainServer(t)
	connect := func() *nats.Conn { return connectPlain(t, s) }
	const hb = 100 * time.Millisecond
	interval := announceInterval(hb)
	quiet := wire.QuietAnnouncements * interval
	watcher := connect()
	var log announcementLog
	if _, err := watcher.Subscribe(wire.AnnounceWildcard(agent.DefaultSubjectPrefix, "site"), log.add); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	// gw3's announcements, every quiet/2 until stopped.
	var gw3 atomic.Pointer[wire.Announcement]
	gw3.Store(&wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolMax, Build: "test", Every: quiet})
	announce3 := func() {
		data, err := wire.EncodeAnnouncement("site", *gw3.Load())
		if err != nil {
			t.Error(err)
			return
		}
		_ = watcher.Publish(wire.AnnounceSubject(agent.DefaultSubjectPrefix, "site", "gw3"), data)
	}
	stopped3 := make(chan struct{})
	stop3 := sync.OnceFunc(func() { close(stopped3) })
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(quiet / 2)
		defer tick.Stop()
		for {
			announce3()
			select {
			case <-stopped3:
				return
			case <-tick.C:
			}
		}
	})
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { stop3(); cancel(); wg.Wait() }()
	for _, m := range members[:2] {
		nc := connect()
		a, err := agent.New(agent.Config{ID: m.ID, Group: "site", Members: members, Heartbeat: hb, StateDir: t.TempDir()},
			agent.WithBus(func(c agent.BusContext) (agent.Bus, error) { return New(nc, c) }),
			agent.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = a.Run(ctx) })
	}
	// saying waits until id says period every in an announcement after
	// after, and returns it.
	saying := func(id string, every time.Duration, after time.Time) heardAnnouncement {
		t.Helper()
		var a heardAnnouncement
		poll.Until(t, 20*time.Second, id+" announcing every "+every.String(), func() bool {
			for _, got := range log.since(id, after) {
				if got.every == every && got.max == wire.ProtocolMax {
					a = got
					return true
				}
			}
			return false
		})
		return a
	}
	start := time.Now()
	last := saying("gw1", quiet, start).at
	saying("gw2", quiet, start)
	// The run scheduled before may still come an interval later; from
	// then on a quiet period apart, not an interval.
	poll.Until(t, 20*time.Second, "gw1's next two announcements", func() bool { return len(log.since("gw1", last)) >= 2 })
	if got := log.since("gw1", last); got[1].at.Sub(got[0].at) < quiet/2 {
		t.Fatalf("gw1 announced %s after a quiet announcement, want about %s", got[1].at.Sub(got[0].at), quiet)
	}

	// gw3 "flashed" to a build of protocol 2, which announces at once and
	// says no period: news to gw1 and gw2, which answer at once.
	gw3.Store(&wire.Announcement{From: "gw3", Min: 1, Max: 2, Build: "old"})
	sent := time.Now()
	announce3()
	for _, id := range []string{"gw1", "gw2"} {
		if a := saying(id, interval, sent); a.at.Sub(sent) >= quiet/2 {
			t.Errorf("%s announced every %s %s after gw3 announced protocol 2, want at once", id, interval, a.at.Sub(sent))
		}
	}
	// Back on protocol 3: quiet again.
	gw3.Store(&wire.Announcement{From: "gw3", Min: 1, Max: wire.ProtocolMax, Build: "test", Every: quiet})
	back := time.Now()
	announce3()
	// Two quiet announcements of gw1 in a row (the first may answer the
	// news, with the run scheduled before still to come): its next is a
	// quiet period after the second.
	poll.Until(t, 20*time.Second, "two quiet announcements of gw1", func() bool {
		got := log.since("gw1", back)
		return len(got) >= 2 && got[len(got)-1].every == quiet && got[len(got)-2].every == quiet
	})

	// gw3 stops announcing and sends a direct message without pv: a build
	// of protocol 1 as far as gw1 can tell. gw1 announces every interval
	// again within one.
	stop3()
	ack := election.Message{Type: election.MsgAck, From: "gw3", To: "gw1", Term: 1, Seq: 1}
	data, err := wire.EncodeAt("site", ack, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	sent = time.Now()
	if err := watcher.Publish(wire.DirectSubject(agent.DefaultSubjectPrefix, "site", "gw3", "gw1"), data); err != nil {
		t.Fatal(err)
	}
	if a := saying("gw1", interval, sent); a.at.Sub(sent) >= quiet/2 {
		t.Errorf("gw1 announced every %s %s after a message without pv, want within about %s", interval, a.at.Sub(sent), interval)
	}
}
