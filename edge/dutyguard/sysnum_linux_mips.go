//go:build linux && (mips || mipsle || mips64 || mips64le)

package dutyguard

// Not wired on MIPS: the guard signals with kill(2) after checking the
// process's parent.
const (
	sysPidfdSendSignal = 0
	sysPidfdOpen       = 0
)
