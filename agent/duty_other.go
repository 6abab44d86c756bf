//go:build !linux

package agent

import "syscall"

// dutySysProcAttr puts a duty process in a process group of its own. Without
// Linux's parent-death signal, a duty survives an agent killed with SIGKILL:
// run the agent under a supervisor that kills its process tree.
func dutySysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
