// Package sign holds the signatures of edge-agent's wire format: the
// nkey (ed25519) signing and checking of election messages with the
// freshness of their numbering (Signing), and the signatures of control
// messages (SignControl, VerifyControl). Package wire holds the format
// itself and stays free of key handling, so that the agent's election loop
// can use the format without linking any NATS package.
package sign
