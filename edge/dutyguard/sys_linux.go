package dutyguard

import (
	"syscall"
	"unsafe"
)

// The guard's system calls beyond package syscall. The package imports
// nothing outside the standard library: Go initializes packages in import
// path order once their imports are, so a dependency such as
// golang.org/x/sys/unix (which sorts after every github.com package) would
// let the program's other packages initialize before this one, and some of
// them start goroutines in their init (nats-server's pse reads
// /proc/self/stat every second) that the guard would then carry.

const (
	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER
	clockMonotonic      = 1  // CLOCK_MONOTONIC
	pollIn              = 0x1
)

// ClockMonotonic reads CLOCK_MONOTONIC in nanoseconds: the clock Go's
// monotonic time and timers run on, shared by every process of the machine.
// Deadlines given to the guard are on it.
func ClockMonotonic() int64 {
	var ts syscall.Timespec
	_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func setChildSubreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// pollReadable reports whether fd is readable (or at its end) within d ns;
// d = 0 only looks.
func pollReadable(fd int, d int64) bool {
	p := pollFd{fd: int32(fd), events: pollIn}
	ts := syscall.NsecToTimespec(max(0, d))
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return e == 0 && n > 0
}

// pidfdOpen and pidfdSendSignal; sysPidfdOpen is 0 where the numbers are
// not known (the callers fall back to kill(2)).
func pidfdOpen(pid int) (int, error) {
	if sysPidfdOpen == 0 {
		return -1, syscall.ENOSYS
	}
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func pidfdSendSignal(fd int, sig syscall.Signal) error {
	if _, _, e := syscall.Syscall6(sysPidfdSendSignal, uintptr(fd), uintptr(sig), 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
