package duty

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/edge-agent/edge-agent/edge/dutyguard"
)

// dutyPassEnv are the variables of the agent's own environment that the duty
// command and the hooks get, besides the LC_* locale variables: what a
// program needs to find its tools, its home and its locale. Nothing else of
// the agent's environment reaches them (systemd's NOTIFY_SOCKET and
// WATCHDOG_*, credentials, the agent's own settings); Config.Env adds to
// it. README.md documents the list: keep the two the same.
var dutyPassEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR"}

// defaultPath is the duty's PATH when the agent has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// agentOnlyEnv are variables that belong to the agent's process alone: the
// systemd service protocol (a duty that could send READY=1 or WATCHDOG=1
// for the agent would mask its failures) and the guard's marker.
var agentOnlyEnv = []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", dutyguard.Env}

func passed(key string) bool {
	if strings.HasPrefix(key, "LC_") {
		return true
	}
	for _, k := range dutyPassEnv {
		if k == key {
			return true
		}
	}
	return false
}

// checkDutyEnv checks Config.Env: KEY=VALUE or KEY, never a variable
// that is the agent's alone or that the agent sets itself.
func checkDutyEnv(env []string) error {
	for _, e := range env {
		key, _, _ := strings.Cut(e, "=")
		switch {
		case key == "" || strings.ContainsAny(key, " \t\n\x00") || strings.ContainsRune(e, 0):
			return fmt.Errorf("leader.env: %q is not KEY=VALUE or KEY", e)
		case strings.HasPrefix(key, "EDGE_ELECTION_"):
			return fmt.Errorf("leader.env: %s is set by the agent itself", key)
		}
		for _, k := range agentOnlyEnv {
			if key == k {
				return fmt.Errorf("leader.env: %s belongs to the agent's own process and is never passed to the duty", key)
			}
		}
	}
	return nil
}

// dutyEnv builds the environment of the duty command and the hooks from the
// agent's own (environ): the variables of dutyPassEnv and LC_*, a PATH if
// it had none, then extra (KEY=VALUE sets, a bare KEY passes the agent's
// value if it has one), then the EDGE_ELECTION_* variables. Later entries
// win, and each key appears once.
func dutyEnv(environ, extra []string, id, group string, term uint64, event string) []string {
	var env []string
	set := func(kv string) {
		key, _, _ := strings.Cut(kv, "=")
		for i, old := range env {
			if k, _, _ := strings.Cut(old, "="); k == key {
				env[i] = kv
				return
			}
		}
		env = append(env, kv)
	}
	lookup := func(key string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
				return v, true
			}
		}
		return "", false
	}
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && passed(k) {
			set(kv)
		}
	}
	if _, ok := lookup("PATH"); !ok {
		set("PATH=" + defaultPath)
	}
	for _, e := range extra {
		if strings.Contains(e, "=") {
			set(e)
		} else if v, ok := lookup(e); ok {
			set(e + "=" + v)
		}
	}
	set(EnvElectionID + "=" + id)
	set(EnvElectionGroup + "=" + group)
	set(EnvElectionTerm + "=" + strconv.FormatUint(term, 10))
	if event != "" {
		set(EnvElectionEvent + "=" + event)
	}
	return env
}

func (d *Duty) env(term uint64, event string) []string {
	return dutyEnv(os.Environ(), d.cfg.Env, d.host.ID, d.host.Group, term, event)
}
