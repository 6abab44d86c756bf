package edge

import (
	"net/url"
	"strings"
)

// RedactURL returns s with the password of its user information replaced by
// "xxxxx" (a URL that does not parse loses everything between "//" and the
// last "@" of its authority instead), for logs, errors and check-config:
// credentials in a URL (nats://user:pass@host, https://user:pass@push) must
// not reach the journal.
func RedactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(s, "//")
	if !ok {
		scheme, rest = "", s
	}
	auth, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		auth = "xxxxx@" + auth[i+1:]
	}
	out := auth
	if path != "" || strings.Contains(rest, "/") {
		out += "/" + path
	}
	if ok {
		out = scheme + "//" + out
	}
	return out
}

// RedactURLs applies RedactURL to every element.
func RedactURLs(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = RedactURL(s)
	}
	return out
}
