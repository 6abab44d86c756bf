package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/edge-agent/edge-agent/election"
)

// saveAll saves each state in turn.
func saveAll(t *testing.T, s *FileStore, states ...election.HardState) {
	t.Helper()
	for _, hs := range states {
		if err := s.Save(hs); err != nil {
			t.Fatalf("save %+v: %v", hs, err)
		}
	}
}

// TestStateFileReadAsOneObject: a build that reads state.json as one JSON
// object (every release before the two-block layout) reads the last saved
// term and vote, so a downgrade keeps the term and the vote.
func TestStateFileReadAsOneObject(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	states := []election.HardState{{Term: 1, VotedFor: "gw2"}, {Term: 2}, {Term: 2, VotedFor: "gw3"}, {Term: 17, VotedFor: "gw1"}}
	for _, hs := range states {
		saveAll(t, s, hs)
		data, err := os.ReadFile(filepath.Join(dir, stateFileName))
		if err != nil {
			t.Fatal(err)
		}
		if !isBlockLayout(data) {
			t.Fatalf("after saving %+v state.json is not in the two-block layout", hs)
		}
		got, _, err := decodeObject(data)
		if err != nil || got != hs {
			t.Fatalf("read as one object after saving %+v: %+v, %v", hs, got, err)
		}
		var plain struct {
			Term     uint64 `json:"term"`
			VotedFor string `json:"voted_for"`
		}
		if err := json.Unmarshal(data, &plain); err != nil || plain.Term != hs.Term || plain.VotedFor != hs.VotedFor {
			t.Fatalf("json.Unmarshal after saving %+v: %+v, %v", hs, plain, err)
		}
	}
}

// TestStateFileSavesInPlace: after the first save, saves overwrite the same
// file (no new file, no rename), and a reopened store keeps doing so.
func TestStateFileSavesInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	s := openTestStore(t, dir)
	saveAll(t, s, election.HardState{Term: 1})
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	saveAll(t, s, election.HardState{Term: 2, VotedFor: "gw1"}, election.HardState{Term: 3})
	s.Close()
	s = openTestStore(t, dir)
	saveAll(t, s, election.HardState{Term: 4, VotedFor: "gw2"})
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("a save replaced state.json instead of overwriting it in place")
	}
	if after.Size() != stateFileSize {
		t.Fatalf("state.json is %d bytes, want %d", after.Size(), stateFileSize)
	}
	s.Close()
	if got := openTestStore(t, dir).Load(); got != (election.HardState{Term: 4, VotedFor: "gw2"}) {
		t.Fatalf("reopened: %+v", got)
	}
}

// TestStateFileNoticesRemoval: a save after state.json was removed writes a
// new state.json that a restart reads, never only the unlinked file the
// store still holds open; after its directory was removed, a save fails
// (the agent must not send a vote that a restart would forget).
func TestStateFileNoticesRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	s := openTestStore(t, dir)
	saveAll(t, s, election.HardState{Term: 1})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	saveAll(t, s, election.HardState{Term: 2, VotedFor: "gw1"})
	if hs, err := ReadState(dir); err != nil || hs != (election.HardState{Term: 2, VotedFor: "gw1"}) {
		t.Fatalf("after removing state.json and saving: %+v, %v", hs, err)
	}
	saveAll(t, s, election.HardState{Term: 3})
	if hs, err := ReadState(dir); err != nil || hs != (election.HardState{Term: 3}) {
		t.Fatalf("the save after the recreation: %+v, %v", hs, err)
	}

	gone := filepath.Join(t.TempDir(), "state")
	s = openTestStore(t, gone)
	saveAll(t, s, election.HardState{Term: 1})
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(election.HardState{Term: 2, VotedFor: "gw2"}); err == nil {
		t.Fatal("a save after the state directory was removed returned nil")
	}
}

