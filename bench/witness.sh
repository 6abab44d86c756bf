#!/usr/bin/env bash
# make witness-bench: failover of a two-gateway site with a witness (issue
# 17) against a three-gateway site, interleaved so that the machine's load
# falls on both alike. For each algorithm and fault (SIGKILL on the fast
# path, SIGSTOP on heartbeats) it runs bench/failover on 3 agent processes,
# once with gw3 a witness (-witness) and once without, ROUNDS times with
# TRIALS/ROUNDS trials each, in the order round > algorithm > fault > site;
# then prints p50/p99 (nearest rank) over every trial of a row, the 2+1 row's
# change from the 3-gateway row, and the leadership journals' safety lines.
# Logs in $OUT.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
OUT=${OUT:-bin/witness}
TRIALS=${TRIALS:-30}
ROUNDS=${ROUNDS:-3}
ALGORITHMS=${ALGORITHMS:-bully ring}
case $OUT in /*) ;; *) OUT=$root/$OUT ;; esac
rm -rf "$OUT"
mkdir -p "$OUT"
per=$(((TRIALS + ROUNDS - 1) / ROUNDS))

echo "start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg), tree $(git rev-parse --short HEAD)" | tee "$OUT/summary.txt"
for round in $(seq 1 "$ROUNDS"); do
	for alg in $ALGORITHMS; do
		for mode in kill freeze; do
			fast=""
			[ "$mode" = kill ] && fast=-fast
			for site in three witness; do
				w=""
				[ "$site" = witness ] && w=-witness
				log=$OUT/$alg-$mode-$site-$round.log
				$GO run ./bench/failover -agents 3 $w -algorithm "$alg" $fast -mode "$mode" -trials "$per" \
					-log "$OUT/$alg-$mode-$site-$round.agents.log" >"$log" 2>&1 || { cat "$log"; exit 1; }
				echo "round $round $alg $mode $site: $(grep '^polling /status' "$log" | sed 's/^polling \/status: //'), load $(cut -d' ' -f1 /proc/loadavg)"
			done
		done
	done
done

# pct P FILE: the nearest-rank percentile P of the numbers in FILE.
pct() {
	sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END { r = int(p / 100 * NR); if (r < p / 100 * NR) r++; if (r < 1) r = 1; print v[r] }'
}
for alg in $ALGORITHMS; do
	for mode in kill freeze; do
		for site in three witness; do
			sed -n 's/^trial *[0-9]*: .* in *\([0-9.]*\) ms.*/\1/p' "$OUT/$alg-$mode-$site"-[0-9]*.log | grep -v '^$' >"$OUT/$alg-$mode-$site.ms"
		done
		b50=$(pct 50 "$OUT/$alg-$mode-three.ms") b99=$(pct 99 "$OUT/$alg-$mode-three.ms")
		w50=$(pct 50 "$OUT/$alg-$mode-witness.ms") w99=$(pct 99 "$OUT/$alg-$mode-witness.ms")
		n3=$(wc -l <"$OUT/$alg-$mode-three.ms") nw=$(wc -l <"$OUT/$alg-$mode-witness.ms")
		awk -v a="$alg" -v m="$mode" -v b5="$b50" -v b9="$b99" -v w5="$w50" -v w9="$w99" -v n3="$n3" -v nw="$nw" \
			'BEGIN { printf "%-5s %-6s 3 gateways (%d): p50 %6.1f p99 %6.1f ms | 2+1 (%d): p50 %6.1f p99 %6.1f ms | p50 %+.0f%% p99 %+.0f%%\n", a, m, n3, b5, b9, nw, w5, w9, (w5/b5-1)*100, (w9/b9-1)*100 }' |
			tee -a "$OUT/summary.txt"
		for site in three witness; do
			grep -h '^safety' "$OUT/$alg-$mode-$site"-[0-9]*.log | sed "s/^/      $site /" | tee -a "$OUT/summary.txt"
		done
	done
done
echo "end $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
