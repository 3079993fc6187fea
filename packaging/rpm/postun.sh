# mdiag's %postun: systemd forgets a removed unit (re-reads an upgraded one).
# A running agent is not restarted on upgrade: `systemctl restart mdiag-agent`.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
