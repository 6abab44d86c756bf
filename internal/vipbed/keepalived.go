package vipbed

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// KeepalivedAdvert is the VRRP advertisement interval the bed gives
// keepalived: 10 ms, the lowest VRRPv3 can carry (its interval field counts
// centiseconds).
const KeepalivedAdvert = "0.01"

// KeepalivedConfig is the keepalived.conf of one gateway: VRRPv3, one
// instance on Dev holding VIP, advert_int KeepalivedAdvert, priority prio,
// every router starting as BACKUP with nopreempt (as edge-agent's
// --preemption never: a live holder keeps the VIP). Gratuitous ARP is sent
// at once on becoming master, 5 times 1 ms apart, and again 5 times after
// 1 s; the lower-priority adverts of a second master are answered at once.
func KeepalivedConfig(id string, prio int) string {
	return fmt.Sprintf(`global_defs {
	router_id %s
	vrrp_version 3
	vrrp_garp_master_delay 1
	vrrp_garp_master_repeat 5
	vrrp_garp_interval 0.001
	vrrp_garp_lower_prio_repeat 1
	vrrp_garp_master_refresh 0
	vrrp_lower_prio_no_advert false
}

vrrp_instance VIP {
	state BACKUP
	interface %s
	virtual_router_id 51
	priority %d
	advert_int %s
	nopreempt
	virtual_ipaddress {
		%s/%d dev %s
	}
}
`, id, Dev, prio, KeepalivedAdvert, VIP, PrefixLen, Dev)
}

var startSeq atomic.Int64

// Keepalived is one keepalived process tree in a gateway's namespace.
type Keepalived struct {
	Host *Host
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	state string // the last "Entering X STATE" it logged
	log   []string
}

// StartKeepalived runs keepalived (VRRP only, in the foreground, logging to
// its stderr) in h's namespace with the config written to dir. Its pid
// files are in dir too, so several run side by side. It runs in a process
// group of its own: Kill takes the parent and its VRRP child at once.
func StartKeepalived(h *Host, dir string, prio int) (*Keepalived, error) {
	// Fresh pid files for every start: keepalived refuses to start while
	// the pid file of a SIGKILLed predecessor names a live process, and a
	// pid may have been reused.
	seq := startSeq.Add(1)
	pid := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s.%d.%s.pid", h.ID, seq, kind)) }
	conf := filepath.Join(dir, h.ID+".keepalived.conf")
	if err := os.WriteFile(conf, []byte(KeepalivedConfig(h.ID, prio)), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", h.Name, "keepalived",
		"--dont-fork", "--log-console", "--log-detail", "--no-syslog", "--vrrp",
		"--use-file", conf,
		"--pid", pid("keepalived"), "--vrrp_pid", pid("vrrp"), "--checkers_pid", pid("checkers"), "--bfd_pid", pid("bfd"))
	// Killed with the test process if it dies before its cleanup (a
	// timeout): nothing of the bed outlives its run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("keepalived in %s: %w", h.ID, err)
	}
	k := &Keepalived{Host: h, cmd: cmd, done: make(chan struct{})}
	go k.read(out)
	return k, nil
}

func (k *Keepalived) read(r io.Reader) {
	defer close(k.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		k.mu.Lock()
		if len(k.log) < 2000 {
			k.log = append(k.log, line)
		}
		// "(VIP) Entering MASTER STATE", "(VIP) Entering BACKUP STATE (init)"
		if _, rest, ok := strings.Cut(line, "Entering "); ok {
			if st, _, ok := strings.Cut(rest, " STATE"); ok {
				k.state = st
			}
		}
		k.mu.Unlock()
	}
	_ = k.cmd.Wait()
}

// State is the VRRP state keepalived last logged entering (MASTER, BACKUP,
// FAULT), "" before the first.
func (k *Keepalived) State() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// Log returns what keepalived logged so far (its first 2000 lines).
func (k *Keepalived) Log() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.log, "\n")
}

// Exited reports whether the process tree's leader has exited.
func (k *Keepalived) Exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs keepalived's whole process group (the parent and its VRRP
// child in the same instant: a VRRP child that outlived its parent would be
// told to stop and release the VIP, which is not a crash) and waits for
// the parent to be reaped.
func (k *Keepalived) Kill() error {
	err := syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-k.done:
	case <-time.After(20 * time.Second):
		return fmt.Errorf("keepalived of %s: not gone 20s after SIGKILL", k.Host.ID)
	}
	return err
}

// Stop stops keepalived as an operator would (SIGTERM: it releases the VIP),
// SIGKILL after 5 s.
func (k *Keepalived) Stop() {
	if k.Exited() {
		return
	}
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(5 * time.Second):
		_ = k.Kill()
	}
}
