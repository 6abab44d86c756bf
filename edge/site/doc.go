// Package site serves the site page: a read-only view of an election group
// at the agent's HTTP address (/), for an operator with a laptop or a phone
// on the site network and no Prometheus or Grafana.
//
// The page is one HTML file with its CSS and JavaScript (no build step, no
// external assets, embedded in the binary). It shows the group, every
// member with its role, liveness, version and last-seen time, the leader,
// the term, the lease remaining, the quorum, the leader's duty and the last
// leader changes, and follows them live over server-sent events (GET
// /events) without a reload.
//
// What it shows is a Snapshot: the serving agent's own status, merged with
// the other members' own answers to a status request (the request that
// edge-agent status sends, here over the agent's own connection). A member
// that did not answer keeps what the serving agent knows of it: alive or
// not, and when it was last seen.
//
// The streams share one loop, which runs only while a page is open: it
// sends a snapshot at every leader change the agent sees, at every answer
// round and at least every Interval, and asks the other members once per
// Interval. At most MaxStreams pages follow at once; another gets 503.
//
// The page offers no actions: resign, transfer and the other commands stay
// with the edge-agent CLI, which holds the operator's key when the group
// signs its control requests; the agent holds no operator credentials.
package site
