package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// CheckStateDir checks, without creating or changing anything, that the
// agent could open dir as its state directory as the user running the
// check: an existing dir must be a directory this user can read, write and
// enter, and the files the agent keeps in it (state.json, LOCK, epoch) must
// be readable and writable; a dir that does not exist must be creatable,
// that is its nearest existing ancestor is a directory this user can write
// and enter (the agent creates the missing levels, mode 0700). note says
// what was found, for check-config's report. Errors say why, without the
// key (the caller names state_dir).
//
// Permissions are checked with access(2), as the real user: run
// check-config as the service user (sudo -u edge-agent). What a systemd
// unit adds (StateDirectory=, ProtectSystem=strict) is not seen here.
func CheckStateDir(dir string) (note string, err error) {
	if dir == "" {
		return "", errors.New("a state directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	who := runningUser()
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return "", fmt.Errorf("%s is not a directory", dir)
	case err == nil:
		if err := access(abs, 7); err != nil {
			return "", fmt.Errorf("%s is not readable, writable and searchable by %s (mode %04o): %w", dir, who, fi.Mode().Perm(), err)
		}
		for _, name := range []string{stateFileName, lockFileName, "epoch", drainFileName, promiseFileName} {
			p := filepath.Join(abs, name)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			if err := access(p, 6); err != nil {
				return "", fmt.Errorf("%s is not readable and writable by %s: %w", p, who, err)
			}
		}
		return fmt.Sprintf("state_dir %s: a directory %s can write", dir, who), nil
	case !missing(err):
		return "", err
	}
	// Missing: the nearest existing ancestor decides.
	parent := abs
	for {
		next := filepath.Dir(parent)
		if next == parent {
			return "", fmt.Errorf("%s does not exist and no ancestor exists", dir)
		}
		parent = next
		fi, err := os.Stat(parent)
		if missing(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s does not exist and cannot be created: %w", dir, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s does not exist and cannot be created: %s is not a directory", dir, parent)
		}
		if err := access(parent, 3); err != nil {
			return "", fmt.Errorf("%s does not exist and cannot be created by %s: %s is not writable by %s (mode %04o)", dir, who, parent, who, fi.Mode().Perm())
		}
		return fmt.Sprintf("state_dir %s does not exist yet: the agent will create it (in %s, which %s can write)", dir, parent, who), nil
	}
}

// missing tells whether a Stat error means the path does not exist (a
// component that is a file included: the walk up finds it).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// access checks mode (4 read, 2 write, 1 search) on path for the real user.
func access(path string, mode uint32) error {
	return syscall.Access(path, mode)
}

// runningUser names the real user, for messages ("edge-agent (uid 998)").
func runningUser() string {
	uid := os.Getuid()
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("user %s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
