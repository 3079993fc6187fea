# mdiag's %post: systemd re-reads its units. Nothing is enabled or started
# (no %systemd_post: a distribution preset could enable the agent); the
# administrator runs `systemctl enable --now mdiag-agent`.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
