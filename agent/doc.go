// Package agent runs one member of an edge-agent election group.
//
// An Agent owns one election core (package election) in a single goroutine,
// its loop: the real clock becomes ticks, messages arrive from a Transport
// (NATS in production, in memory in tests), and after every step the agent
// persists the term and vote (fsync) before it sends anything, then reports
// leadership through callbacks, metrics, logs and status.
//
// The lease: a leader may act only while a quorum has acknowledged a
// heartbeat it sent less than Config.Lease ago. IsLeader checks that on the
// monotonic clock at the time of the call, so a process that was paused
// answers false the moment it wakes. Followers wait D = k*H of silence, with
// D > L + H, before they vote for anyone else, so a new leader can only be
// elected after the old lease ended.
package agent