// TestStateFileMigratesEarlierLayout: a state.json of one JSON object
// (an earlier build's) is read, and the next save replaces it with the
// two-block layout.
func TestStateFileMigratesEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	if err := os.WriteFile(path, []byte(`{"term":7,"voted_for":"gw2"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStore(t, dir)
	if got := s.Load(); got != (election.HardState{Term: 7, VotedFor: "gw2"}) {
		t.Fatalf("loaded %+v from the earlier layout", got)
	}
	saveAll(t, s, election.HardState{Term: 8})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !isBlockLayout(data) {
		t.Fatal("the save did not move state.json to the two-block layout")
	}
	if hs, err := decodeHardState(data); err != nil || hs != (election.HardState{Term: 8}) {
		t.Fatalf("after the save: %+v, %v", hs, err)
	}
}

// TestStateFileSettlesBeforeTheNextSave: Save returns once block B holds
// the state (a restart reads it from there) and leaves block A to Settle;
// the next Save settles the last one first, so that while B is rewritten A
// holds the last save that sent anything, and Close settles too.
func TestStateFileSettlesBeforeTheNextSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	blocks := func() (a, b election.HardState) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !isBlockLayout(data) {
			t.Fatalf("state.json is not in the two-block layout")
		}
		a, errA := decodeBlock(data[:stateBlock], false)
		b, errB := decodeBlock(data[stateBlock:], true)
		if errA != nil || errB != nil {
			t.Fatalf("blocks: %v, %v", errA, errB)
		}
		if hs, err := decodeHardState(data); err != nil || hs != b {
			t.Fatalf("state.json reads as %+v, %v; block B holds %+v", hs, err, b)
		}
		return a, b
	}
	h1, h2, h3, h4 := election.HardState{Term: 1}, election.HardState{Term: 2, VotedFor: "gw1"},
		election.HardState{Term: 3, VotedFor: "gw3"}, election.HardState{Term: 4}
	s := openTestStore(t, dir)
	saveAll(t, s, h1, h2)
	if a, b := blocks(); a != h1 || b != h2 {
		t.Fatalf("after a save without Settle: A %+v, B %+v; want %+v, %+v", a, b, h1, h2)
	}
	saveAll(t, s, h3)
	if a, b := blocks(); a != h2 || b != h3 {
		t.Fatalf("the next save did not settle the last one first: A %+v, B %+v; want %+v, %+v", a, b, h2, h3)
	}
	if err := s.Settle(); err != nil {
		t.Fatal(err)
	}
	if a, b := blocks(); a != h3 || b != h3 {
		t.Fatalf("after Settle: A %+v, B %+v; want %+v in both", a, b, h3)
	}
	saveAll(t, s, h4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a, b := blocks(); a != h4 || b != h4 {
		t.Fatalf("after Close: A %+v, B %+v; want %+v in both", a, b, h4)
	}
}

// tear returns block next written over block prev up to byte n: what a
// power cut during the write can leave (zeroes: a block never written).
func tear(prev, next []byte, n int, zero bool) []byte {
	b := bytes.Clone(prev)
	if zero {
		clear(b[n:])
	}
	copy(b[:n], next[:n])
	return b
}

// TestStateFileSurvivesATornSave: a power cut during a save, whatever it
// tears, leaves either the previous state or the new one, never something
// else, and never a reset; only both blocks damaged refuses to start.
func TestStateFileSurvivesATornSave(t *testing.T) {
	prev := election.HardState{Term: 41, VotedFor: "gw3"}
	next := election.HardState{Term: 42, VotedFor: "gw1"}
	prevA, prevB := encodeBlock(prev, false), encodeBlock(prev, true)
	nextA, nextB := encodeBlock(next, false), encodeBlock(next, true)
	for n := 0; n <= 64; n++ {
		for _, zero := range []bool{false, true} {
			// The cut during the write of B: A holds prev. What B holds is
			// next only if the torn write got all of B's text down.
			tornB := tear(prevB, nextB, n, zero)
			want := prev
			if hs, err := decodeBlock(tornB, true); err == nil {
				if hs != next && hs != prev {
					t.Fatalf("B torn at byte %d (zeroes %v) passed its check as %+v", n, zero, hs)
				}
				want = hs
			}
			checkTorn(t, "B torn", n, zero, append(bytes.Clone(prevA), tornB...), want)
			// The cut during the write of A: B holds next.
			checkTorn(t, "A torn", n, zero, append(tear(prevA, nextA, n, zero), nextB...), next)
		}
	}
	// Both blocks damaged: an error, not a reset.
	bad := append(tear(prevA, nextA, 9, true), tear(prevB, nextB, 9, true)...)
	if hs, err := decodeHardState(bad); err == nil {
		t.Fatalf("both blocks damaged decoded as %+v", hs)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFileName), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStore(dir); err == nil {
		t.Fatal("a store opened on a state file with both blocks damaged")
	}
}

// checkTorn decodes file and wants want.
func checkTorn(t *testing.T, what string, n int, zero bool, file []byte, want election.HardState) {
	t.Helper()
	hs, err := decodeHardState(file)
	if err != nil || hs != want {
		t.Fatalf("%s at byte %d (zeroes %v): decoded %+v, %v; want %+v", what, n, zero, hs, err, want)
	}
}

// FuzzDecodeHardState: no input panics the state file's reader, and what
// it accepts in the two-block layout is what a block says.
func FuzzDecodeHardState(f *testing.F) {
	f.Add(encodeStateFile(election.HardState{Term: 3, VotedFor: "gw1"}))
	f.Add([]byte(`{"term":7,"voted_for":"gw2"}` + "\n"))
	f.Add(append(encodeBlock(election.HardState{Term: 1}, false), encodeBlock(election.HardState{Term: 2}, true)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		hs, err := decodeHardState(data)
		if err != nil || !isBlockLayout(data) {
			return
		}
		a, errA := decodeBlock(data[:stateBlock], false)
		b, errB := decodeBlock(data[stateBlock:], true)
		if (errA != nil || hs != a) && (errB != nil || hs != b) {
			t.Fatalf("decoded %+v, which neither block holds", hs)
		}
	})
}
