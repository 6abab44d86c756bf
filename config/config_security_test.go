package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-agent/edge-agent/config/configtest"
	"github.com/nats-io/nkeys"
)

// signedYAML writes a seed for gw1 and returns a config that signs, with
// the given extra lines.
func signedYAML(t *testing.T, extra string) (path, seedFile string, keys map[string]string) {
	t.Helper()
	dir := t.TempDir()
	keys = map[string]string{}
	for _, id := range []string{"gw1", "gw2", "ops"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[id], _ = kp.PublicKey()
		if id == "gw1" {
			seed, _ := kp.Seed()
			seedFile = filepath.Join(dir, "gw1.nk")
			if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	path = configtest.Write(t, fmt.Sprintf(`id: gw1
group: g
members: [gw1, gw2]
quorum: none
state_dir: %s
signing_seed: %s
member_keys: {gw1: %s, gw2: %s}
nats: {urls: [nats://127.0.0.1:4222]}
%s`, filepath.Join(dir, "state"), seedFile, keys["gw1"], keys["gw2"], extra))
	return path, seedFile, keys
}

// TestOperatorKeys: operator_keys (file and flag) name the operators'
// tools; bad names, bad keys, a member's key, or operators without signing
// are refused naming the key.
func TestOperatorKeys(t *testing.T) {
	_, _, keys := signedYAML(t, "")
	path, _, _ := signedYAML(t, "operator_keys: {alice: "+keys["ops"]+"}\n")
	rc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Agent.OperatorKeys["alice"] != keys["ops"] {
		t.Fatalf("operator keys %v", rc.Agent.OperatorKeys)
	}
	rc, err = Load([]string{"--config", path, "--operator-keys", "bob=" + keys["ops"]})
	if err != nil || rc.Agent.OperatorKeys["bob"] != keys["ops"] {
		t.Fatalf("--operator-keys: %v %v", rc, err)
	}
	for extra, want := range map[string]string{
		"operator_keys: {\"a b\": " + keys["ops"] + "}\n": "operator_keys",
		"operator_keys: {alice: SUAxyz}\n":                "not an nkey user public key",
	} {
		p, _, _ := signedYAML(t, extra)
		if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", extra, err, want)
		}
	}
	unsigned := configtest.Write(t, "id: gw1\ngroup: g\nmembers: [gw1]\nstate_dir: /tmp/x\nnats: {urls: [nats://127.0.0.1:4222]}\noperator_keys: {alice: "+keys["ops"]+"}\n")
	if _, err := LoadFile(unsigned); err == nil || !strings.Contains(err.Error(), "operator_keys") {
		t.Errorf("operators without signing: %v", err)
	}
}

// TestLooseFileModesAreRefused: a secret file others can read and a config
// others can write are refused by the loader (run and check-config alike),
// naming the key or the file.
func TestLooseFileModesAreRefused(t *testing.T) {
	path, seed, _ := signedYAML(t, "")
	if _, err := LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(seed, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "signing_seed") || !strings.Contains(err.Error(), "others") {
		t.Fatalf("seed 0644: %v", err)
	}
	if err := os.Chmod(seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsKey := filepath.Join(filepath.Dir(seed), "key.pem")
	if err := os.WriteFile(tlsKey, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tlsKey, 0o604); err != nil {
		t.Fatal(err)
	}
	p2, _, _ := signedYAML(t, "")
	if _, err := Load([]string{"--config", p2, "--nats-tls-cert", tlsKey, "--nats-tls-key", tlsKey}); err == nil || !strings.Contains(err.Error(), "--nats-tls-key") {
		t.Fatalf("tls key 0604: %v", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("config 0666: %v", err)
	}
}
