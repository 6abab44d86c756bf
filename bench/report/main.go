// Command report turns the JSON files that `make bench` writes into
// docs/BENCHMARKS.md and a chart of the failover distributions. It computes
// every percentile from the raw samples and judges each row against the
// targets recorded with it, without rounding toward a target.
//
// It is a module of its own so that the root go.mod does not carry gonum.
//
//	go run . -in ../../bin/bench -md ../../docs/BENCHMARKS.md -png ../../docs/benchmarks-failover.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// series and file mirror internal/benchresult of the root module.
type series struct {
	Figure    string    `json:"figure"`
	Name      string    `json:"name"`
	Algorithm string    `json:"algorithm,omitempty"`
	Settings  string    `json:"settings"`
	Unit      string    `json:"unit"`
	Samples   []float64 `json:"samples,omitempty"`
	Targets   []target  `json:"targets,omitempty"`
	Pending   string    `json:"pending,omitempty"`
	Note      string    `json:"note,omitempty"`
	Chart     bool      `json:"chart,omitempty"`
	Product   string    `json:"product,omitempty"`
	Counts    []count   `json:"counts,omitempty"`
}

type count struct {
	Name string `json:"name"`
	N    int    `json:"n"`
	Of   int    `json:"of"`
}

type target struct {
	Stat    string  `json:"stat"`
	Max     float64 `json:"max,omitempty"`
	Min     float64 `json:"min,omitempty"`
	AtLeast bool    `json:"at_least,omitempty"`
}

type kv struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type file struct {
	Program string   `json:"program"`
	Started string   `json:"started"`
	Seconds float64  `json:"seconds"`
	Series  []series `json:"series"`
	Load1   float64  `json:"load1"`
	// CPUPressure is the share of the run during which some runnable task
	// waited for a CPU; -1 if unknown.
	CPUPressure float64 `json:"cpu_pressure"`
	// IOPressure is the same for tasks waiting on I/O.
	IOPressure float64 `json:"io_pressure"`
	Env        []kv    `json:"env,omitempty"`
}

func main() {
	in := flag.String("in", "", "directory of the benchmark JSON files")
	md := flag.String("md", "", "markdown report to write")
	png := flag.String("png", "", "chart to write (.png or .svg)")
	analysis := flag.String("analysis", "analysis.md", "hand-written analysis appended to the report")
	sections := flag.String("sections", "sections.md", "hand-written sections placed after the measured figures (results of make mixed-bench, ...)")
	flag.Parse()
	if err := run(*in, *md, *png, *analysis, *sections); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(in, md, png, analysisPath, sectionsPath string) error {
	paths, err := filepath.Glob(filepath.Join(in, "*.json"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no *.json in %s", in)
	}
	sort.Strings(paths)
	var files []file
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var f file
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, f)
	}
	analysis, err := os.ReadFile(analysisPath)
	if err != nil {
		return err
	}
	sections, err := os.ReadFile(sectionsPath)
	if err != nil {
		return err
	}
	chartName := filepath.Base(png)
	doc := render(files, chartName, string(sections), string(analysis))
	if err := os.WriteFile(md, []byte(doc), 0o644); err != nil {
		return err
	}
	return chart(files, png)
}
