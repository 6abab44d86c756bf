package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// ParseMemberKeys parses "id=PUBKEY,id=PUBKEY" (nkey user public keys).
func ParseMemberKeys(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, key, ok := strings.Cut(part, "=")
		if !ok || id == "" || key == "" {
			return nil, fmt.Errorf("%q is not ID=PUBLIC_KEY", part)
		}
		out[id] = key
	}
	return out, nil
}

// NextEpoch draws this run's epoch for the member whose state directory is
// dir: the start counter kept in dir/epoch is incremented durably (temp file,
// fsync, rename, fsync dir) before it is used, and the epoch is
// wire.NewEpoch of the counter. The counter saturates at
// 2^31-1 instead of wrapping.
func NextEpoch(dir string) (uint64, error) {
	path := filepath.Join(dir, "epoch")
	var cur uint64
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		cur, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("agent: %s is damaged: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return 0, fmt.Errorf("agent: read %s: %w", path, err)
	}
	next := min(cur, wire.MaxEpochCount-1) + 1
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("agent: write %s: %w", tmp, err)
	}
	if _, err = f.WriteString(strconv.FormatUint(next, 10) + "\n"); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("agent: persist epoch: %w", err)
	}
	return wire.NewEpoch(next), nil
}

// CheckSecretFile reports a file holding a secret (a seed, a private key, a
// creds file) that others may read or write: such a file is refused, naming
// key, the setting that names it.
func CheckSecretFile(key, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if m := fi.Mode().Perm(); m&0o006 != 0 {
		return fmt.Errorf("%s: %s is readable or writable by others (mode %04o): it holds a secret; chmod o-rwx %s", key, path, m, path)
	}
	return nil
}
