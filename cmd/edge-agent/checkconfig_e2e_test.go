package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestE2ECheckConfigAsServiceUser runs the built binary's check-config as
// an unprivileged user (nobody), as an operator checks a gateway's config
// as the service user: a state_dir in a directory that user cannot write
// is refused with exit 2, naming state_dir and the directory; one the user
// owns passes. As root, run refuses the packaged placeholder id and starts
// nothing. Needs root (to switch users), as CI has.
func TestE2ECheckConfigAsServiceUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run check-config as another user; CI runs as root")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "edge-agent-checkconfig-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	// The binary, the config and the directories must be reachable by nobody.
	bin := filepath.Join(base, "edge-agent")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	rootOnly := filepath.Join(base, "root-only") // 0755 root: nobody cannot create in it
	own := filepath.Join(base, "own")            // nobody's own
	for _, d := range []string{rootOnly, own} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(own, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	checkAs := func(stateDir string) (int, string) {
		path := filepath.Join(base, "edge-agent-"+filepath.Base(stateDir)+".yaml")
		yaml := "id: gw1\ngroup: site\nmembers: gw1,gw2,gw3\nstate_dir: " + stateDir + "\nnats: {urls: [nats://127.0.0.1:4222]}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "check-config", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	target := filepath.Join(rootOnly, "edge-agent")
	code, out := checkAs(target)
	if code != 2 || !strings.Contains(out, "state_dir: "+target+" does not exist and cannot be created by") ||
		!strings.Contains(out, rootOnly+" is not writable by") {
		t.Errorf("state_dir under a root-owned directory, as nobody: exit %d, %q; want 2 naming state_dir and %s", code, out, rootOnly)
	}
	if code, out := checkAs(rootOnly); code != 2 || !strings.Contains(out, "state_dir: "+rootOnly+" is not readable, writable and searchable by") {
		t.Errorf("a root-owned state_dir, as nobody: exit %d, %q; want 2", code, out)
	}
	if code, out := checkAs(own); code != 0 || !strings.Contains(out, "state_dir "+own+": a directory") {
		t.Errorf("nobody's own state_dir: exit %d, %q; want 0", code, out)
	}

	// run refuses the packaged config's placeholder id, creating nothing.
	shipped, err := os.ReadFile("../../deploy/arm64/edge-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(base, "never-created")
	cfg := filepath.Join(base, "shipped.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(shipped), "state_dir: /var/lib/edge-agent", "state_dir: "+stateDir, 1)), 0o640); err != nil {
		t.Fatal(err)
	}
	runOut, err := exec.Command(bin, "run", "--config", cfg, "--http-addr", "off").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(runOut), `id: "CHANGE-ME" is the packaged placeholder`) {
		t.Errorf("run with the packaged config: %v, %q; want exit 2 and the placeholder message", err, runOut)
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("run created %s (%v)", stateDir, err)
	}
}
