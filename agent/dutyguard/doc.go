// Package dutyguard is the duty guard of edge-agent: a small process per
// run of the leader duty command, started by the agent from its own
// executable. It runs the command as its child and is the child subreaper
// (Linux's PR_SET_CHILD_SUBREAPER) of everything the command starts, so
// every process of the duty's tree stays its descendant: a wrapper that does
// not exec, a worker started with "&", a double fork, a process that left
// the command's process group or session. It kills the whole tree
//
//   - when the deadline the agent gives it passes (the agent renews it each
//     time its lease is extended; the agent may be frozen or stuck);
//   - when its control connection to the agent closes (the agent died:
//     SIGKILL, an OOM kill, a panic);
//   - when the agent tells it to (after SIGTERM and the grace), or when the
//     command itself exits (what it left behind goes with it),
//
// reaps it, reports why to the agent (if it is still there) and exits. It
// sleeps between those events: no polling.
//
// Any program that imports this package (package agent does) turns into the
// guard when started as one: argv[1] is Arg and the environment holds Env.
// This package imports little, so it is initialized before most of the
// program's packages and the guard does not pay for them.
// docs/DESIGN-NOTES.md ("The duty guard") gives the reasons.
package dutyguard

// Arg (argv[1]) and Env mark a process as the guard. Env holds the
// protocol version: a guard and an agent of different versions refuse each
// other instead of misreading each other.
const (
	Arg      = "duty-guard"
	Env      = "EDGE_AGENT_DUTY_GUARD"
	Protocol = "1"
	// ControlFD is the guard's end of its control connection, a Unix
	// stream socket (the first of exec.Cmd.ExtraFiles).
	ControlFD = 3
)

// The guard's command line after Arg:
//
//	--deadline=NS [--label=TEXT] -- PATH ARGV0 ARGS...
//
// NS is the first deadline (CLOCK_MONOTONIC nanoseconds, see
// ClockMonotonic); TEXT names the run in the guard's own log lines (the
// agent gives id/term).
//
// The control protocol, one line per message.
//
// Agent to guard:
//
//	renew NS   the deadline moves to NS (it only ever moves forward)
//	term       SIGTERM every process of the tree
//	kill       SIGKILL the tree now
//
// Guard to agent:
//
//	started PID           the command runs as PID
//	done REASON STATUS    the tree is gone; REASON is exited (the command
//	                      exited by itself), killed (on "kill"), expired
//	                      (the deadline passed) or error (it could not be
//	                      started; STATUS is the error); STATUS is the
//	                      command's wait status as os.ProcessState prints it
//
// after which the guard exits. A closed connection (end of stream) tells the
// guard that the agent is gone: it kills the tree.
const (
	Renew   = "renew"
	Term    = "term"
	Kill    = "kill"
	Started = "started"
	Done    = "done"

	Exited  = "exited"
	Killed  = "killed"
	Expired = "expired"
	Error   = "error"
)
