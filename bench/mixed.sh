#!/usr/bin/env bash
# make mixed-bench: failover on a site mid-upgrade against a uniform one, in
# the same run. Builds the previous protocol release (the last row of
# docs/PROTOCOL.md's table) from this repository's history, then for each
# algorithm and fault (SIGKILL on the fast path, SIGSTOP) measures bench/failover
# with 0 (uniform), 1, 2, 3 and 4 of the 5 members (gw1..gwN) on that
# release, and prints p50/p99 beside the uniform site's with the changes (the
# targets: p50 within 10%, p99 within 25%); then a rolling upgrade and
# downgrade of every member (bench/upgrade, PASSES times). Results in $OUT.
#
# The machine is shared, and its load moves by more than 10% within minutes:
# configurations measured one after the other would read a change of load as
# a difference between builds. So the TRIALS of each configuration are split
# over ROUNDS rounds; each round runs every configuration once, for
# TRIALS/ROUNDS trials, in an order that rotates by one each round (with 5
# rounds each configuration is first, second, ... and last once). bench/mixedstat
# pools each configuration's samples over its runs (p50/p99 nearest-rank over
# all TRIALS) and sums the runs' journal checks. Each run keeps its output
# ($alg-$mode-old$n-r$round.log), its samples (.json) and the agents' debug
# logs (.agents.log), so that a slow trial can be traced: summary-details.txt
# names the run and trial of each configuration's slowest one.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
OUT=${OUT:-bin/mixed}
TRIALS=${TRIALS:-30}
ROUNDS=${ROUNDS:-5}
ALGORITHMS=${ALGORITHMS:-bully ring}
MODES=${MODES:-kill freeze} # kill: SIGKILL rows, freeze: SIGSTOP rows
case $OUT in /*) ;; *) OUT=$root/$OUT ;; esac
mkdir -p "$OUT"
if ! [ "$ROUNDS" -ge 1 ] 2>/dev/null || ! [ "$TRIALS" -ge "$ROUNDS" ] 2>/dev/null; then
	echo "mixed.sh: need ROUNDS >= 1 and TRIALS >= ROUNDS (TRIALS=$TRIALS ROUNDS=$ROUNDS)" >&2
	exit 2
fi
commit=$(sed -n 's/^| [0-9]* | \([0-9a-f]\{40\}\) |.*/\1/p' docs/PROTOCOL.md | tail -n 1)
old=$OUT/edge-agent-$commit
if [ ! -x "$old" ]; then
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git archive "$commit" | tar -x -C "$src"
	(cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod $GO build -trimpath -o "$old" ./cmd/edge-agent)
fi
echo "previous release: $commit ($old)"

# Built once: the runs then start without a compile between them.
$GO build -o "$OUT/failover" ./bench/failover
$GO build -o "$OUT/mixedstat" ./bench/mixedstat

summary=$OUT/summary.txt
details=$OUT/summary-details.txt
: >"$summary"
: >"$details"
configs=(0 1 2 3 4)
for alg in $ALGORITHMS; do
	for mode in $MODES; do
		fast=""
		[ "$mode" = kill ] && fast=-fast
		declare -A runs=()
		for round in $(seq 1 "$ROUNDS"); do
			# Trials of this round: TRIALS/ROUNDS, the first TRIALS%ROUNDS
			# rounds one more, so each configuration gets TRIALS in all.
			trials=$((TRIALS / ROUNDS + (round <= TRIALS % ROUNDS ? 1 : 0)))
			shift=$(((round - 1) % ${#configs[@]}))
			order=("${configs[@]:shift}" "${configs[@]:0:shift}")
			echo "$alg $mode round $round/$ROUNDS: old=${order[*]}, $trials trials each ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
			for n in "${order[@]}"; do
				ids=""
				for i in $(seq 1 "$n"); do ids="$ids${ids:+,}gw$i"; done
				run=$OUT/$alg-$mode-old$n-r$round
				args=(-algorithm "$alg" $fast -mode "$mode" -trials "$trials" -json "$run.json" -log "$run.agents.log")
				[ -n "$ids" ] && args+=(-old-bin "$old" -old "$ids")
				"$OUT/failover" "${args[@]}" >"$run.log" 2>&1 || { cat "$run.log"; echo "mixed.sh: $run failed" >&2; exit 1; }
				runs[$n]=${runs[$n]:-}${runs[$n]:+,}$run.json
			done
		done
		stat=()
		for n in "${configs[@]}"; do stat+=("$n=${runs[$n]}"); done
		"$OUT/mixedstat" -label "$(printf '%-5s %-6s' "$alg" "$mode")" -details "$details" "${stat[@]}" | tee -a "$summary"
		unset runs
	done
done

# The rolling upgrade and downgrade: every member on the release, then each
# restarted on this build in turn, and back; the spans without a leader.
PASSES=${PASSES:-3}
for alg in $ALGORITHMS; do
	log=$OUT/$alg-rolling.log
	$GO run ./bench/upgrade -old-bin "$old" -algorithm "$alg" -passes "$PASSES" -log "$OUT/$alg-rolling.agents.log" >"$log" 2>&1 || { cat "$log"; exit 1; }
	printf '%-5s rolling upgrade+downgrade x%s: %s\n' "$alg" "$PASSES" "$(grep '^longest span' "$log")" | tee -a "$summary"
	grep '^handovers' "$log" | sed "s/^/$alg       /" | tee -a "$summary"
done
