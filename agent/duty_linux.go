package agent

import "syscall"

// dutySysProcAttr puts a duty process in a process group of its own (so the
// whole group can be signalled) and has the kernel SIGKILL it if the agent
// dies: a SIGKILLed agent must not leave a duty running that a successor
// would start again. Pdeathsig reaches the direct child only; systemd
// (KillMode=mixed) kills what is left of the unit's cgroup.
func dutySysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
