package edge

import (
	"sort"

	"github.com/nats-io/nats-server/v2/server"
)

// MemberPermissions returns the bus permissions of member id of group: it
// may publish only on the election subjects that carry its own id as sender
// (prefix.group.el.<id> and prefix.group.el.<id>.<to>), on the group's
// control subjects and on reply inboxes, and subscribe to its group and to
// inboxes. So a member cannot speak for another one, and receivers check
// that the sender in the subject is the sender in the payload.
func MemberPermissions(prefix, group, id string) *server.Permissions {
	base := prefix + "." + group
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			base + ".el." + id,
			base + ".el." + id + ".*",
			base + ".ctl.>",
			"_INBOX.>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{base + ".>", "_INBOX.>"}},
	}
}

// BusClientPermissions returns the permissions of any other client of the
// site bus (a PLC poller, the leader's duty): everything except publishing
// on the election subjects under prefix. Unless control is true, the
// control subjects (status, resign, transfer, events) are closed to it both
// ways: it can neither send requests nor receive them (and so cannot answer
// them), and it neither publishes nor reads events. Operators' tools log in
// with their own keys instead (OperatorPermissions).
func BusClientPermissions(prefix string, control bool) *server.Permissions {
	deny := []string{prefix + ".*.el.>"}
	var denySub []string
	if !control {
		deny = append(deny, prefix+".*.ctl.>")
		denySub = []string{prefix + ".*.ctl.>"}
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: denySub},
	}
}

// OperatorPermissions returns the permissions of an operator's tool of
// group (edge-agent status, resign, transfer, watch): it may send control
// requests and read their answers and the group's events, and read the
// election traffic, but publish nothing else under prefix.
func OperatorPermissions(prefix, group string) *server.Permissions {
	base := prefix + "." + group
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			base + ".ctl.status", base + ".ctl.resign", base + ".ctl.transfer",
			base + ".ctl.drain", base + ".ctl.undrain", "_INBOX.>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{base + ".ctl.events", base + ".el.>", "_INBOX.>"}},
	}
}

// OperatorUsers returns one nkey user per operator key with
// OperatorPermissions, in account acc (nil: the global account).
func OperatorUsers(prefix, group string, keys map[string]string, acc *server.Account) []*server.NkeyUser {
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	sort.Strings(names)
	users := make([]*server.NkeyUser, 0, len(names))
	for _, name := range names {
		users = append(users, &server.NkeyUser{Nkey: keys[name], Permissions: OperatorPermissions(prefix, group), Account: acc})
	}
	return users
}

// MemberUsers returns one nkey user per member, keyed by its pinned public
// key, with MemberPermissions, in account acc (nil: the global account).
func MemberUsers(prefix, group string, keys map[string]string, acc *server.Account) []*server.NkeyUser {
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	users := make([]*server.NkeyUser, 0, len(ids))
	for _, id := range ids {
		users = append(users, &server.NkeyUser{Nkey: keys[id], Permissions: MemberPermissions(prefix, group, id), Account: acc})
	}
	return users
}
