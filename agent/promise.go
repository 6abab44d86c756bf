package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// What a member promised survives its restarts. Every acknowledgement and
// vote says the sender's D (election.Message.Promise): the sender grants no
// other vote for that long, and the leader counts on it for its lease. A
// member that restarts waits D before it votes or stands, as if it had just
// heard a leader; but if its D is shorter than in its last run (an
// operator lowered heartbeat_misses or heartbeat), the promises of that run
// bind it for the old D. So the longest D it may have promised is kept in
// the state directory, and a member waits that long after it starts; the
// shorter D is written only once the old one has passed since the start,
// so that a member restarted again meanwhile still waits the old one.

// PromiseStore is a Store that also keeps the longest D its member may have
// promised. FileStore is one; with another store a member that restarts
// with a shorter D does not keep its earlier promises (tests).
type PromiseStore interface {
	// LoadPromise returns the stored D (0 when none was stored).
	LoadPromise() (time.Duration, error)
	// SavePromise stores d durably before it returns.
	SavePromise(d time.Duration) error
}

const (
	promiseFileName = "promise.json"
	promiseTmpName  = "promise.json.tmp"
)

// LoadPromise implements PromiseStore: dir/promise.json, absent = none.
// A file that cannot be read or parsed is an error, never "none": a member
// must not vote early because the file was damaged.
func (s *FileStore) LoadPromise() (time.Duration, error) {
	path := filepath.Join(s.dir, promiseFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("agent: cannot read %s: %w", path, err)
	}
	var v struct {
		PromiseMS *int64 `json:"promise_ms"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.PromiseMS == nil || *v.PromiseMS < 0 || *v.PromiseMS > maxPromiseMS {
		return 0, fmt.Errorf("agent: %s is corrupt (want {\"promise_ms\": N}, N at most %d): fix it, or remove it with the agent stopped for at least its longest heartbeat_misses*heartbeat", path, maxPromiseMS)
	}
	return time.Duration(*v.PromiseMS) * time.Millisecond, nil
}

// maxPromiseMS is the longest D a config accepts (100 heartbeats of a
// minute), in milliseconds.
const maxPromiseMS = 100 * 60 * 1000

// SavePromise implements PromiseStore, written as the drained flag is.
func (s *FileStore) SavePromise(d time.Duration) error {
	// Rounded up: the file must not say less than was promised.
	ms := (d + time.Millisecond - 1) / time.Millisecond
	data, _ := json.Marshal(struct {
		PromiseMS int64 `json:"promise_ms"`
	}{int64(ms)})
	if err := s.saveSmall(promiseFileName, promiseTmpName, data); err != nil {
		return fmt.Errorf("agent: save promise: %w", err)
	}
	return nil
}

// keepPromise returns how long after it starts this member waits before
// it votes or stands: its D, or the longer D it may have promised in its
// last run. It stores the D it promises from now on before anything is
// sent if that is longer, and else once the old one has passed (later, on
// a timer of its own: stopped by Close).
func (a *Agent) keepPromise() (time.Duration, error) {
	d := a.cfg.SuspectAfter()
	ps, ok := a.store.(PromiseStore)
	if !ok {
		return d, nil
	}
	prev, err := ps.LoadPromise()
	if err != nil {
		return 0, err
	}
	if prev <= d {
		if prev < d {
			if err := ps.SavePromise(d); err != nil {
				return 0, err
			}
		}
		return d, nil
	}
	a.log.Warn("D is shorter than in this member's last run: it keeps what it promised then, and waits that long before it votes or stands",
		"d", d, "promised", prev)
	a.maint.promiseTimer = time.AfterFunc(prev, func() {
		if err := ps.SavePromise(d); err != nil {
			a.log.Debug("cannot store the shorter D; the next start waits the longer one again", "err", err)
		}
	})
	return prev, nil
}
