package agent

import (
	"fmt"
	"testing"
)

func advisory(name, reason string) []byte {
	return []byte(fmt.Sprintf(`{"type":"io.nats.server.advisory.v1.client_disconnect","server":{"id":"NSRV"},"client":{"id":7,"name":%q},"reason":%q}`, name, reason))
}

func TestParseAdvisoryActsOnlyOnTheClientsOwnClose(t *testing.T) {
	r, ok := parseAdvisory(advisory("edge-agent/site/gw3", "Client Closed"), "site")
	if !ok || r.id != "gw3" || r.conn != "NSRV/7" {
		t.Fatalf("genuine close: %+v %v", r, ok)
	}
	for _, data := range [][]byte{
		advisory("edge-agent/site/gw3", "Read Error"),       // a reset: the client may not know
		advisory("edge-agent/site/gw3", "Stale Connection"), // the server gave up on it
		advisory("edge-agent/site/gw3", "Slow Consumer (Write Deadline)"),
		advisory("edge-agent/other/gw3", "Client Closed"), // another group
		advisory("edge-agent/site/", "Client Closed"),     // no member
		advisory("plc-poller", "Client Closed"),           // not an agent
		[]byte(`{"type":"io.nats.server.advisory.v1.client_connect","client":{"id":7,"name":"edge-agent/site/gw3"},"server":{"id":"N"},"reason":"Client Closed"}`),
		[]byte(`garbage`),
	} {
		if r, ok := parseAdvisory(data, "site"); ok {
			t.Errorf("acted on %s: %+v", data, r)
		}
	}
}
