package harness

import (
	"fmt"
	"strings"
)

// NewClusterSite prepares a site of n members gw1..gwN with priorities 1..n
// where every agent runs its own embedded nats-server on loopback, clustered
// with the others' through routes: no shared server, as at an offline site.
// Each member keeps its client and route ports across restarts, so a
// restarted gateway rejoins the cluster. Its agent reaches its own server
// in-process and lists the other members' servers for failover.
func NewClusterSite(bin, dir string, n int, args ...string) (*Site, error) {
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	s := NewSite(bin, "", dir, n, args...)
	ids := s.IDs()
	client, routes := map[string]string{}, make([]string, 0, n)
	s.ClientURLs = map[string]string{}
	for i, id := range ids {
		client[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i])
		s.ClientURLs[id] = "nats://" + client[id]
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[2*i+1]))
	}
	s.MemberArgs = func(id string) []string {
		var peers []string
		for _, other := range ids {
			if other != id {
				peers = append(peers, s.ClientURLs[other])
			}
		}
		i := indexOf(ids, id)
		return []string{
			"--embedded-nats", "--nats-listen", client[id],
			"--nats-cluster-name", s.Group,
			"--nats-cluster-listen", strings.TrimPrefix(routes[i], "nats-route://"),
			// Every member gets the same list, its own route included, as
			// the gateways of a site get the same config file.
			"--nats-cluster-routes", strings.Join(routes, ","),
			"--nats-url", strings.Join(peers, ","),
		}
	}
	return s, nil
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}
