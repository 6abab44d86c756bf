// Command bench runs the measurements of `make bench` that need more than the
// failover harness (internal/failoverbench) and the footprint measurement
// (internal/footprint): election message deliveries over real NATS, many
// groups on one server, and the description of the machine. Each subcommand writes a benchresult JSON file; bench/report
// turns them into docs/BENCHMARKS.md.
//
//	go run ./internal/bench deliveries -json out/deliveries.json
//	go run ./internal/bench scale -json out/scale.json
//	go run ./internal/bench env -json out/env.json
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench deliveries|scale|env|serve [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"deliveries": deliveries,
		"scale":      scale,
		"env":        env,
		"serve":      serve,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
