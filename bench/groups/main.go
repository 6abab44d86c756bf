// Command groups runs the measurements of `make bench` that need election
// groups of in-process agents on one real NATS server: election message
// deliveries per election (deliveries), and many groups on one server
// (scale, which runs the server as a child process of its own: serve). Each
// measurement writes a benchresult JSON file (its program label stays "bench
// deliveries" or "bench scale", as docs/BENCHMARKS.md shows it); bench/report
// turns them into docs/BENCHMARKS.md. Failover and footprint have programs of their
// own (bench/failover, bench/footprint), and so does the machine's
// description (bench/env).
//
//	go run ./bench/groups deliveries -json out/deliveries.json
//	go run ./bench/groups scale -json out/scale.json
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: groups deliveries|scale|serve [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"deliveries": deliveries,
		"scale":      scale,
		"witness":    witnessScale,
		"serve":      serve,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "groups: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "groups %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
