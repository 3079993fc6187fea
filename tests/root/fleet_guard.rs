//! The fleet store is never a mongod the agent watches (unless
//! `[fleet] allow_monitored`): checked at start, and again for a target the
//! agent finds later, as when mongod starts after the agent at boot. A
//! process named as a watched mongod that listens on the store's port
//! after the start stops the fleet writer, with one line saying why, and
//! the spool stays on disk for the next start.
//!
//! No store server runs here (neither SecantusDB nor mongod): what the guard
//! reacts to is a port and a process name, given by a stand-in listener.

use std::{path::Path, process::Command, time::Duration};

use mdiag_tests::agent::Agent;
use mdiag_tests::{free_port, py_venv, require_root, spawn_ready};

use crate::agent::rules_dir;

/// The name the stand-in mongod gives itself (its `comm`).
const NAME: &str = "mdiag-fakedb";

/// Listens on `port`, then takes the name [`NAME`], then says `ready`.
const LISTENER: &str = r#"
import ctypes, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
ctypes.CDLL(None).prctl(15, sys.argv[2].encode(), 0, 0, 0)
print("ready", flush=True)
sys.stdin.read()
"#;

fn config(dir: &Path, port: u16, allow: bool) -> std::path::PathBuf {
    let path = dir.join("mdiag.toml");
    let text = format!(
        "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
         processes = [\"{NAME}\"]\n\
         [fleet]\nuri = \"mongodb://127.0.0.1:{port}/\"\nhost = \"guard\"\n\
         allow_monitored = {allow}\n",
        dir.join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs an agent whose store is 127.0.0.1:PORT, starts the stand-in on
/// that port once the agent writes, and returns the agent's log once it
/// watches the stand-in and has stopped.
fn run(allow: bool) -> (String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), port, allow);
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let w = Duration::from_secs(60);
    agent.wait_for(&["writing findings to the fleet store"], w);
    let (mut target, _out) = spawn_ready(Command::new(py_venv().join("bin/python")).args([
        "-c",
        LISTENER,
        &port.to_string(),
        NAME,
    ]));
    // The check runs as the target is attached, before this line.
    let watched = format!("watching {NAME}:{port}");
    agent.wait_for(&[&watched, "probes attached"], w);
    let (status, log) = agent.stop();
    let _ = target.kill();
    let _ = target.wait();
    assert!(status.success(), "{status:?}\n{log}");
    (log, dir.path().join("state/spool"), dir)
}

#[test]
fn fleet_a_watched_mongod_that_appears_on_the_store_s_port_stops_the_writer() {
    let _serial = mdiag_tests::serial();
    require_root();
    let (log, spool, _dir) = run(false);
    let stop = "the fleet writer stops";
    assert_eq!(log.matches(stop).count(), 1, "{log}");
    let line = log.lines().find(|l| l.contains(stop)).unwrap();
    assert!(
        line.contains("allow_monitored") && line.contains(NAME),
        "says what to change and which process: {line}"
    );
    assert!(spool.is_dir(), "the spool stays: {}", spool.display());

    // Near miss: allowed, the writer goes on.
    let (log, _, _dir) = run(true);
    assert!(!log.contains(stop), "{log}");
}
