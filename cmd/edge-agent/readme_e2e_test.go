package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeSnippet returns the sh block of README.md that follows marker.
func readmeSnippet(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q", marker)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("no sh block after %q", marker)
	}
	s = s[start+len("```sh\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatal("unterminated sh block")
	}
	return s[:end]
}

// TestE2EReadmeOneMachineSite runs README's one-machine site as written
// (go build, three agents, status, curl, transfer, SIGTERM to gw2), with
// bash from the repository's root, in a network namespace of its own (the
// snippet's fixed ports) with a private /tmp (its state directories) and bin/
// (its build): every command must succeed, status with the first leader,
// and gw2 must exit 0 after SIGTERM.
func TestE2EReadmeOneMachineSite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network and mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	snippet := readmeSnippet(t, "To try it on one machine")
	// The checkout may itself be under /tmp (CI clones there): it is bound
	// to a mount point of its own before /tmp is replaced.
	script := `set -eu
ip link set lo up
repo=$PWD
mkdir -p /mnt
mount -t tmpfs tmpfs /mnt
mkdir /mnt/repo
mount --bind "$repo" /mnt/repo
mount -t tmpfs tmpfs /tmp
cd /mnt/repo
mkdir -p bin && mount -t tmpfs tmpfs bin
trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT
` + snippet + `
wait %2
echo "gw2 exited $?"
`
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--mount", "bash", "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README's one-machine site failed: %v\n%s", err, out)
	}
	for _, want := range []string{"group plc: leader ", "3 agent(s) answered", " handed over to gw3 ", "gw2 exited 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
