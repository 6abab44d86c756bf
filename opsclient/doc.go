// Package opsclient is the operator's side of the agents' control
// subjects: `edge-agent status`, `resign`, `transfer` and `watch` ask every
// agent of a group over NATS, or its leader, and print what they answer.
//
// In a group that signs (member_keys), the requests are signed with a
// member's or an operator's key and every answer is checked against the
// member it names; what cannot be verified is noted and ignored.
package opsclient
