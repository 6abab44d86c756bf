#!/usr/bin/env bash
# The log lines of a real three-gateway offline site (embedded nats-servers
# clustered by routes, H = 200 ms, hold_down 2 s, pushing to a Pushgateway):
# the three gateways up for 6 s; gw2 and gw3 SIGKILLed, gw1 alone without
# quorum for 20 s; both restarted; gw1 SIGKILLed and restarted, so that gw2
# hands it back after the hold-down; the leader SIGTERMed; every agent
# SIGTERMed. Prints the counts docs/DESIGN-NOTES.md (Logs) quotes. Needs
# Debian's prometheus-pushgateway and curl; uses ports 34221-34223,
# 36221-36223, 39181-39183 and 39091 on 127.0.0.1.
# Usage: go build -o /tmp/ea/edge-agent ./cmd/edge-agent && bench/logsite/run.sh /tmp/ea/edge-agent /tmp/logsite
set -u
BIN=$1; OUT=$2; rm -rf "$OUT"; mkdir -p "$OUT"
M=gw1=100,gw2=50,gw3=10
R=nats-route://127.0.0.1:36221,nats-route://127.0.0.1:36222,nats-route://127.0.0.1:36223
U=nats://127.0.0.1:34221,nats://127.0.0.1:34222,nats://127.0.0.1:34223
start() { # id n
  "$BIN" run --id $1 --group plc --members $M --embedded-nats --nats-listen 127.0.0.1:3422$2 \
    --nats-url $U --nats-cluster-name site --nats-cluster-listen 127.0.0.1:3622$2 --nats-cluster-routes $R \
    --heartbeat 200ms --hold-down 2s --pushgateway-url http://127.0.0.1:39091 --state-dir "$OUT/state-$1" --http-addr 127.0.0.1:3918$2 >>"$OUT/$1.log" 2>&1 &
  echo $! > "$OUT/$1.pid"
}
prometheus-pushgateway --web.listen-address=127.0.0.1:39091 >"$OUT/pg.log" 2>&1 & PG=$!
sleep 1
mark() { for g in gw1 gw2 gw3; do echo "=== MARK $1" >> "$OUT/$g.log"; done; }
start gw1 1; start gw2 2; start gw3 3
sleep 6
mark alone
kill -KILL $(cat $OUT/gw2.pid) $(cat $OUT/gw3.pid)
sleep 20
mark back
start gw2 2; start gw3 3
sleep 8
mark preempt
# gw1 (highest) crashes, gw2 takes over; gw1 returns and after hold_down (2s) gw2 hands over to it
kill -KILL $(cat $OUT/gw1.pid); sleep 3
start gw1 1; sleep 6
mark term
L=$(curl -s 127.0.0.1:39182/status | grep -o '"leader": *"[a-z0-9]*"' | cut -d'"' -f4)
echo "leader before SIGTERM: $L" > "$OUT/summary"
kill -TERM $(cat $OUT/$L.pid); sleep 4
mark end
for g in gw1 gw2 gw3; do kill -TERM $(cat $OUT/$g.pid) 2>/dev/null; done
sleep 3
kill $PG
for g in gw1 gw2 gw3; do
	echo "$g: route errors $(grep -c 'level=ERROR.*connect to route' "$OUT/$g.log"), election failed $(grep -c 'election failed' "$OUT/$g.log"), context canceled $(grep -c 'context canceled' "$OUT/$g.log"), warnings and errors $(grep -c 'level=WARN\|level=ERROR' "$OUT/$g.log")"
done
grep -h 'stepped down' "$OUT"/gw*.log
