package main

import (
	"os"
	"strings"
	"testing"
)

// The VIP figure sets its products side by side: the first row's p50 / p99
// and every count, in one column per product.
func TestVIPFigureSideBySide(t *testing.T) {
	row := func(product, name string, samples []float64, counts ...count) series {
		return series{Figure: "vip", Product: product, Name: product + ": " + name, Unit: "ms", Samples: samples, Counts: counts}
	}
	files := []file{{Program: "vipbed", Series: []series{
		row("keepalived 2.2.7", "SIGKILL, failover", []float64{30, 31, 40}, count{Name: "kept the VIP", N: 3, Of: 3}),
		row("keepalived 2.2.7", "cut, two-holder ms", []float64{900, 950, 1000}, count{Name: "cuts with two holders", N: 3, Of: 3}),
		row("edge-agent", "SIGKILL, failover", []float64{60, 70, 80}, count{Name: "kept the VIP", N: 0, Of: 3}),
		row("edge-agent", "cut, two-holder ms", []float64{0, 0, 0}, count{Name: "cuts with two holders", N: 0, Of: 3}),
	}}}
	md := render(files, "chart.png", "", "")
	for _, want := range []string{
		"| | keepalived 2.2.7 | edge-agent |\n|---|---|---|\n",
		"| SIGKILL, failover, p50 / p99 | 31.0 ms / 40.0 ms | 70.0 ms / 80.0 ms |\n",
		"| kept the VIP | 3 of 3 | 0 of 3 |\n",
		"| cuts with two holders | 3 of 3 | 0 of 3 |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// The hand-written sections (make mixed-bench's figures) come after the
// measured figures and before the targets missed, so that make bench keeps
// them.
func TestHandWrittenSectionsKept(t *testing.T) {
	files := []file{{Program: "bench scale", Series: []series{{Figure: "scale", Name: "groups", Unit: "groups", Samples: []float64{5}}}}}
	md := render(files, "chart.png", "## 8. A site mid-upgrade\n\nrows\n", "analysis text\n")
	scale, mixed, missed := strings.Index(md, "## 5. Scale"), strings.Index(md, "## 8. A site mid-upgrade\n\nrows\n"), strings.Index(md, "## Targets missed")
	if scale < 0 || mixed < 0 || missed < 0 || !(scale < mixed && mixed < missed) {
		t.Errorf("sections at %d (scale), %d (hand-written), %d (targets missed); want them in that order:\n%s", scale, mixed, missed, md)
	}
}

// docs/BENCHMARKS.md is this program's output: the hand-written sections
// and analysis it carries must be the ones kept here, or the next make
// bench drops whatever was edited in the document alone.
func TestDocumentCarriesTheHandWrittenParts(t *testing.T) {
	doc, err := os.ReadFile("../../docs/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sections.md", "analysis.md"} {
		part, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), strings.TrimSpace(string(part))) {
			t.Errorf("docs/BENCHMARKS.md does not carry bench/report/%s as it is: edit both, or run make bench", name)
		}
	}
}
