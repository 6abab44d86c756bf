package duty

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"

	"github.com/edge-agent/edge-agent/internal/logbuf"
)

// TestHookStoppedByLeadershipEndIsNoWarning: an on_elected hook still
// running when leadership ends (a handover or shutdown right after the
// election) is stopped as planned, and logged at Info, not as a failed hook.
func TestHookStoppedByLeadershipEndIsNoWarning(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	d := New(Config{OnElected: []string{"sh", "-c", "touch " + marker + "; exec sleep 30"}})
	var out logbuf.Buffer
	h := testHost(&fakeLease{start: time.Now()})
	h.Log = slog.New(slog.NewTextHandler(&out, nil))
	if err := d.Attach(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := d.Lead(ctx, 3, new(atomic.Bool), func() bool { return true })
	poll.Until(t, 10*time.Second, "on_elected to start", func() bool { _, err := os.Stat(marker); return err == nil })
	cancel()
	<-done
	d.Wait()
	log := out.String()
	if strings.Contains(log, "level=WARN") || !strings.Contains(log, `msg="hook stopped: leadership ended"`) || !strings.Contains(log, "hook=on_elected") {
		t.Errorf("want the stopped hook at Info, no warning:\n%s", log)
	}
}
