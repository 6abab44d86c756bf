//go:build !linux

package agent

import "os"

// datasync flushes f to stable storage (a full fsync where fdatasync is not
// available).
func datasync(f *os.File) error { return f.Sync() }
