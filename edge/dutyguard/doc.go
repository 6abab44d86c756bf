// Package dutyguard is the duty guard of edge-agent: a small process per
// run of the leader duty command, started by the agent from its own
// executable. It runs the command as its child and is the child subreaper
// (Linux's PR_SET_CHILD_SUBREAPER) of everything the command starts, so
// every process of the duty's tree stays its descendant: a wrapper that does
// not exec, a worker started with "&", a double fork, a process that left
// the command's process group or session. It stops the whole tree
//
//   - when the deadlines the agent gives it pass (the agent renews them each
//     time its lease is extended; the agent may be frozen or stuck): SIGTERM
//     at the soft one, as the agent would, SIGKILL at the hard one;
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
	Protocol = "2"
	// ControlFD is the guard's end of its control connection, a Unix
	// stream socket (the first of exec.Cmd.ExtraFiles).
	ControlFD = 3
	// Standby (the first argument after Arg) starts a standby guard.
	Standby = "--standby"
)

// The guard's command line after Arg:
//
//	[--soft=NS] --deadline=NS [--label=TEXT] -- PATH ARGV0 ARGS...
//
// The deadlines are CLOCK_MONOTONIC nanoseconds (see ClockMonotonic): when
// the soft one passes without renewal the tree gets SIGTERM, when the other
// (the hard deadline) passes it is killed. TEXT names the run in the
// guard's own log lines (the agent gives id/term).
//
// The control protocol, one line per message.
//
// Agent to guard:
//
//	renew S H  the soft deadline moves to S and the hard one to H (they
//	           only ever move forward)
//	term       SIGTERM every process of the tree (once per run, whether
//	           from the agent, the soft deadline or a signal to the guard)
//	kill       SIGKILL the tree now
//
// Guard to agent:
//
//	started PID           the command runs as PID
//	done REASON STATUS    the tree is gone; REASON is exited (the command
//	                      exited, by itself or after "term"), stopped (it
//	                      exited after the soft deadline's SIGTERM), killed
//	                      (on "kill"), expired (the hard deadline passed) or
//	                      error (it could not be started; STATUS is the
//	                      error); STATUS is the command's wait status as
//	                      os.ProcessState prints it
//
// after which the guard exits. A closed connection (end of stream) tells the
// guard that the agent is gone: it kills the tree.
//
// A standby guard is started ahead of need, so that a new leader's duty
// costs a few messages rather than a process start (exec, the runtime's
// start-up, page faults of a 20 MB executable: milliseconds on an idle
// gateway, tens of them on a busy one). Its command line after Arg is
//
//	--standby [--label=TEXT]
//
// and it holds nothing, starts nothing and reports nothing until the agent
// sends, one line each:
//
//	arg Q      one argument of the command line after Arg, in order (Q is
//	           a Go-quoted string, strconv.Quote): the deadlines, the VIPs,
//	           "--" and the command, as a guard started for the run gets
//	env Q      one KEY=VALUE of the command's environment (a standby's own
//	           environment is not passed on: the run's is known only now)
//	start      run as a guard started with those arguments would
//
// after which the protocol above applies (a renew, term or kill may follow
// start at once). A closed connection before start ends a standby guard
// quietly: it had nothing to stop.
const (
	Renew   = "renew"
	Term    = "term"
	SetArg  = "arg"
	SetEnv  = "env"
	Start   = "start"
	Kill    = "kill"
	Started = "started"
	Done    = "done"

	Exited  = "exited"
	Stopped = "stopped"
	Killed  = "killed"
	Expired = "expired"
	Error   = "error"
)
