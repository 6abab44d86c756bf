package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/edge-agent/edge-agent/edge/dutyguard"
)

// TestMain builds the duty guard the tests' duties run under: the
// edge-agent binary, without the race detector, as the agent runs it in
// production. A race-enabled guard (this test binary, which is a guard too:
// it imports package dutyguard) starts and reacts several times slower;
// TestDutyGuardIsOwnExecutable runs that one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == dutyguard.Arg {
		// Started as a guard without its environment: never run the tests
		// again from here (each would start more guards).
		fmt.Fprintln(os.Stderr, "agent test binary started as a duty guard without "+dutyguard.Env)
		os.Exit(3)
	}
	code := func() int {
		if runtime.GOOS != "linux" {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "edge-agent-guard-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "edge-agent")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/edge-agent")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the duty guard: %v\n%s", err, out)
			return 1
		}
		testGuardPath = bin
		return m.Run()
	}()
	os.Exit(code)
}

// testGuardPath is the duty guard of the tests' duties (TestMain), "" for
// the default.
var testGuardPath string

// testDuty is NewDuty with the tests' guard, unless c names one.
func testDuty(c DutyConfig) *Duty {
	if c.GuardPath == "" {
		c.GuardPath = testGuardPath
	}
	return NewDuty(c)
}
