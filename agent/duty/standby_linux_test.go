package duty

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// standbyPid is the pid of the duty's standby guard, 0 if none is ready.
func (d *Duty) standbyPid() int {
	d.standby.mu.Lock()
	defer d.standby.mu.Unlock()
	if d.standby.p == nil {
		return 0
	}
	return d.standby.p.guardPid
}

// TestStandbyGuardRunsTheNextRun: with Prepare, the guard of a run is
// started ahead of it: the command's parent is the standby guard that was
// waiting, a new standby is ready a moment later, one killed while idle is
// replaced, and one found dead when taken costs nothing but its speed (the
// run starts a guard of its own).
// Once stop is called nothing of the duty is left: Wait returns and no
// guard process remains.
func TestStandbyGuardRunsTheNextRun(t *testing.T) {
	dir := t.TempDir()
	ppid := filepath.Join(dir, "ppid")
	d := New(Config{Command: []string{"sh", "-c", `echo $PPID > "$1"; exec sleep 1000`, "sh", ppid}})
	if err := d.Attach(testHost(&fakeLease{start: time.Now()})); err != nil {
		t.Fatal(err)
	}
	stop := d.Prepare()
	first := d.standbyPid()
	if first == 0 {
		t.Fatal("no standby guard after Prepare")
	}
	// lead runs one leadership and returns the command's parent.
	lead := func(term uint64) int {
		t.Helper()
		_ = os.Remove(ppid)
		ctx, cancel := context.WithCancel(context.Background())
		done := d.Lead(ctx, term, new(atomic.Bool), func() bool { return true })
		var parent int
		poll.UntilWhy(t, 10*time.Second, "the command to start", func() (bool, string) {
			b, err := os.ReadFile(ppid)
			if err != nil {
				return false, err.Error()
			}
			parent, err = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil, string(b)
		})
		cancel()
		<-done
		return parent
	}
	if got := lead(1); got != first {
		t.Fatalf("the command's parent is %d, the standby guard was %d", got, first)
	}
	var second int
	poll.Until(t, 10*time.Second, "a new standby guard", func() bool {
		second = d.standbyPid()
		return second != 0 && second != first
	})

	// A standby killed while idle is replaced: the next run's parent is its
	// successor.
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	third := 0
	poll.Until(t, 10*time.Second, "the killed standby replaced", func() bool {
		third = d.standbyPid()
		return third != 0 && third != second
	})
	if got := lead(2); got != third {
		t.Fatalf("the command's parent is %d, the standby guard that replaced the killed one was %d", got, third)
	}

	// A standby found dead when taken (its exit not seen yet): the run
	// starts a guard of its own, and the standby's process is let go.
	fourth := 0
	poll.Until(t, 10*time.Second, "a new standby guard", func() bool {
		fourth = d.standbyPid()
		return fourth != 0 && fourth != third
	})
	d.standby.mu.Lock()
	d.standby.p.mu.Lock()
	d.standby.p.dead = true
	d.standby.p.mu.Unlock()
	d.standby.mu.Unlock()
	if got := lead(3); got == fourth || got == third || got == 0 {
		t.Fatalf("the command's parent is %d (standby guards %d, %d)", got, third, fourth)
	}
	poll.Until(t, 10*time.Second, "the standby taken dead to exit", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(fourth) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	last := 0
	poll.Until(t, 10*time.Second, "a new standby guard", func() bool {
		last = d.standbyPid()
		return last != 0 && last != fourth
	})

	stop()
	waited := make(chan struct{})
	go func() { d.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after stop")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(last)); err == nil {
		t.Fatalf("standby guard %d still there after stop and Wait", last)
	}
	if d.standbyPid() != 0 {
		t.Fatal("a standby guard was started after stop")
	}
}

// TestStandbyGuardLetGoWhenTheRunCannotStart: a run whose command cannot
// be found fails to start as before, and the standby it took is let go (its
// process exits), not left idle for the life of the agent.
func TestStandbyGuardLetGoWhenTheRunCannotStart(t *testing.T) {
	d := New(Config{Command: []string{"/nonexistent/edge-agent-duty"}})
	if err := d.Attach(testHost(&fakeLease{start: time.Now()})); err != nil {
		t.Fatal(err)
	}
	stop := d.Prepare()
	defer stop()
	first := d.standbyPid()
	if first == 0 {
		t.Fatal("no standby guard after Prepare")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := d.Lead(ctx, 1, new(atomic.Bool), func() bool { return true })
	poll.Until(t, 10*time.Second, "the standby taken by the failed start to exit", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(first) + "/stat")
		// Gone, or a zombie until its reaper runs.
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	cancel()
	<-done
}
