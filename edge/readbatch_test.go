package edge

import (
	"github.com/nats-io/nats.go"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// A paced connection starts its reads at least d apart, so that what
// arrives meanwhile is read in one go; the first read, and a read after one
// that filled the buffer (a backlog), do not wait.
func TestPacedConnReadsInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 5 * time.Millisecond
		client, server := net.Pipe()
		defer client.Close()
		defer server.Close()
		pc := &pacedConn{Conn: client, d: d}
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			// Each 1 ms after the last was read (a pipe's write waits
			// for its reader).
			for _, m := range []string{"a", "b", "123456", "c"} {
				if _, err := server.Write([]byte(m)); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		start := time.Now()
		type read struct {
			at   time.Duration
			data string
		}
		var got []read
		for _, size := range []int{4, 4, 4, 4, 4} {
			b := make([]byte, size)
			n, err := pc.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, read{time.Since(start), string(b[:n])})
		}
		// net.Pipe hands over one write per read at most, so the batch
		// shows as the time a read starts: 0, then d after the first,
		// then d after that; "123456" fills a 4-byte buffer, so its rest
		// is read at once; then d later.
		want := []read{{0, "a"}, {d, "b"}, {2 * d, "1234"}, {2 * d, "56"}, {3 * d, "c"}}
		if len(got) != len(want) {
			t.Fatalf("reads %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("read %d: %+v, want %+v (all: %v)", i, got[i], want[i], got)
			}
		}
	})
}

// A client reading in batches connects over TLS (verified against the
// site's CA) and with a password, and its messages flow both ways; without
// a batch no option is added (the client's own dialer is used).
func TestReadBatchOverTLS(t *testing.T) {
	if n := len(ReadBatch(0)); n != 0 {
		t.Errorf("read batch 0: %d options, want none", n)
	}
	pki := newTestPKI(t)
	s := startTestServer(t, EmbeddedConfig{
		Auth: ClientAuth{User: "site", Password: "s3cret"},
		TLS:  TLSFiles{Cert: pki.cert, Key: pki.key},
	})
	opts := append([]nats.Option{nats.UserInfo("site", "s3cret"), nats.RootCAs(pki.ca)}, ReadBatch(5*time.Millisecond)...)
	paced, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("TLS client reading in batches: %v", err)
	}
	defer paced.Close()
	if _, err := paced.TLSConnectionState(); err != nil {
		t.Errorf("the paced client is not on TLS: %v", err)
	}
	other, err := nats.Connect(s.ClientURL(), nats.UserInfo("site", "s3cret"), nats.RootCAs(pki.ca))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	awaitDelivery(t, other, paced, "to.paced")
	awaitDelivery(t, paced, other, "from.paced")
}
