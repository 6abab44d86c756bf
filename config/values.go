package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/duty"
	"github.com/edge-agent/edge-agent/edge"
	"github.com/edge-agent/edge-agent/election"
)

// value is where a setting's value goes: set parses it from text (a flag,
// or a scalar of the file) into its field. Its error does not name the key:
// the loader prefixes where the value came from.
type value interface {
	set(s string) error
}

// nodeValue is a value that the file may also give as a list or a mapping;
// setNode takes such a node. Its errors are *nodeError, naming the node at
// fault, so that the loader can give its line.
type nodeValue interface {
	value
	setNode(n *yaml.Node) error
}

// nodeError is a mistake in one node of the file.
type nodeError struct {
	n   *yaml.Node
	msg string
}

func (e *nodeError) Error() string { return e.msg }

func nodeErrorf(n *yaml.Node, format string, args ...any) *nodeError {
	return &nodeError{n: n, msg: fmt.Sprintf(format, args...)}
}

// setter is a value made of a function.
type setter func(s string) error

func (f setter) set(s string) error { return f(s) }

// text sets a string as given.
func text(p *string) value { return setter(func(s string) error { *p = s; return nil }) }

// trimmed sets a string without its surrounding white space.
func trimmed(p *string) value {
	return setter(func(s string) error { *p = strings.TrimSpace(s); return nil })
}

// oneOf sets a string that must be one of choices.
func oneOf(p *string, choices ...string) value {
	return setter(func(s string) error {
		for _, c := range choices {
			if s == c {
				*p = s
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", s, strings.Join(choices, ", "))
	})
}

// integer sets an int.
func integer(p *int) value {
	return setter(func(s string) error {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = n
		return nil
	})
}

// port sets a port number, 0 meaning off.
func port(p *int) value {
	return setter(func(s string) error {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%q is not a port 0..65535 (0 turns monitoring off)", s)
		}
		*p = n
		return nil
	})
}

// duration sets a Go duration.
func duration(p *time.Duration) value {
	return setter(func(s string) error {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 1s, 500ms, 2m)", s)
		}
		*p = d
		return nil
	})
}

// hostPort sets a host:port address; the words in also (say "" or "off")
// are taken as they are.
func hostPort(p *string, also ...string) value {
	return setter(func(s string) error {
		for _, a := range also {
			if s == a {
				*p = s
				return nil
			}
		}
		if err := checkHostPort(s); err != nil {
			return err
		}
		*p = s
		return nil
	})
}

// boolean is a bool value; "--flag" alone sets it. With negate it stores
// the opposite (fast_failover sets DisableFastFailover).
type boolean struct {
	p      *bool
	negate bool
}

func (b boolean) set(s string) error {
	v, err := parseBool(s)
	*b.p = v != b.negate
	return err
}

// isBool tells the flag set that "--flag" alone is allowed.
func (boolean) isBool() bool { return true }

// parseBool parses true or false, also spelt as strconv.ParseBool accepts
// or as YAML 1.1 did (yes/no, on/off).
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "on":
		return true, nil
	case "no", "off":
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean (true or false)", s)
	}
	return b, nil
}

// quorum sets the quorum: an integer, or "none" for island mode.
type quorum struct{ c *agent.Config }

func (q quorum) set(s string) error {
	s = strings.TrimSpace(s)
	if s == "none" {
		q.c.Quorum, q.c.IslandMode = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer or none", s)
	}
	q.c.Quorum, q.c.IslandMode = n, false
	return nil
}

// members sets the member list: "a,b=10,c" as text; in the file also a
// list of {id, priority} mappings or "id[=priority]" strings.
type members struct{ p *[]election.Member }

func (m members) set(s string) error {
	ms, err := parseMemberList(s)
	if err != nil {
		return err
	}
	*m.p = ms
	return nil
}

func (m members) setNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return nodeErrorf(n, "must be a list of {id, priority} or a string \"a,b=10,c\", not a %s", kindName(n))
	}
	ms := make([]election.Member, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		var mb election.Member
		var err error
		switch item.Kind {
		case yaml.ScalarNode:
			if mb, err = parseMember(strings.TrimSpace(item.Value)); err != nil {
				return nodeErrorf(item, "%v", err)
			}
		case yaml.MappingNode:
			if mb, err = memberFromMap(item); err != nil {
				return err
			}
		default:
			return nodeErrorf(item, "each member must be {id: ID, priority: N} or \"ID=N\", not a %s", kindName(item))
		}
		ms = append(ms, mb)
	}
	*m.p = ms
	return nil
}

