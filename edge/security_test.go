package edge

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// TestLimitedHandlerSuppressesRepeatsWithACount: a warning repeated
// thousands of times gives LogBurst lines, and the next line written of it
// carries the count of those left out; other messages and info lines pass.
func TestLimitedHandlerSuppressesRepeatsWithACount(t *testing.T) {
	var buf bytes.Buffer
	h := NewLimitedHandler(slog.NewTextHandler(&buf, nil))
	log := slog.New(h).With("id", "gw1")
	for i := 0; i < 5000; i++ {
		log.Error("permissions violation", "subject", i)
		log.Info("leader changed")
	}
	log.Warn("another message")
	out := buf.String()
	if n := strings.Count(out, "permissions violation"); n != LogBurst {
		t.Fatalf("%d lines of the repeated error, want %d", n, LogBurst)
	}
	if n := strings.Count(out, "leader changed"); n != 5000 {
		t.Fatalf("%d info lines, want all 5000", n)
	}
	if !strings.Contains(out, "another message") {
		t.Fatal("another message was suppressed")
	}
	// Time passes: the next line says how many were left out.
	h.lim.start = h.lim.start.Add(-LogEvery)
	log.Error("permissions violation", "subject", "last")
	if !strings.Contains(buf.String(), "suppressed="+"4990") {
		t.Fatalf("no count of the suppressed lines:\n%s", buf.String()[len(out):])
	}
}

// TestServerLogIsRateLimitedPerFormat: the embedded server's lines of one
// format (a client's permissions violations) are limited the same way.
func TestServerLogIsRateLimitedPerFormat(t *testing.T) {
	var buf bytes.Buffer
	s := newServerLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for i := 0; i < 1000; i++ {
		s.Errorf("%s - Publish Violation - Subject %q", "cid:7", i)
	}
	if n := strings.Count(buf.String(), "Publish Violation"); n != LogBurst {
		t.Fatalf("%d lines, want %d", n, LogBurst)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://site:s3cret@gw1:4222":      "nats://site:xxxxx@gw1:4222",
		"https://pg:s3cret@push:9091/x":    "https://pg:xxxxx@push:9091/x",
		"nats://gw1:4222":                  "nats://gw1:4222",
		"nats://site:s3cret@gw1:99999999":  "nats://site:xxxxx@gw1:99999999",
		"nats://us er:s3cret@gw1:bad port": "nats://xxxxx@gw1:bad port",
	} {
		got := RedactURL(in)
		if strings.Contains(got, "s3cret") || (want != "" && got != want) {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSiteCredentialHasNoControlSubjects: with member keys, the embedded
// server lets the site credential neither send control requests nor read
// them (so it cannot answer them) nor publish events; an operator key may
// ask and read answers and events, and nothing else.
func TestSiteCredentialHasNoControlSubjects(t *testing.T) {
	srv, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", Auth: ClientAuth{User: "site", Password: "pw"},
		Members: &MemberAuthz{Prefix: "edge.election", Group: "g", Keys: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	errs := make(chan error, 16)
	site, err := nats.Connect(srv.ClientURL(), nats.UserInfo("site", "pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	for _, subj := range []string{"edge.election.g.ctl.status", "edge.election.g.ctl.resign", "edge.election.g.ctl.events", "edge.election.g.el.gw1"} {
		_ = site.Publish(subj, []byte("x"))
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("publish on %s: %v", subj, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the site credential published on %s", subj)
		}
	}
	if _, err := site.SubscribeSync("edge.election.g.ctl.status"); err == nil {
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("subscribe: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the site credential subscribed to ctl.status")
		}
	}
	op := OperatorPermissions("edge.election", "g")
	if !contains(op.Publish.Allow, "edge.election.g.ctl.resign") || contains(op.Publish.Allow, "edge.election.g.ctl.events") ||
		contains(op.Publish.Allow, "edge.election.g.el.>") {
		t.Fatalf("operator permissions: %+v", op.Publish)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPushBasicAuthStaysOutOfErrors: basic auth in the Pushgateway URL is
// sent as a header, and neither the errors of failed pushes nor the log
// show the password.
func TestPushBasicAuthStaysOutOfErrors(t *testing.T) {
	var mu sync.Mutex
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://pgu:s3cret@", 1)
	var logBuf bytes.Buffer
	reg := prometheus.NewRegistry()
	p, err := NewPusher(PushConfig{URL: u, Interval: time.Hour, Gatherer: reg, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = p.push(context.Background())
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(logBuf.String(), "s3cret") {
		t.Fatalf("push error %v, log %s", err, logBuf.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(auth, "Basic ") {
		t.Fatalf("Authorization header %q", auth)
	}
	if err := CheckPushURL("ftp://pgu:s3cret@push"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("CheckPushURL error %v", err)
	}
}
