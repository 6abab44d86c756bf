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
// Two sites are built. The five-gateway site (world_test.go) has two
// servers clustered by one proxied route (Bus). The two-gateway site with a
// witness (witness_test.go: gw1, gw2 and the witness wit, --witnesses wit)
// has one server per member, the three clustered in a full mesh whose
// every route runs through its own proxy (Mesh); every server advertises a
// sink as its route address, so that gossip cannot build an implicit route
// around a cut proxy. NATS does not forward between two servers through a
// third, so cutting the gw1-gw2 route separates the gateways while both
// still reach the witness. TestChaosWitnessGatewayCut cuts that route
// (reset and black hole in turn); TestChaosWitnessPartitions runs the
// partition kinds that exist on 2+1 (either gateway's link, the witness's
// link, the witness killed and restarted). Both check the journals (no
// overlap, no double vote, no split term, no lease of the witness), one
// leader after each heal within D + 1 s and step-down within L + H; the
// cut also one gateway leading from at most D + 1 s after the cut until the
// heal, the partitions the leader keeping its lease while only the witness
// is away. CHAOS_WITNESS_CYCLES sets their cycles (10 in chaos-short, 50 in
// chaos), CHAOS_WITNESS_RANK=lowest ranks the witness below the gateways
// (highest by default).
//
// The proxy (Proxy) is the reusable part. The scenarios are tests: they run
// only with CHAOS=1 (see the Makefile targets chaos, chaos-short and
// chaos-lossy), since they take minutes.
package chaos
