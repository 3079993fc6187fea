//! The systemd unit `packaging/systemd/mdiag-agent.service` stays true:
//! `systemd-analyze verify` accepts it without a warning (the man page its
//! `Documentation=` names among those `mdiag man` makes), and the agent run
//! as an unprivileged user with exactly the unit's `AmbientCapabilities=`
//! (`setpriv`: PID 1 here need not be systemd, so the unit itself is not
//! started) attaches every family it attaches as root, to a target owned by
//! yet another user, serves `/metrics`, and stops cleanly on SIGTERM.

use std::{
    io::Write,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use mdiag_tests::agent::{Agent, http_get};
use mdiag_tests::{mdiag_bin, require_root};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");
/// The families that attach to any target on this host (wiredtiger needs
/// WiredTiger's symbols; alloc is checked too, it attaches to any glibc).
const FAMILIES: [&str; 6] = [
    "sched",
    "softirq",
    "syscalls",
    "perf",
    "contention",
    "alloc",
];

fn unit_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packaging/systemd/mdiag-agent.service")
}

fn unit_text() -> String {
    std::fs::read_to_string(unit_path()).expect("read the unit file")
}

/// The unit's value of `key=`, which it must set on exactly one line
/// (systemd adds up repeated capability lines; this test would not).
fn unit_value(text: &str, key: &str) -> String {
    let values: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
        .collect();
    assert_eq!(values.len(), 1, "the unit must set {key}= once: {values:?}");
    values[0].trim().to_owned()
}

/// A copy of the unit whose `ExecStart=` names `bin` (verify wants an
/// executable there), in `dir` under the unit's own name.
fn unit_copy(dir: &Path, bin: &Path) -> PathBuf {
    let text = unit_text();
    let exec = unit_value(&text, "ExecStart");
    let installed = exec.split_whitespace().next().unwrap().to_owned();
    assert_eq!(installed, "/usr/local/bin/mdiag", "{exec}");
    let path = dir.join("mdiag-agent.service");
    std::fs::write(
        &path,
        text.replace(&installed, bin.to_str().expect("utf-8 path")),
    )
    .unwrap();
    path
}

#[test]
fn the_unit_verifies_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_copy(dir.path(), &mdiag_bin());
    // verify runs `man` on each man: page of Documentation=: the pages
    // `mdiag man` makes (as the package installs them) must have it.
    let man = dir.path().join("man");
    let made = Command::new(mdiag_bin())
        .arg("man")
        .arg("--out")
        .arg(man.join("man1"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .env("MANPATH", &man)
        .output()
        .expect("run systemd-analyze (apt-get install systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");

    // The exposure score the README quotes, printed for the log.
    let sec = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(&unit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&sec.stdout);
    let score = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no score: {text}"));
    eprintln!("{score}");
}

/// `setpriv` arguments for exactly `caps` (systemd's CAP_X names).
fn setpriv_caps(caps: &str) -> Vec<String> {
    let list: Vec<String> = caps
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
        .collect();
    assert!(!list.is_empty(), "AmbientCapabilities= is empty");
    let plus = list.join(",");
    vec![
        "--reuid=nobody".into(),
        "--regid=nogroup".into(),
        "--clear-groups".into(),
        format!("--inh-caps=-all,{plus}"),
        format!("--ambient-caps={plus}"),
        format!("--bounding-set=-all,{plus}"),
    ]
}

#[test]
fn the_agent_runs_with_exactly_the_units_capabilities() {
    let _serial = mdiag_tests::serial();
    require_root();
    let text = unit_text();
    let caps = unit_value(&text, "AmbientCapabilities");
    assert_eq!(
        caps,
        unit_value(&text, "CapabilityBoundingSet"),
        "the bounding set must hold exactly the ambient capabilities"
    );

    // Everything the agent's user must reach: a world-readable directory
    // with the binary and config, and a state directory it owns (as
    // StateDirectory= would make it).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("mdiag");
    std::fs::copy(mdiag_bin(), &bin).unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let chown = Command::new("chown")
        .args(["nobody:nogroup"])
        .arg(&state)
        .status()
        .unwrap();
    assert!(chown.success());
    let spin_bin = dir.path().join("mdiag-spin");
    std::fs::copy(SPIN, &spin_bin).unwrap();
    let cfg = dir.path().join("mdiag.toml");
    std::fs::write(
        &cfg,
        format!(
            "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
             processes = [\"mdiag-spin\"]\n",
            state.display()
        ),
    )
    .unwrap();

    // The target runs as another user (daemon), as mongod runs as mongodb.
    let mut target = Command::new("setpriv")
        .args(["--reuid=daemon", "--regid=daemon", "--clear-groups"])
        .arg(&spin_bin)
        .args(["--threads", "1", "--spin-ms", "10", "--linger"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start mdiag-spin as daemon");

    let mut args = setpriv_caps(&caps);
    args.push(bin.to_str().unwrap().to_owned());
    let mut agent = Agent::start_with("setpriv", &args, &cfg, &["--no-mongo"]);
    let addr = agent.metrics_addr();
    let pid = target.id().to_string();
    agent.wait_for(
        &[
            "watching mdiag-spin",
            &format!("(pid {pid})"),
            "probes attached",
        ],
        Duration::from_secs(120),
    );
    assert!(
        !agent.log.contains("running without"),
        "the unit's set lacks a capability the agent uses:\n{}",
        agent.log
    );
    // The exposition is rebuilt every second: wait for the probes in it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let (status, _, body) = http_get(&addr, "/metrics");
        assert!(status.contains("200"), "{status}");
        if body.contains("mdiag_probe_up{") || std::time::Instant::now() > deadline {
            break body;
        }
        agent.drain_for(Duration::from_millis(500));
    };
    for family in FAMILIES {
        let up = metrics
            .lines()
            .filter(|l| l.starts_with("mdiag_probe_up{"))
            .find(|l| l.contains(&format!("family=\"{family}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        assert_eq!(up, Some(1.0), "{family} is not up:\n{metrics}");
    }
    // The agent is not root, and holds no more than the unit grants.
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap_or_default();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
    assert!(!uid_line.split_whitespace().any(|u| u == "0"), "{status}");

    let (exit, log) = agent.stop();
    assert!(exit.success(), "{exit:?}\n{log}");
    assert!(log.contains("stopped"), "{log}");
    crate::record_cli::assert_detached();
    if let Some(mut stdin) = target.stdin.take() {
        let _ = stdin.write_all(b"\n");
    }
    let _ = target.kill();
    let _ = target.wait();
}
