package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/election"
)

func openTestStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatalf("OpenFileStore(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFileStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := openTestStore(t, dir)

	if got := s.Load(); got != (election.HardState{}) {
		t.Fatalf("fresh store Load() = %+v, want zero", got)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("created state dir mode = %v, want 0700", perm)
	}

	for _, hs := range []election.HardState{
		{Term: 1},
		{Term: 1, VotedFor: "gw2"},
		{Term: 1, VotedFor: "gw2"}, // unchanged: no write, no error
		{Term: 7, VotedFor: "gw1"},
		{Term: 8},
	} {
		if err := s.Save(hs); err != nil {
			t.Fatalf("Save(%+v): %v", hs, err)
		}
		if got := s.Load(); got != hs {
			t.Fatalf("Load() = %+v after Save(%+v)", got, hs)
		}
	}
}

func TestFileStoreReopenSeesSavedState(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := election.HardState{Term: 42, VotedFor: "gw-3"}
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Save(election.HardState{Term: 43}); err == nil {
		t.Fatal("Save after Close succeeded")
	}

	s2 := openTestStore(t, dir)
	if got := s2.Load(); got != want {
		t.Fatalf("reopened Load() = %+v, want %+v", got, want)
	}
}

func TestFileStoreLockedDirFails(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)

	_, err := OpenFileStore(dir)
	if err == nil {
		t.Fatal("second OpenFileStore of a locked dir succeeded")
	}
	if want := "state dir " + dir + " is in use by another agent"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}

	// The lock goes with Close, and the first store's state stays.
	if err := s.Save(election.HardState{Term: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTestStore(t, dir)
	if got := s2.Load().Term; got != 3 {
		t.Fatalf("term after reopen = %d, want 3", got)
	}
}

func TestFileStoreCorruptFileFails(t *testing.T) {
	for name, content := range map[string]string{
		"empty":      "",
		"truncated":  `{"term":12,"vot`,
		"not json":   "term=12\n",
		"no term":    `{"voted_for":"gw1"}`,
		"bad term":   `{"term":-1}`,
		"bad vote":   `{"term":3,"voted_for":"gw 1"}`,
		"trailing":   `{"term":3}{"term":1}`,
		"wrong type": `[3]`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenFileStore(dir)
			if err == nil {
				s.Close()
				t.Fatalf("OpenFileStore accepted state file %q", content)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("error %q should name %s as corrupt", err, path)
			}
			// The failed open must not keep the lock nor touch the file.
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Fatalf("state file rewritten to %q", b)
			}
			s = openLockOnly(t, dir)
			s.Close()
		})
	}
}

// openLockOnly checks that dir's lock is free by taking it through a store
// whose state file has been moved aside.
func openLockOnly(t *testing.T, dir string) *FileStore {
	t.Helper()
	path := filepath.Join(dir, "state.json")
	if err := os.Rename(path, path+".bad"); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatalf("lock still held after a failed open: %v", err)
	}
	return s
}

func TestFileStoreUnreadableFileFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	// A directory in place of the file cannot be read, even by root.
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := OpenFileStore(dir)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("OpenFileStore with unreadable state file: err = %v, want one naming %s", err, path)
	}
}

func TestFileStoreRefusesLowerTerm(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	if err := s.Save(election.HardState{Term: 5, VotedFor: "gw1"}); err != nil {
		t.Fatal(err)
	}
	err := s.Save(election.HardState{Term: 4})
	if err == nil || !strings.Contains(err.Error(), "term 4 below the stored term 5") {
		t.Fatalf("Save of a lower term: err = %v", err)
	}
	if got := s.Load(); got != (election.HardState{Term: 5, VotedFor: "gw1"}) {
		t.Fatalf("state changed by a refused Save: %+v", got)
	}
}

func TestFileStoreRefusesSecondVoteInTerm(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	if err := s.Save(election.HardState{Term: 5, VotedFor: "gw1"}); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"gw2", ""} {
		if err := s.Save(election.HardState{Term: 5, VotedFor: other}); err == nil {
			t.Fatalf("Save changed the vote of term 5 to %q", other)
		}
	}
	// A new term starts with no vote.
	if err := s.Save(election.HardState{Term: 6}); err != nil {
		t.Fatal(err)
	}
}

func TestFileStoreLeavesNoTmpFile(t *testing.T) {
	dir := t.TempDir()
	// A tmp file left by a crash during Save is stale and removed on open.
	if err := os.WriteFile(filepath.Join(dir, "state.json.tmp"), []byte(`{"term":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStore(t, dir)
	if got := s.Load().Term; got != 0 {
		t.Fatalf("stale tmp file was loaded: term %d", got)
	}
	for term := uint64(1); term <= 3; term++ {
		if err := s.Save(election.HardState{Term: term}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "LOCK,state.json" {
		t.Fatalf("state dir holds %s, want LOCK,state.json", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if hs, _, err := decodeObject(b); err != nil || hs != (election.HardState{Term: 3}) {
		t.Fatalf("state.json read as one object = %+v, %v; want term 3", hs, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("state.json mode = %v, want 0600", perm)
	}
}