// memberFromMap reads one {id, priority} mapping of `members:`.
func memberFromMap(n *yaml.Node) (election.Member, error) {
	var m election.Member
	hasID := false
	var prio *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if v.Kind != yaml.ScalarNode {
			return m, nodeErrorf(v, "%s must be a single value, not a %s", k.Value, kindName(v))
		}
		switch k.Value {
		case "id":
			m.ID, hasID = v.Value, true
		case "priority":
			prio = v
		default:
			return m, nodeErrorf(k, "field %s not found in a member (a member takes id, priority)", k.Value)
		}
	}
	if !hasID {
		return m, nodeErrorf(n, "a member has no id")
	}
	if prio != nil && prio.Tag != "!!null" {
		p, err := parsePriority(prio.Value)
		if err != nil {
			return m, nodeErrorf(prio, "member %q: %v", m.ID, err)
		}
		m.Priority = p
	}
	return m, nil
}

// parseMemberList parses "a,b=10,c": member ids, each with an optional
// =priority (default 0). An empty string gives no members.
func parseMemberList(s string) ([]election.Member, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ms []election.Member
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q: empty member between commas", s)
		}
		m, err := parseMember(part)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// parseMember parses "id" or "id=priority". The id itself is checked by
// agent.Config.Validate.
func parseMember(s string) (election.Member, error) {
	id, prio, hasPrio := strings.Cut(s, "=")
	m := election.Member{ID: strings.TrimSpace(id)}
	if !hasPrio {
		return m, nil
	}
	p, err := parsePriority(prio)
	if err != nil {
		return m, fmt.Errorf("%q: %v", s, err)
	}
	m.Priority = p
	return m, nil
}

// parsePriority parses a member priority and checks its range.
func parsePriority(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("priority must be an integer")
	}
	if p < minPriority || p > maxPriority {
		return 0, fmt.Errorf("priority %d is outside %d..%d", p, minPriority, maxPriority)
	}
	return p, nil
}

// idList sets a list of member ids: "a,b" as text; in the file also a list
// of strings. The ids themselves are checked by agent.Config.Validate.
type idList struct{ p *[]string }

func (l idList) set(s string) error {
	if strings.TrimSpace(s) == "" {
		*l.p = nil
		return nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return fmt.Errorf("%q: empty member id between commas", s)
		}
		out = append(out, v)
	}
	*l.p = out
	return nil
}

func (l idList) setNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return nodeErrorf(n, "must be a list of member ids or a string \"a,b\", not a %s", kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return nodeErrorf(item, "each member id must be a string, not a %s", kindName(item))
		}
		out = append(out, strings.TrimSpace(item.Value))
	}
	*l.p = out
	return nil
}

// urls sets a list of URLs, each checked: "A[,B...]" as text; in the file
// also a list. item names an element in the error about an empty one.
type urls struct {
	p     *[]string
	check func(string) error
	item  string
}

func (u urls) set(s string) error {
	if strings.TrimSpace(s) == "" {
		*u.p = nil
		return nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return fmt.Errorf("%q: empty %s between commas", strings.Join(edge.RedactURLs(strings.Split(s, ",")), ","), u.item)
		}
		if err := u.check(v); err != nil {
			return err
		}
		out = append(out, v)
	}
	*u.p = out
	return nil
}

func (u urls) setNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return nodeErrorf(n, "must be a list of URLs, not a %s", kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return nodeErrorf(item, "each URL must be a string, not a %s", kindName(item))
		}
		v := strings.TrimSpace(item.Value)
		if err := u.check(v); err != nil {
			return nodeErrorf(item, "%v", err)
		}
		out = append(out, v)
	}
	*u.p = out
	return nil
}

// checkNATSURL checks that s is a nats:// or tls:// URL with a host and, if
// given, a numeric port.
func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	shown := edge.RedactURL(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", shown)
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return fmt.Errorf("%q: the scheme must be nats:// or tls://", shown)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", shown)
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("%q: port %q is not a number 0..65535", shown, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: empty port", shown)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a NATS URL has no path, query or fragment", shown)
	}
	return nil
}

func checkRouteURL(s string) error { _, err := edge.ParseRouteURL(s); return err }

func checkLeafURL(s string) error { _, err := edge.ParseLeafURL(s); return err }

// checkHostPort checks that s is host:port with a numeric port (the host may
// be empty, meaning every interface).
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:9180)", s)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number 0..65535", s, port)
	}
	return nil
}

