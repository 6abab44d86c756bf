// Package agent runs one member of an edge-agent election group.
//
// An Agent owns one election core (package election) in a single goroutine,
// its loop: input -> Step -> Ready -> persist -> send -> report. Every
// external input (election messages, reports that a member's connection or
// route closed, this agent's own disconnection, handover requests) arrives
// from a Bus on one channel (package bus is the NATS bus; WithTransport
// makes one of the in-memory network of the tests); the core's deadlines
// set when the loop wakes without one. After every step the agent persists
// the term and vote (fsync) before it sends anything, then reports
// leadership through callbacks, metrics, logs and status. The package links
// no NATS package, and its tests run on the in-memory bus under
// testing/synctest, in virtual time.
//
// The lease: a leader may act only while a quorum has acknowledged a
// heartbeat it sent less than Config.Lease ago. IsLeader checks that on the
// monotonic clock at the time of the call, so a process that was paused
// answers false the moment it wakes. Followers wait D = k*H of silence, with
// D > L + H, before they vote for anyone else, so a new leader can only be
// elected after the old lease ended.
package agent
