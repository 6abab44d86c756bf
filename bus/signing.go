package bus

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/nats-io/nkeys"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
	"github.com/edge-agent/edge-agent/election"
)

// CheckSigning checks the signing settings of c (a validated agent
// configuration): signing is all or nothing, a readable seed whose public
// key is the one pinned for this member, and a valid pinned key for every
// member. The error names the key, as agent.Config.Validate's do.
func CheckSigning(c agent.Config) error {
	if c.SigningSeedFile == "" {
		if len(c.MemberKeys) > 0 {
			return errors.New("signing_seed: member_keys are set but no signing_seed: give both or neither")
		}
		if len(c.OperatorKeys) > 0 {
			return errors.New("operator_keys: operators sign their requests as members do: give signing_seed and member_keys too")
		}
		return nil
	}
	if err := agent.CheckSecretFile("signing_seed", c.SigningSeedFile); err != nil {
		return err
	}
	seed, err := os.ReadFile(c.SigningSeedFile)
	if err != nil {
		return fmt.Errorf("signing_seed: cannot read %s: %w", c.SigningSeedFile, err)
	}
	for name, k := range c.OperatorKeys {
		if !election.ValidID(name) {
			return fmt.Errorf("operator_keys: %q is not a valid operator name (1-64 of A-Z a-z 0-9 _ -)", name)
		}
		if !nkeys.IsValidPublicUserKey(k) {
			return fmt.Errorf("operator_keys: %q for %q is not an nkey user public key (U...)", k, name)
		}
		for id, mk := range c.MemberKeys {
			if mk == k {
				return fmt.Errorf("operator_keys: %q uses the key of member %q", name, id)
			}
		}
	}
	for id := range c.MemberKeys {
		if !slices.ContainsFunc(c.Members, func(m election.Member) bool { return m.ID == id }) {
			return fmt.Errorf("member_keys: %q is not a member", id)
		}
	}
	for _, m := range c.Members {
		k, ok := c.MemberKeys[m.ID]
		if !ok {
			return fmt.Errorf("member_keys: no public key for member %q", m.ID)
		}
		if !nkeys.IsValidPublicUserKey(k) {
			return fmt.Errorf("member_keys: %q for %q is not an nkey user public key (U...)", k, m.ID)
		}
	}
	if _, err := sign.NewSigning(c.ID, bytes.TrimSpace(seed), c.MemberKeys, 1); err != nil {
		return fmt.Errorf("signing_seed: %s: %w", c.SigningSeedFile, err)
	}
	return nil
}