// pushURL sets the Pushgateway URL, checked unless empty.
func pushURL(p *string) value {
	return setter(func(s string) error {
		s = strings.TrimSpace(s)
		if s != "" {
			if err := edge.CheckPushURL(s); err != nil {
				return err
			}
		}
		*p = s
		return nil
	})
}

// keyMap sets a map of names to nkey public keys (member_keys,
// operator_keys): "NAME=KEY,..." as text; in the file also a mapping.
// name is what the map's keys are ("ID", "NAME").
type keyMap struct {
	p    *map[string]string
	name string
}

func (k keyMap) set(s string) error {
	keys, err := agent.ParseMemberKeys(s)
	*k.p = keys
	return err
}

func (k keyMap) setNode(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return nodeErrorf(n, "must map %ss to public keys, not be a %s", strings.ToLower(k.name), kindName(n))
	}
	keys := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Value == "" {
			return nodeErrorf(kn, "each entry must be %s: PUBLIC_KEY", k.name)
		}
		keys[kn.Value] = strings.TrimSpace(v.Value)
	}
	*k.p = keys
	return nil
}

// strList sets a list of strings: a YAML flow list (["prog", "arg with
// spaces"]) or words split at white space (no quoting). As a command
// (argv) its first element, the program, may not be empty.
type strList struct {
	p    *[]string
	argv bool
}

func (l strList) set(s string) error {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") {
		*l.p = strings.Fields(s)
		if len(*l.p) == 0 && l.argv {
			*l.p = nil
		}
		return nil
	}
	var list []string
	if err := yaml.Unmarshal([]byte(s), &list); err != nil {
		return fmt.Errorf("%q is not a list of strings", s)
	}
	if l.argv && len(list) > 0 && list[0] == "" {
		return fmt.Errorf("%q: the program (first element) is empty", s)
	}
	*l.p = list
	return nil
}

func (l strList) setNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		if l.argv {
			return nodeErrorf(n, "must be a list [program, args...] or a string, not a %s", kindName(n))
		}
		return nodeErrorf(n, "must be a list of KEY=VALUE or KEY, not a %s", kindName(n))
	}
	list := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return nodeErrorf(item, "each element must be a string, not a %s", kindName(item))
		}
		list = append(list, item.Value)
	}
	if l.argv && len(list) > 0 && list[0] == "" {
		return nodeErrorf(n, "the program (first element) is empty")
	}
	*l.p = list
	return nil
}

// resolve follows YAML aliases (*name) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// kindName names a node's kind for error messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// vipList sets leader.vip: a flag or scalar "ADDR/LEN@IFACE[,...]", or in
// the file a list of {address, interface} mappings or such strings.
type vipList struct{ p *[]agent.VIP }

func (l vipList) set(s string) error {
	if strings.TrimSpace(s) == "" {
		*l.p = nil
		return nil
	}
	var out []agent.VIP
	for _, item := range strings.Split(s, ",") {
		v, err := duty.ParseVIP(item)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	*l.p = out
	return nil
}

func (l vipList) setNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return nodeErrorf(n, "must be a list of {address, interface} or a string \"192.0.2.10/24@eth0\", not a %s", kindName(n))
	}
	out := make([]agent.VIP, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		var v agent.VIP
		var err error
		switch item.Kind {
		case yaml.ScalarNode:
			if v, err = duty.ParseVIP(item.Value); err != nil {
				return nodeErrorf(item, "%v", err)
			}
		case yaml.MappingNode:
			if v, err = vipFromMap(item); err != nil {
				return err
			}
		default:
			return nodeErrorf(item, "each virtual IP must be {address: 192.0.2.10/24, interface: eth0}, not a %s", kindName(item))
		}
		out = append(out, v)
	}
	*l.p = out
	return nil
}

// vipFromMap reads one {address, interface} mapping of leader.vip.
func vipFromMap(n *yaml.Node) (agent.VIP, error) {
	var addr, iface *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if v.Kind != yaml.ScalarNode {
			return agent.VIP{}, nodeErrorf(v, "%s must be a single value, not a %s", k.Value, kindName(v))
		}
		switch k.Value {
		case "address":
			addr = v
		case "interface":
			iface = v
		default:
			return agent.VIP{}, nodeErrorf(k, "field %s not found in a virtual IP (it takes address, interface)", k.Value)
		}
	}
	if addr == nil || iface == nil {
		return agent.VIP{}, nodeErrorf(n, "a virtual IP needs both address and interface")
	}
	v, err := duty.NewVIP(addr.Value, iface.Value)
	if err != nil {
		return agent.VIP{}, nodeErrorf(addr, "%v", err)
	}
	return v, nil
}
