#!/usr/bin/env bash
# The log of a gateway without quorum: an offline site of three gateways
# (embedded servers clustered by routes, H = 200 ms), gw2 and gw3 SIGKILLed
# after 6 s, gw1 alone for 150 s; counts gw1's lines in those 150 s
# (docs/DESIGN-NOTES.md, Logs). Ports PORTBASE41-43 and PORTBASE61-63 on
# 127.0.0.1 (PORTBASE 452 gives 45241...).
# Usage: bench/logsite/outage.sh BIN OUTDIR PORTBASE
set -u
BIN=$1; OUT=$2; P=$3; rm -rf "$OUT"; mkdir -p "$OUT"
M=gw1=100,gw2=50,gw3=10
R=nats-route://127.0.0.1:${P}61,nats-route://127.0.0.1:${P}62,nats-route://127.0.0.1:${P}63
U=nats://127.0.0.1:${P}41,nats://127.0.0.1:${P}42,nats://127.0.0.1:${P}43
start() {
  "$BIN" run --id $1 --group plc --members $M --embedded-nats --nats-listen 127.0.0.1:${P}4$2 \
    --nats-url $U --nats-cluster-name site --nats-cluster-listen 127.0.0.1:${P}6$2 --nats-cluster-routes $R \
    --heartbeat 200ms --state-dir "$OUT/state-$1" --http-addr off >>"$OUT/$1.log" 2>&1 &
  echo $! > "$OUT/$1.pid"
}
start gw1 1; start gw2 2; start gw3 3
sleep 6
echo "=== MARK alone" >> "$OUT/gw1.log"
kill -KILL $(cat $OUT/gw2.pid) $(cat $OUT/gw3.pid)
sleep 150
echo "=== MARK end" >> "$OUT/gw1.log"
kill -TERM $(cat $OUT/gw1.pid); sleep 2
awk '/=== MARK alone/{f=1;next}/=== MARK end/{f=0}f' "$OUT/gw1.log" > "$OUT/alone.txt"
echo "$BIN: gw1 alone 150 s: route ERROR lines $(grep -c 'level=ERROR.*connect to route' $OUT/alone.txt), election failed lines $(grep -c 'election failed' $OUT/alone.txt), all lines $(wc -l < $OUT/alone.txt)"
