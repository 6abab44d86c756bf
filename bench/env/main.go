// Command env prints the machine and the versions that `make bench` runs
// with (CPU, cores, memory, OS, kernel, Go, nats-server, nats.go, the commit,
// the load average) and with -json writes them for bench/report, which heads
// docs/BENCHMARKS.md with them. Its JSON keeps the program name "bench env",
// the key the report knows it by.
//
//	go run ./bench/env -json out/env.json
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edge-agent/edge-agent/internal/benchresult"
)

func main() {
	jsonPath := flag.String("json", "", "write the description here")
	flag.Parse()
	if err := env(*jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "env:", err)
		os.Exit(1)
	}
}

// env records the machine and the versions the benchmarks ran with.
func env(jsonPath string) error {
	kv := []benchresult.KV{
		{Key: "date", Value: time.Now().UTC().Format("2006-01-02 15:04 UTC")},
		{Key: "commit", Value: gitDescribe()},
		{Key: "cpu", Value: cpuModel()},
		{Key: "cores", Value: fmt.Sprint(runtime.NumCPU())},
		{Key: "memory", Value: memTotal()},
		{Key: "os", Value: osRelease()},
		{Key: "kernel", Value: firstLine("/proc/sys/kernel/osrelease")},
		{Key: "go", Value: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{Key: "nats-server", Value: "v" + server.VERSION + " (embedded library, github.com/nats-io/nats-server/v2)"},
		{Key: "nats.go", Value: depVersion("github.com/nats-io/nats.go")},
		{Key: "load average at start", Value: fmt.Sprintf("%.2f (1 min)", benchresult.LoadAvg())},
	}
	for _, e := range kv {
		fmt.Printf("%-22s %s\n", e.Key+":", e.Value)
	}
	if jsonPath == "" {
		return nil
	}
	return benchresult.Write(jsonPath, benchresult.File{Program: "bench env", Started: time.Now().UTC().Format(time.RFC3339), Env: kv})
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func cpuModel() string {
	if m := procField("/proc/cpuinfo", "model name"); m != "" {
		return m
	}
	return "unknown"
}

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	var kb int64
	if _, err := fmt.Sscan(strings.TrimSuffix(v, " kB"), &kb); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

func osRelease() string {
	v := procField("/etc/os-release", "PRETTY_NAME")
	if v == "" {
		b, err := os.ReadFile("/etc/os-release")
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if s, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
					return strings.Trim(s, `"`)
				}
			}
		}
		return "unknown"
	}
	return strings.Trim(v, `"`)
}

func depVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "unknown"
}
