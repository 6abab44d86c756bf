package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// qemuAarch64 returns the qemu user-mode emulator for arm64 binaries:
// $EDGE_AGENT_QEMU (which .ci/run sets after installing qemu-user-static),
// else qemu-aarch64-static or qemu-aarch64 from PATH, else "".
func qemuAarch64() string {
	if q := os.Getenv("EDGE_AGENT_QEMU"); q != "" {
		return q
	}
	for _, name := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// buildArm64 cross-compiles the static linux/arm64 binary, as make
// build-arm64 does.
func buildArm64(t *testing.T, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(dir, "edge-agent-linux-arm64")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=e2e-arm64", "-o", out, ".")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build arm64: %v\n%s", err, b)
	}
	return out
}

// TestE2EArm64AgentWithAmd64Agents runs the arm64 binary under qemu: its
// version, then as one gateway of a clustered offline site whose other two
// gateways run the host's binary. The arm64 gateway (highest priority) leads
// (elected, or handed the lead if the amd64 pair settled first), its crash
// hands the lead to an amd64 gateway, and it rejoins as a follower. It skips only where no qemu is installed, and never in CI.
func TestE2EArm64AgentWithAmd64Agents(t *testing.T) {
	qemu := qemuAarch64()
	if qemu == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no qemu-aarch64(-static): .ci/run installs qemu-user-static")
		}
		t.Skip("no qemu-aarch64(-static) on PATH (apt-get install qemu-user-static)")
	}
	dir := t.TempDir()
	arm := buildArm64(t, dir)
	out, err := exec.Command(qemu, arm, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "linux/arm64") {
		t.Fatalf("%s %s version: %v\n%s", qemu, arm, err, out)
	}
	t.Logf("qemu: %s", strings.TrimSpace(string(out)))

	// H = 200 ms: the emulated gateway runs several times slower.
	site, err := harness.NewClusterSite(binary, dir, 3, "--heartbeat", "200ms", "--preemption", "never")
	if err != nil {
		t.Fatal(err)
	}
	site.Command = func(id string) []string {
		if id == "gw3" {
			return []string{qemu, arm}
		}
		return []string{binary}
	}
	defer site.Stop()
	// The emulated gateway starts first: it is the slowest to come up.
	for _, id := range []string{"gw3", "gw1", "gw2"} {
		if _, err := site.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 10*time.Millisecond, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; first.Leader != "gw3" && attempt < 3; attempt++ {
		// On a loaded machine the amd64 pair can settle before the
		// emulated gateway is heard; hand it the lead, as an operator would.
		out, err := exec.Command(binary, "transfer", "gw3", "--nats-url", site.ClientURLs["gw1"], "--group", site.Group).CombinedOutput()
		if err != nil {
			t.Fatalf("transfer gw3: %v\n%s", err, out)
		}
		if first, err = site.WaitAgreement(site.IDs(), first.Leader, first.Term, 10*time.Millisecond, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if first.Leader != "gw3" {
		t.Fatalf("leader %s, want the arm64 gateway gw3", first.Leader)
	}
	st, err := site.Proc("gw3").Status(t.Context())
	if err != nil || st.Version != "e2e-arm64" {
		t.Fatalf("gw3 status: version %q, %v; want the arm64 build", st.Version, err)
	}

	if err := site.Kill("gw3"); err != nil {
		t.Fatal(err)
	}
	second, err := site.WaitAgreement([]string{"gw1", "gw2"}, "gw3", first.Term, 5*time.Millisecond, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second.Leader != "gw2" {
		t.Fatalf("after the arm64 leader crashed: %+v, want gw2", second)
	}
	if _, err := site.Start("gw3"); err != nil {
		t.Fatal(err)
	}
	if third, err := site.WaitAgreement(site.IDs(), "", second.Term-1, 10*time.Millisecond, 60*time.Second); err != nil || third.Leader != "gw2" {
		t.Fatalf("after the arm64 gateway rejoined: %+v, %v; want gw2 still leading", third, err)
	}
}
