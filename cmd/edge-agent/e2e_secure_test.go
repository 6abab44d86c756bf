package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestE2ESignedSiteWithMemberAuthorization: an offline site of three
// gateways whose embedded servers admit each member by its nkey, with
// publish rights on its own election subjects only, an operator by its nkey
// on the control subjects, and other clients with the site password but
// never on election or control subjects. Messages are signed. The site
// elects, fails over, and answers the operator's CLI.
func TestE2ESignedSiteWithMemberAuthorization(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	seeds := map[string]string{}
	for _, id := range []string{"gw1", "gw2", "gw3"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		seeds[id] = filepath.Join(dir, id+".nk")
		if err := os.WriteFile(seeds[id], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, id+"="+pub)
	}
	op, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	opSeed, _ := op.Seed()
	opPub, _ := op.PublicKey()
	opFile := filepath.Join(dir, "operator.nk")
	if err := os.WriteFile(opFile, opSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	site, err := harness.NewClusterSite(binary, dir, 3, "--heartbeat", "100ms", "--preemption", "never",
		"--nats-user", "site", "--nats-password", "s3cret", "--member-keys", strings.Join(keys, ","),
		"--operator-keys", "ops="+opPub)
	if err != nil {
		t.Fatal(err)
	}
	clusterArgs := site.MemberArgs
	site.MemberArgs = func(id string) []string { return append(clusterArgs(id), "--signing-seed", seeds[id]) }
	site.Journals = true
	defer site.Stop()
	if err := site.StartAll(); err != nil {
		t.Fatal(err)
	}
	first, err := site.WaitAgreement(site.IDs(), "", 0, 5*time.Millisecond, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// The operator's tool logs in with its key, signs its request and
	// verifies the answers against the members' keys.
	out, err := exec.Command(binary, "status", "--json", "--nats-url", site.ClientURLs["gw1"], "--group", site.Group,
		"--nats-nkey-seed", opFile, "--member-keys", strings.Join(keys, ",")).CombinedOutput()
	if err != nil || strings.Count(string(out), `"id"`) < 3 || strings.Contains(string(out), "could not be verified") {
		t.Fatalf("status with the operator key: %v\n%s", err, out)
	}
	// The site password is not allowed on the control subjects.
	out, err = exec.Command(binary, "status", "--json", "--nats-url", site.ClientURLs["gw1"], "--group", site.Group,
		"--nats-user", "site", "--nats-password", "s3cret").CombinedOutput()
	if err == nil || strings.Contains(string(out), `"id"`) {
		t.Fatalf("status with the site password answered: %v\n%s", err, out)
	}
	// But the site password does not let a client speak on election subjects.
	errs := make(chan error, 1)
	nc, err := nats.Connect(site.ClientURLs["gw1"], nats.UserInfo("site", "s3cret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.Publish(wire.BroadcastSubject(agent.DefaultSubjectPrefix, site.Group, "gw3"), []byte(`{"v":1}`))
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("got %v, want a permissions violation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a site client published on an election subject")
	}

	// Signed messages flow: kill the leader, the others take over.
	if err := site.Kill(first.Leader); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, id := range site.IDs() {
		if id != first.Leader {
			survivors = append(survivors, id)
		}
	}
	if _, err := site.WaitAgreement(survivors, first.Leader, first.Term, 2*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
