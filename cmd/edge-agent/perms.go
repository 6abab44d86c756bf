package main

import (
	"fmt"
	"os"

	"github.com/edge-agent/edge-agent/agent"
)

// File permissions. The config file names the leader duty, which the agent
// runs: one that others can write lets anyone on the gateway choose what the
// agent runs. Seeds, private keys and creds files are secrets: one that
// others can read lets anyone on the gateway speak as this member. Both are
// refused, by run and by check-config, naming the setting.

// checkConfigFileMode refuses a config file that others can write.
func checkConfigFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // reading it reports the error
	}
	if m := fi.Mode().Perm(); m&0o002 != 0 {
		return &configError{msg: fmt.Sprintf("config %s: writable by others (mode %04o): anyone on the gateway could change the leader duty the agent runs; chmod o-w %s", path, m, path)}
	}
	return nil
}

// secretFiles returns the files of rc that hold secrets, by key.
func (rc *runConfig) secretFiles() [][2]string {
	var out [][2]string
	add := func(key, path string) {
		if path != "" {
			out = append(out, [2]string{key, path})
		}
	}
	add("signing_seed", rc.Agent.SigningSeedFile)
	c := rc.NATSClient
	add("nats.creds", c.Creds)
	add("nats.nkey_seed", c.NKeySeed)
	add("nats.tls.key", c.TLS.Key)
	add("nats.system_creds", rc.SystemCreds)
	if cl := rc.NATSCluster; cl != nil {
		add("nats.cluster.tls.key", cl.TLS.Key)
	}
	if lf := rc.NATSLeafNode; lf != nil {
		add("nats.leafnode.creds", lf.Credentials)
		add("nats.leafnode.tls.key", lf.TLS.Key)
	}
	return out
}

// checkSecretFiles refuses a secret file of rc that others can read or
// write. A file that is missing is left to the checks that read it.
func (l *loader) checkSecretFiles(rc *runConfig) error {
	for _, f := range rc.secretFiles() {
		fi, err := os.Stat(f[1])
		if err != nil {
			continue
		}
		if err := agent.CheckSecretFile(f[0], f[1]); err != nil {
			return l.errorf(f[0], "%s is readable or writable by others (mode %04o): it holds a secret; chmod o-rwx %s", f[1], fi.Mode().Perm(), f[1])
		}
	}
	return nil
}
