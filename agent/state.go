package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/edge-agent/edge-agent/election"
)

// Names of the files kept in a state directory.
const (
	stateFileName = "state.json"
	stateTmpName  = "state.json.tmp"
	lockFileName  = "LOCK"
)

// FileStore keeps an agent's election.HardState (term and vote) durably in a
// directory, and holds an exclusive lock on it so that two agents can never
// share one term. The term is the leader's fencing token: a FileStore never
// lets it go back, neither by saving a lower term nor by silently starting
// afresh from a damaged file.
//
// A FileStore is safe for concurrent use.
type FileStore struct {
	dir  string
	lock *os.File

	mu     sync.Mutex
	hs     election.HardState
	file   *os.File // state.json open for saves in place (two-block layout), or nil
	closed bool
	// unsettled: the last save in place is durable in block B and block A
	// still holds the one before (see Settle).
	unsettled bool
}

// OpenFileStore opens the state directory dir, creating it (mode 0700) if it
// is missing. It takes an exclusive, non-blocking lock on dir/LOCK and fails
// at once if another agent holds it. It loads dir/state.json if it exists;
// a missing file is a fresh start (term 0, no vote), but a file that cannot
// be read or parsed is an error naming it, never a reset. A state.json.tmp
// left by a crash during Save is removed: the save it belonged to never
// returned, so nothing was sent on its strength.
func OpenFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("agent: state_dir: a state directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create state dir: %w", err)
	}
	lockPath := filepath.Join(dir, lockFileName)
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: open state lock: %w", err)
	}
	if err := flock(lock, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("agent: state dir %s is in use by another agent", dir)
		}
		return nil, fmt.Errorf("agent: lock %s: %w", lockPath, err)
	}
	s := &FileStore{dir: dir, lock: lock}
	if err := s.load(); err != nil {
		s.unlock()
		return nil, err
	}
	return s, nil
}

// flock applies how to f, retrying when a signal interrupts the call.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// load reads state.json into s.hs and removes a stale temporary file.
func (s *FileStore) load() error {
	tmp := filepath.Join(s.dir, stateTmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent: remove stale %s: %w", tmp, err)
	}
	path := filepath.Join(s.dir, stateFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent: cannot read state file %s: %w (it holds the term, which must never go back; fix the file's access, do not delete it)", path, err)
	}
	hs, err := decodeHardState(data)
	if err != nil {
		return fmt.Errorf("agent: state file %s is corrupt: %w (it holds the term, which must never go back; restore it, or delete it only if every other member is known to hold a higher term)", path, err)
	}
	if hs.Term > election.MaxTerm {
		return fmt.Errorf("%w: state file %s holds term %d, above the bound %d (a forged message raised it)", ErrTermAtBound, path, hs.Term, election.MaxTerm)
	}
	s.hs = hs
	if isBlockLayout(data) {
		// Saves overwrite it in place; a file of the earlier layout is
		// replaced whole at the next save.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("agent: open state file: %w", err)
		}
		s.file = f
	}
	return nil
}

// ReadState returns the term and vote stored in dir (term 0 when there is
// no state file), whatever the term, without taking the lock.
func ReadState(dir string) (election.HardState, error) {
	path := filepath.Join(dir, stateFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return election.HardState{}, nil
	}
	if err != nil {
		return election.HardState{}, fmt.Errorf("agent: read state: %w", err)
	}
	hs, err := decodeHardState(data)
	if err != nil {
		return election.HardState{}, fmt.Errorf("agent: state file %s: %w", path, err)
	}
	return hs, nil
}

// ErrTermAtBound is the error of a state directory whose term is above
// election.MaxTerm: the group can no longer elect with it. The way back is
// ResetState on every member with every agent of the group stopped
// (`edge-agent reset-term`, docs/SECURITY.md).
var ErrTermAtBound = errors.New("agent: term at the bound")

// ResetState overwrites the term and vote kept in dir with term and no
// vote, even below the stored term, and returns what was stored (term 0 if
// nothing was). It takes the directory's lock, so it fails while an agent
// runs on dir. It is the way back for a group whose terms reached
// election.MaxTerm (a term set back is a fencing token that goes back:
// every member must be reset, with every agent of the group stopped, before
// any starts again), and the way to give a member the group's term.
func ResetState(dir string, term uint64) (election.HardState, error) {
	if term > election.MaxTerm {
		return election.HardState{}, fmt.Errorf("agent: term %d is above the bound %d", term, election.MaxTerm)
	}
	if _, err := os.Stat(dir); err != nil {
		return election.HardState{}, fmt.Errorf("agent: state dir: %w", err)
	}
	lockPath := filepath.Join(dir, lockFileName)
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return election.HardState{}, fmt.Errorf("agent: open state lock: %w", err)
	}
	if err := flock(lock, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return election.HardState{}, fmt.Errorf("agent: state dir %s is in use by a running agent: stop it first", dir)
		}
		return election.HardState{}, fmt.Errorf("agent: lock %s: %w", lockPath, err)
	}
	s := &FileStore{dir: dir, lock: lock}
	defer s.unlock()
	var old election.HardState
	data, err := os.ReadFile(filepath.Join(dir, stateFileName))
	switch {
	case err == nil:
		if hs, derr := decodeHardState(data); derr == nil {
			old = hs
		}
	case !errors.Is(err, os.ErrNotExist):
		return old, fmt.Errorf("agent: read state: %w", err)
	}
	if err := s.write(election.HardState{Term: term}); err != nil {
		return old, err
	}
	return old, nil
}

