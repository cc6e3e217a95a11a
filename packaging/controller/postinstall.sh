#!/bin/sh
# Make systemd see the new unit; enabling is the admin's choice
# (systemctl enable --now rota-controller) once controller.conf is filled in.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # An upgrade restarts a running controller.
    systemctl try-restart rota-controller.service >/dev/null 2>&1 || true
fi
exit 0
