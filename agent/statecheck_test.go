package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckStateDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, note, err string
	}{
		{"exists", dir, "a directory", ""},
		{"missing", filepath.Join(dir, "a", "b"), "does not exist yet: the agent will create it (in " + dir + ",", ""},
		{"a file", file, "", "is not a directory"},
		{"under a file", filepath.Join(file, "x"), "", file + " is not a directory"},
		{"empty", "", "", "a state directory is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note, err := CheckStateDir(tc.dir)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("%v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err %v, want %q", err, tc.err)
			case !strings.Contains(note, tc.note):
				t.Errorf("note %q, want %q", note, tc.note)
			}
		})
	}
	// Checking created nothing.
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("the check created %s: %v", filepath.Join(dir, "a"), err)
	}
}

// TestCheckStateDirOpensAsTheStore: a directory CheckStateDir accepts is one
// the agent opens, and the agent's own files in it pass the check again.
func TestCheckStateDirOpensAsTheStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := CheckStateDir(dir); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := CheckStateDir(dir); err != nil {
		t.Fatalf("after the agent used it: %v", err)
	}
}
