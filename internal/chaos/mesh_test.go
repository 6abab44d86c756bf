package chaos

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// reaches reports whether a request from nc on subj finds a responder.
func reaches(nc *nats.Conn, subj string) (bool, string) {
	_, err := nc.Request(subj, nil, 500*time.Millisecond)
	if err == nil {
		return true, ""
	}
	return false, err.Error()
}

// noResponders reports whether a request from nc on subj finds no interest.
func noResponders(nc *nats.Conn, subj string) (bool, string) {
	_, err := nc.Request(subj, nil, 500*time.Millisecond)
	if errors.Is(err, nats.ErrNoResponders) {
		return true, ""
	}
	return false, "request answered or timed out: " + errString(err)
}

func errString(err error) string {
	if err == nil {
		return "answered"
	}
	return err.Error()
}

func respond(t *testing.T, nc *nats.Conn, subj string) {
	t.Helper()
	if _, err := nc.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestMeshCutSeparatesOnePair builds the three-server mesh of the 2+1 site
// and cuts the route between a and b: a's and b's clients can no longer
// reach each other, both still reach w's, and no server walks around the
// cut, not even after w restarts and gossips the others' routes again (the
// servers try the implicit routes, and the sink refuses them). Healed, a
// reaches b again.
func TestMeshCutSeparatesOnePair(t *testing.T) {
	m, err := NewMesh(1, "a", "b", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	// Clients reconnect at once and forever, across w's restart.
	opts := []nats.Option{nats.ReconnectWait(20 * time.Millisecond), nats.MaxReconnects(-1)}
	ca := connect(t, m.Server("a").ClientURL(), opts...)
	cb := connect(t, m.Server("b").ClientURL(), opts...)
	cw := connect(t, m.Server("w").ClientURL(), opts...)
	respond(t, ca, "at.a")
	respond(t, cb, "at.b")
	respond(t, cw, "at.w")
	for _, c := range []struct {
		nc   *nats.Conn
		subj string
	}{{ca, "at.b"}, {cb, "at.a"}, {ca, "at.w"}, {cb, "at.w"}, {cw, "at.a"}, {cw, "at.b"}} {
		if err := poll.Every(10*time.Millisecond, 10*time.Second, "a reply on "+c.subj, func() (bool, string) { return reaches(c.nc, c.subj) }); err != nil {
			t.Fatal(err)
		}
	}

	separated := func(when string) {
		t.Helper()
		if err := poll.Every(10*time.Millisecond, 10*time.Second, "a and b unrouted "+when, func() (bool, string) {
			return !slices.Contains(m.Server("a").RoutedTo(), "b") && !slices.Contains(m.Server("b").RoutedTo(), "a"), ""
		}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			nc   *nats.Conn
			subj string
		}{{ca, "at.b"}, {cb, "at.a"}} {
			if err := poll.Every(10*time.Millisecond, 10*time.Second, "no responders on "+c.subj+" "+when, func() (bool, string) { return noResponders(c.nc, c.subj) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			nc   *nats.Conn
			subj string
		}{{ca, "at.w"}, {cb, "at.w"}, {cw, "at.a"}, {cw, "at.b"}} {
			if err := poll.Every(10*time.Millisecond, 10*time.Second, "a reply on "+c.subj+" "+when, func() (bool, string) { return reaches(c.nc, c.subj) }); err != nil {
				t.Fatal(err)
			}
		}
	}

	m.Route("a", "b").Cut()
	separated("after the cut")

	// w restarts: a and b each get its route back, and with it the gossip
	// of each other's route address, which they dial and the sink refuses.
	refusedBefore := m.ImplicitRefused()
	if err := m.Server("w").Restart(0); err != nil {
		t.Fatal(err)
	}
	if err := poll.Every(10*time.Millisecond, 10*time.Second, "w routed to a and b", func() (bool, string) {
		to := m.Server("w").RoutedTo()
		return slices.Equal(to, []string{"a", "b"}), fmt.Sprintf("w routed to %v", to)
	}); err != nil {
		t.Fatal(err)
	}
	if err := poll.Every(10*time.Millisecond, 10*time.Second, "an implicit route refused by the sink", func() (bool, string) {
		return m.ImplicitRefused() > refusedBefore, ""
	}); err != nil {
		t.Fatal(err)
	}
	separated("after w's restart")

	m.Route("a", "b").Heal()
	if err := m.WaitRouted(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		nc   *nats.Conn
		subj string
	}{{ca, "at.b"}, {cb, "at.a"}} {
		if err := poll.Every(10*time.Millisecond, 10*time.Second, "a reply on "+c.subj+" after the heal", func() (bool, string) { return reaches(c.nc, c.subj) }); err != nil {
			t.Fatal(err)
		}
	}
}
