package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports handed out by FreePorts come from below the kernel's ephemeral range,
// so that no outgoing connection (of this test or of any other process) can be
// given one of them while a member is down between restarts, and each port is
// reserved across processes by a lock file held until the process exits, so
// that two test binaries run side by side (go test runs packages in parallel)
// never pick the same port. A port a member must bind later was once taken
// from the ephemeral range and released: an outgoing connection of another
// package's test took it in between (CI, "bind: address already in use" on a
// route port).
var reserved struct {
	sync.Mutex
	held map[int]*os.File
}

// lowEphemeral reads the first port of the kernel's ephemeral range.
func lowEphemeral() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// FreePorts returns n distinct TCP ports that are free on 127.0.0.1, outside
// the ephemeral range, and reserved for this process until it exits.
func FreePorts(n int) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.held == nil {
		reserved.held = map[int]*os.File{}
	}
	hi := lowEphemeral()
	lo := max(hi-12000, 1024)
	if hi-lo < 4*n {
		return nil, fmt.Errorf("harness: only ports %d-%d lie below the ephemeral range", lo, hi-1)
	}
	dir := filepath.Join(os.TempDir(), "edge-agent-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	ports := make([]int, 0, n)
	start := lo + rand.IntN(hi-lo)
	for i := 0; i < hi-lo && len(ports) < n; i++ {
		p := lo + (start-lo+i)%(hi-lo)
		if reserved.held[p] != nil {
			continue
		}
		f, err := reserve(dir, p)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue
		}
		if !bindable(p) {
			f.Close()
			continue
		}
		reserved.held[p] = f
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("harness: found %d of %d free ports in %d-%d", len(ports), n, lo, hi-1)
	}
	return ports, nil
}

// reserve takes the lock file of port p, or returns nil when another process
// holds it.
func reserve(dir string, p int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// bindable says whether port p can be listened on at 127.0.0.1 now.
func bindable(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
