// Package duty runs a leader's duty: a long-running command that must run
// on one gateway of a site at a time, and one-shot hooks when leadership
// starts and ends.
//
// A Duty sees the agent it runs for only through Lease: the agent's
// monotonic clock, when its lease ends, whether it leads and is connected,
// and a way to resign. It reads them from goroutines of its own, so that a
// stuck or frozen agent loop cannot keep the command running: the command
// is stopped before the lease runs out, and on Linux it runs under a duty
// guard (package dutyguard), a process of its own that holds a deadline
// renewed with the lease and kills the command's whole tree when the
// deadline passes or the agent dies.
//
// The agent attaches a Duty with Attach and calls Lead once per
// leadership; Wait outlasts the last command and hook.
package duty
