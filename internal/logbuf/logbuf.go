// Package logbuf is a log destination for tests: safe to read while a
// logger writes to it, with a search for the lines that carry given text.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects what is written to it. It is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines that contain every one of subs.
func (b *Buffer) Lines(subs ...string) []string {
	var out []string
next:
	for _, l := range strings.Split(b.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}
