//go:build linux && !mips && !mipsle && !mips64 && !mips64le && !alpha

package dutyguard

// The system call numbers that Linux 5.1 and later give every architecture
// alike (MIPS and Alpha add offsets).
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)
