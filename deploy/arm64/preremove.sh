#!/bin/sh
# edge-agent prerm: on removal stop the service (a leader hands over first)
# and disable it. An upgrade restarts it from the new postinst instead.
set -e
if [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
	systemctl disable --now edge-agent.service || true
fi
exit 0
