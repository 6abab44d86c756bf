package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// ChromiumBins are where Debian's chromium-headless-shell and chromium
// packages install their browsers, in the order they are tried.
var ChromiumBins = []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"}

// FindChromium returns a headless-capable Chromium: $CHROMIUM_BIN, one of
// ChromiumBins, or chromium-headless-shell or chromium on $PATH.
func FindChromium() (string, error) {
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CHROMIUM_BIN: %w", err)
		}
		return p, nil
	}
	for _, p := range ChromiumBins {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium (apt-get install chromium-headless-shell)")
}

// RequireChromium returns FindChromium's browser; without one it fails t
// under CI=true and skips it otherwise.
func RequireChromium(t testing.TB) string {
	t.Helper()
	bin, err := FindChromium()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI=true requires it", err)
		}
		t.Skipf("%v: skipped (with CI=true this fails)", err)
	}
	return bin
}