// decodeHardState parses a state file: the two-block layout (statefile.go)
// by its blocks, any other content as one JSON object (decodeObject).
func decodeHardState(data []byte) (election.HardState, error) {
	if isBlockLayout(data) {
		return decodeBlocks(data)
	}
	hs, _, err := decodeObject(data)
	return hs, err
}

// decodeObject parses data strictly: exactly one JSON object with a term, a
// valid (or empty) vote and nothing after it; it also returns the object's
// check (statefile.go), "" if it has none. Unknown fields are allowed, so
// that a downgrade can read a newer agent's file.
func decodeObject(data []byte) (election.HardState, string, error) {
	var raw struct {
		Term     *uint64 `json:"term"`
		VotedFor string  `json:"voted_for"`
		Check    string  `json:"check"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return election.HardState{}, "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return election.HardState{}, "", errors.New("trailing data after the JSON object")
	}
	if raw.Term == nil {
		return election.HardState{}, "", errors.New(`no "term" field`)
	}
	if raw.VotedFor != "" && !election.ValidID(raw.VotedFor) {
		return election.HardState{}, "", fmt.Errorf("voted_for %q is not a valid member id", raw.VotedFor)
	}
	return election.HardState{Term: *raw.Term, VotedFor: raw.VotedFor}, raw.Check, nil
}

// Load returns the stored state: what the last successful Save wrote, or what
// OpenFileStore read.
func (s *FileStore) Load() election.HardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs
}

// Save stores hs durably and returns once it is on disk: it overwrites
// block B of state.json in place and syncs it, leaving block A to Settle
// (see statefile.go), or, when state.json is missing, of an earlier layout,
// or no longer the file the store opened, writes state.json.tmp, fsyncs it,
// renames it over state.json and fsyncs the directory. Messages that depend
// on hs may be sent only after Save returns nil. A save not yet settled is
// settled first.
//
// Save refuses, with an error and without writing, a term lower than the
// stored one, and a change of the vote already granted in the stored term
// (one vote per term). Saving the stored state again writes nothing.
func (s *FileStore) Save(hs election.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("agent: state store is closed")
	}
	if hs.Term < s.hs.Term {
		return fmt.Errorf("agent: refusing to save term %d below the stored term %d", hs.Term, s.hs.Term)
	}
	if hs.Term > election.MaxTerm {
		return fmt.Errorf("agent: refusing to save term %d above the bound %d", hs.Term, election.MaxTerm)
	}
	if hs.Term == s.hs.Term && s.hs.VotedFor != "" && hs.VotedFor != s.hs.VotedFor {
		return fmt.Errorf("agent: refusing to change the vote of term %d from %q to %q", hs.Term, s.hs.VotedFor, hs.VotedFor)
	}
	if hs == s.hs {
		return nil
	}
	if err := s.settle(); err != nil {
		return err
	}
	if s.file != nil && !s.fileInPlace() {
		// state.json was removed or replaced (its directory too, perhaps)
		// since it was opened: a save to the open file would reach no file
		// that a restart reads. Replace it whole, which fails if the
		// directory is gone.
		s.file.Close()
		s.file = nil
	}
	if s.file != nil {
		if err := saveFirst(s.file, hs); err != nil {
			return err
		}
		s.hs, s.unsettled = hs, true
		return nil
	}
	if err := s.write(hs); err != nil {
		return err
	}
	// From now on in place. If the file cannot be opened, the next save
	// replaces it whole again.
	if f, err := os.OpenFile(filepath.Join(s.dir, stateFileName), os.O_RDWR, 0); err == nil {
		s.file = f
	}
	return nil
}

// Settle completes the last save: it brings block A of state.json level
// with block B and syncs it. The agent calls it once the messages that
// depend on the save are sent, so that the sync runs while they travel; Save
// and Close call it too, if it was not. Without a save to settle it does
// nothing. An error means the disk failed a write: the save stays durable
// (block B holds it), but the agent stops as on a failed Save.
func (s *FileStore) Settle() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settle()
}

func (s *FileStore) settle() error {
	if !s.unsettled || s.file == nil {
		return nil
	}
	if err := saveSecond(s.file, s.hs); err != nil {
		return err
	}
	s.unsettled = false
	return nil
}

// fileInPlace reports whether state.json is still the file s.file holds
// open (two stats, a few microseconds).
func (s *FileStore) fileInPlace() bool {
	open, err := s.file.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(filepath.Join(s.dir, stateFileName))
	return err == nil && os.SameFile(open, named)
}

// write replaces state.json with hs, in the two-block layout, atomically and
// durably (a temporary file, fsync, rename, directory fsync). It updates s.hs
// as soon as the rename is done, even if the directory fsync then fails: the
// file may hold hs from then on, so a later Save must not go below it.
func (s *FileStore) write(hs election.HardState) (err error) {
	data := encodeStateFile(hs)
	tmp := filepath.Join(s.dir, stateTmpName)
	path := filepath.Join(s.dir, stateFileName)

	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("agent: save state: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("agent: save state: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("agent: save state: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("agent: save state: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("agent: save state: %w", err)
	}
	renamed = true
	s.hs = hs
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("agent: save state: fsync dir %s: %w", s.dir, err)
	}
	return nil
}

// syncDir fsyncs a directory so that a rename in it survives a power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// Close releases the directory lock; later Saves fail. The state files stay.
// Closing twice is a no-op.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.settle()
	if uerr := s.unlock(); err == nil {
		err = uerr
	}
	if s.file != nil {
		if cerr := s.file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("agent: close state file: %w", cerr)
		}
	}
	return err
}

// unlock releases the lock and closes the lock file.
func (s *FileStore) unlock() error {
	err := flock(s.lock, syscall.LOCK_UN)
	if cerr := s.lock.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: release state lock: %w", err)
	}
	return nil
}
