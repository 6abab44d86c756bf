// Package wire is the wire format of edge-agent: the subjects of a group's
// election and control traffic, the encoding and checking of election
// messages (Encode, Decode, DecodeInbound), the headers and numbering of
// signed messages, and the challenges that prove a sender's epoch. The
// keys and signatures themselves are package sign's, so that this package
// links no NATS package.
//
// It does no I/O and keeps no goroutines: a bus encodes what an agent sends
// and decodes, verifies and numbers what it receives, once, before the agent
// sees it. Everything a receiver must not apply is refused with a
// *BadMessageError whose Reason is a metrics label.
package wire
