#!/bin/sh
# edge-agent postinst: the service user, ownership of the config and state
# directory, and on upgrade a restart (a leader hands over first). It never
# enables or starts a fresh install: the config needs this gateway's id.
set -e

case "$1" in
configure | "") ;;
*) exit 0 ;;
esac

if ! getent passwd edge-agent >/dev/null; then
	useradd --system --user-group --no-create-home --home-dir /var/lib/edge-agent \
		--shell /usr/sbin/nologin --comment "edge-agent leader election" edge-agent
fi
chown root:edge-agent /etc/edge-agent /etc/edge-agent/edge-agent.yaml
chmod 0750 /etc/edge-agent
chmod 0640 /etc/edge-agent/edge-agent.yaml
chown edge-agent:edge-agent /var/lib/edge-agent
chmod 0700 /var/lib/edge-agent

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if [ -n "$2" ]; then
		# An upgrade: restart if running. SIGTERM makes a leader hand over
		# before it exits; the new binary is READY once it rejoined.
		systemctl try-restart edge-agent.service || true
	fi
fi
if [ -z "$2" ]; then
	echo "edge-agent: set this gateway's id in /etc/edge-agent/edge-agent.yaml, check it with"
	echo "  edge-agent check-config /etc/edge-agent/edge-agent.yaml"
	echo "then: systemctl enable --now edge-agent"
fi
exit 0
