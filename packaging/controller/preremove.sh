#!/bin/sh
# Stop the controller on removal (rpm: $1 = 0; deb: $1 = remove), not on upgrade.
case "$1" in
    0|remove|purge)
        if [ -d /run/systemd/system ]; then
            systemctl disable --now rota-controller.service >/dev/null 2>&1 || true
        fi
        ;;
esac
exit 0
