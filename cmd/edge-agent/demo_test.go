package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs the quick start's demo, both algorithms: a site elects, a
// crashed leader is replaced on the server's disconnect advisory (the fast
// path: at least one survivor acted on it), and a graceful stop hands over.
func TestDemo(t *testing.T) {
	for _, alg := range []string{"bully", "ring"} {
		t.Run(alg, func(t *testing.T) {
			var out, errOut strings.Builder
			if code := run([]string{"demo", "--algorithm", alg}, &out, &errOut); code != exitOK {
				t.Fatalf("demo: exit %d\n%s\n%s", code, out.String(), errOut.String())
			}
			text := out.String()
			for _, want := range []string{"elected: gw5 leads term", "crash: killing leader gw5", "failover: gw4 leads term", "handover: gw3 leads term"} {
				if !strings.Contains(text, want) {
					t.Errorf("demo output lacks %q:\n%s", want, text)
				}
			}
			m := regexp.MustCompile(`(\d+) of (\d+) survivors acted on its advisory`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("demo output does not say how many survivors acted on the advisory:\n%s", text)
			}
			if n, _ := strconv.Atoi(m[1]); n < 1 || m[2] != "4" {
				t.Fatalf("%s of %s survivors acted on the advisory, want at least 1 of 4:\n%s", m[1], m[2], text)
			}
		})
	}
}
