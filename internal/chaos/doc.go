// Package chaos is the fault-injection suite of edge-agent: it runs real
// agent processes against real nats-servers, puts a fault proxy between
// every agent and its server (and on the route between two clustered
// servers), and injects cuts, one-way cuts, black holes, delay, message
// loss, SIGSTOP/SIGCONT, SIGKILL and server restarts. Every agent writes a
// leadership journal; internal/journalcheck merges them and the scenarios
// check that no two agents ever held a valid lease at once, that no agent
// voted twice in a term, that terms never go back, and how fast the group
// recovers.
//
// The proxy (Proxy) is the reusable part. The scenarios are tests: they run
// only with CHAOS=1 (see the Makefile targets chaos, chaos-short and
// chaos-lossy), since they take minutes.
package chaos
