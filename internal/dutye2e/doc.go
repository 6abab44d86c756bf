// Package dutye2e holds the end-to-end tests of the leader duty: agents on
// an in-memory network (package agent's MemNetwork) whose duties run as real
// OS processes under real duty guards (package edge/dutyguard), in real time.
// They show that a duty stops before the successor's starts, that a failing
// duty is restarted and then resigned, that a stuck agent loop or a guard
// whose deadline passed still stops the command before the lease ends, and
// that the duty and its hooks get the documented environment.
//
// They use package agent only through its exported API, and package duty
// through its Lease interface, so that the agent's own tests (./agent/...)
// stay fast, deterministic and in memory. TestMain builds the edge-agent
// binary, without the race detector, as the guard of the tests' duties, as
// the agent runs it in production.
//
// The package has no code outside its tests.
package dutye2e
