package agent

import (
	"errors"
	"os"
	"syscall"
)

// datasync flushes f's data, and only the metadata needed to read it back
// (fdatasync): an overwrite in place that keeps the file's size needs no
// journal commit.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
