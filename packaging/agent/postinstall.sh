#!/bin/sh
# Make systemd see the new unit; enabling is the admin's choice
# (systemctl enable --now rota-agent) once agent.conf is filled in.
mkdir -p /run/rota/progress 2>/dev/null || true
# Earlier releases read agent.yaml; an upgrade leaves it behind (deb) or
# saves an edited one as .rpmsave (rpm), unread.
old=""
for f in /etc/rota/agent.yaml /etc/rota/agent.yaml.rpmsave; do
    if [ -f "$f" ]; then
        old=$f
        echo "rota-agent: $f is no longer read: put its settings into /etc/rota/agent.conf, one 'key = value' line per key (docs/agent.md), then remove it" >&2
    fi
done
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # An upgrade restarts a running agent, but not while its settings may
    # still be in the old file: it would come back on the defaults.
    if [ -z "$old" ]; then
        systemctl try-restart rota-agent.service >/dev/null 2>&1 || true
    fi
fi
exit 0
