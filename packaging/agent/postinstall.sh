#!/bin/sh
# Make systemd see the new unit; enabling is the admin's choice
# (systemctl enable --now rota-agent) once agent.yaml is filled in.
mkdir -p /run/rota/progress 2>/dev/null || true
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # An upgrade restarts a running agent.
    systemctl try-restart rota-agent.service >/dev/null 2>&1 || true
fi
exit 0
