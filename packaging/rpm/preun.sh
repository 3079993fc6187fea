# mdiag's %preun: on erase (not upgrade, $1 = 0) a running agent is stopped
# and the links of `systemctl enable` removed before the unit goes.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now mdiag-agent.service >/dev/null 2>&1 || :
fi
