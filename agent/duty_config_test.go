package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// TestDutyConfigValidate: a DutyConfig is checked against the agent's
// timing (DutyTiming), each error names its key, and the defaults follow
// from the lease, heartbeat and tick.
func TestDutyConfigValidate(t *testing.T) {
	ac := Config{ID: "a", Group: "g", Members: []election.Member{{ID: "a"}}, StateDir: "/tmp/x", Heartbeat: time.Second}
	if err := ac.Validate(); err != nil {
		t.Fatal(err)
	}
	for key, c := range map[string]DutyConfig{
		"leader.grace:":          {Command: []string{"x"}, Grace: ac.Lease},
		"leader.command:":        {Command: []string{""}},
		"leader.on_elected:":     {OnElected: []string{"", "x"}},
		"leader.hook_timeout:":   {HookTimeout: -1},
		"leader.max_failures:":   {MaxFailures: -1},
		"leader.failure_window:": {FailureWindow: -time.Second},
	} {
		if err := c.Validate(ac); err == nil || !strings.HasPrefix(err.Error(), key) {
			t.Errorf("%s: err = %v", key, err)
		}
	}
	c := DutyConfig{Command: []string{"x"}}
	if err := c.Validate(ac); err != nil {
		t.Fatal(err)
	}
	if c.Grace != ac.Lease-ac.Heartbeat-ac.Tick() || c.HookTimeout != DefaultHookTimeout || c.MaxFailures != DefaultMaxFailures {
		t.Fatalf("defaults: %+v (lease %s)", c, ac.Lease)
	}
}
