#!/usr/bin/env bash
# make mixed-bench: failover on a site mid-upgrade against a uniform one, in
# the same run. Builds the previous protocol release (the last row of
# docs/PROTOCOL.md's table) from this repository's history, then for each
# algorithm and fault (SIGKILL on the fast path, SIGSTOP) runs bench/failover
# with 0 (uniform), 1, 2, 3 and 4 of the 5 members (gw1..gwN) on that
# release, and prints p50/p99 beside the uniform site's with the ratios (the
# targets: p50 within 10%, p99 within 25%); then a rolling upgrade and
# downgrade of every member (bench/upgrade, PASSES times). Results in $OUT.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
OUT=${OUT:-bin/mixed}
TRIALS=${TRIALS:-30}
ALGORITHMS=${ALGORITHMS:-bully ring}
case $OUT in /*) ;; *) OUT=$root/$OUT ;; esac
mkdir -p "$OUT"

commit=$(sed -n 's/^| [0-9]* | \([0-9a-f]\{40\}\) |.*/\1/p' docs/PROTOCOL.md | tail -n 1)
old=$OUT/edge-agent-$commit
if [ ! -x "$old" ]; then
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git archive "$commit" | tar -x -C "$src"
	(cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod $GO build -trimpath -o "$old" ./cmd/edge-agent)
fi
echo "previous release: $commit ($old)"

summary=$OUT/summary.txt
: >"$summary"
for alg in $ALGORITHMS; do
	for mode in kill freeze; do
		fast=""
		[ "$mode" = kill ] && fast=-fast
		base_p50="" base_p99=""
		for n in 0 1 2 3 4; do
			ids=""
			for i in $(seq 1 "$n"); do ids="$ids${ids:+,}gw$i"; done
			log=$OUT/$alg-$mode-old$n.log
			args=(-algorithm "$alg" $fast -mode "$mode" -trials "$TRIALS")
			[ -n "$ids" ] && args+=(-old-bin "$old" -old "$ids")
			$GO run ./bench/failover "${args[@]}" >"$log" 2>&1 || { cat "$log"; exit 1; }
			line=$(grep '^polling /status' "$log")
			p50=$(sed -n 's/.*p50 \([0-9.]*\) ms.*/\1/p' <<<"$line")
			p99=$(sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$line")
			safety=$(grep '^safety' "$log" | sed 's/^safety: //')
			if [ "$n" = 0 ]; then
				base_p50=$p50 base_p99=$p99
				row=$(printf '%-5s %-6s old=%d  p50 %7.1f ms  p99 %7.1f ms  (uniform)' "$alg" "$mode" "$n" "$p50" "$p99")
			else
				row=$(awk -v a="$alg" -v m="$mode" -v n="$n" -v p="$p50" -v q="$p99" -v bp="$base_p50" -v bq="$base_p99" \
					'BEGIN { printf "%-5s %-6s old=%d  p50 %7.1f ms  p99 %7.1f ms  p50 %+.0f%%  p99 %+.0f%%", a, m, n, p, q, (p/bp-1)*100, (q/bq-1)*100 }')
			fi
			echo "$row  [$safety]" | tee -a "$summary"
		done
	done
done

# The rolling upgrade and downgrade: every member on the release, then each
# restarted on this build in turn, and back; the spans without a leader.
PASSES=${PASSES:-3}
for alg in $ALGORITHMS; do
	log=$OUT/$alg-rolling.log
	$GO run ./bench/upgrade -old-bin "$old" -algorithm "$alg" -passes "$PASSES" >"$log" 2>&1 || { cat "$log"; exit 1; }
	printf '%-5s rolling upgrade+downgrade x%s: %s\n' "$alg" "$PASSES" "$(grep '^longest span' "$log")" | tee -a "$summary"
	grep '^handovers' "$log" | sed "s/^/$alg       /" | tee -a "$summary"
done
