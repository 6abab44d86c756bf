package main

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// markdownLink finds the target of a markdown link, without its #anchor.
var markdownLink = regexp.MustCompile(`\]\(([^)#\s]*)`)

// TestPackagedDocsLinksResolve builds the documentation the .deb ships
// (deploy/arm64/package-docs.sh, as make deb does) and checks, against the
// package's contents in deploy/arm64/nfpm.yaml, that every relative link
// of every markdown file installed under /usr/share/doc/edge-agent points
// at a file the package installs.
func TestPackagedDocsLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs := t.TempDir()
	cmd := exec.Command("sh", "deploy/arm64/package-docs.sh", docs)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("package-docs.sh: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy/arm64/nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Contents []struct {
			Src, Dst, Type string
		}
	}
	if err := yaml.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	installed := map[string]string{} // dst -> src
	for _, c := range pkg.Contents {
		if c.Type == "dir" {
			installed[c.Dst] = ""
			continue
		}
		src := strings.ReplaceAll(c.Src, "${DOCS}", docs)
		if !filepath.IsAbs(src) {
			src = filepath.Join(root, src)
		}
		installed[c.Dst] = src
	}
	const docDir = "/usr/share/doc/edge-agent/"
	mds := 0
	for dst, src := range installed {
		if !strings.HasPrefix(dst, docDir) || !strings.HasSuffix(dst, ".md") {
			continue
		}
		mds++
		text, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("%s (from %s): %v", dst, src, err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(text), -1) {
			link := m[1]
			if link == "" || strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "http://") {
				continue
			}
			target := path.Join(path.Dir(dst), link)
			if _, ok := installed[target]; !ok {
				t.Errorf("%s links to %s (%s), which the package does not install", dst, link, target)
			}
		}
	}
	if mds < 2 {
		t.Errorf("%d markdown files under %s, want README.md and SECURITY.md", mds, docDir)
	}
}
