//! Targets that a port alone does not name, and processes not watched.
//!
//! Two real mongods on the same port, one in this host's network namespace
//! and one in a namespace of its own (`unshare --net`, as a pod's): the
//! agent watches both, under two ids, the second scoped by its namespace
//! (its inode, read here from `/proc/PID/ns/net`; or its container, when
//! this test itself runs in one), and polls only the first (the URI's
//! 127.0.0.1 is the agent's loopback), saying so once. Two processes with
//! the same id (one program, neither listening): the second is not
//! watched, counted under `duplicate_id` on `mdiag_targets_skipped` and told
//! once; gone, the count is back to 0.
//!
//! Cost: 10-20 s (two mongod starts, three attaches).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mdiag_tests::agent::{Agent, http_get, sample};
use mdiag_tests::mongod::{Mongod, Options};
use mdiag_tests::require_root;

use crate::agent::config;

const NAME: &str = "mdiag-nsmongod";
const DUP: &str = "mdiag-dup";

#[test]
fn a_mongod_in_another_network_namespace_is_another_target_and_skips_are_counted() {
    let _serial = mdiag_tests::serial();
    require_root();
    let host = Mongod::start_with(Options {
        name: Some(NAME.into()),
        ..Options::default()
    });
    let port = host.port();
    let pod = Mongod::start_with(Options {
        name: Some(NAME.into()),
        port: Some(port),
        own_net_ns: true,
        ..Options::default()
    });
    let inode = std::fs::read_link(format!("/proc/{}/ns/net", pod.pid())).unwrap();
    let mine = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(inode, mine, "the second mongod has a namespace of its own");
    let inode = inode.to_string_lossy();
    let inode = inode
        .strip_prefix("net:[")
        .and_then(|i| i.strip_suffix(']'))
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &format!("\"{NAME}\", \"{DUP}\""));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("[mongodb]\nuri = \"{}\"\n", host.uri()));
    std::fs::write(&cfg, text).unwrap();
    let mut agent = Agent::start(&cfg, &[]);
    let addr = agent.metrics_addr();
    let w = Duration::from_secs(60);

    let plain = format!("{NAME}:{port}");
    // Both attached, in either order; the "not polled" line comes first.
    let lines = wait_lines(
        &mut agent,
        &[
            &[&format!("watching {plain} (pid {})", host.pid())],
            &[
                &format!("watching {plain}@"),
                &format!("(pid {})", pod.pid()),
            ],
            &[
                &format!("{plain}@"),
                &format!("listens on port {port} in another network namespace"),
                "not polled",
            ],
        ],
        w,
    );
    let scoped = id_after(&lines[1], "watching ");
    // Its namespace's inode, unless this test's own cgroup names a
    // container (then that, which the mongod shares).
    assert!(
        scoped == format!("{plain}@netns:{inode}")
            || scoped.starts_with(&format!("{plain}@container:"))
            || scoped.starts_with(&format!("{plain}@pod:")),
        "{scoped}\n{}",
        agent.log
    );
    assert_eq!(id_after(&lines[2], "mdiag agent: "), scoped, "{}", lines[2]);
    // The host's mongod is polled (its version, as it answers buildInfo),
    // the other not; both are up.
    let version = host
        .command(bson::doc! { "buildInfo": 1 })
        .get_str("version")
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + w;
    loop {
        let (_, _, text) = http_get(&addr, "/metrics");
        let info = |id: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("mdiag_target_info{{target=\"{id}\"")))
                .map(str::to_owned)
        };
        let up = |id: &str| sample(&text, &format!("mdiag_target_up{{target=\"{id}\"}}"));
        let polled =
            info(&plain).is_some_and(|l| l.contains(&format!("mongod_version=\"{version}\"")));
        if polled && up(&plain) == Some(1.0) && up(&scoped) == Some(1.0) {
            assert!(
                info(&scoped).is_some_and(|l| l.contains("mongod_version=\"\"")),
                "the namespaced mongod is not polled:\n{text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never showed both targets, the host's polled:\n{text}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(300));
    }

    // Two processes with one id: the second is skipped, counted, told once.
    let link = dir.path().join(DUP);
    std::os::unix::fs::symlink(sleep_binary(), &link).unwrap();
    let mut first = Sleeper::start(&link);
    let dup_id = watched_id(&mut agent, &format!("{DUP}@"), first.id(), w);
    let second = Sleeper::start(&link);
    agent.wait_for(
        &[
            &format!("{dup_id} (pid {}) is not watched", second.id()),
            "(reason duplicate_id)",
        ],
        w,
    );
    let skipped = |addr: &str, reason: &str| {
        let (_, _, text) = http_get(addr, "/metrics");
        sample(
            &text,
            &format!("mdiag_targets_skipped{{reason=\"{reason}\"}}"),
        )
    };
    wait_until(&mut agent, w, "duplicate_id counted", |_| {
        skipped(&addr, "duplicate_id") == Some(1.0)
    });
    assert_eq!(skipped(&addr, "unreadable"), Some(0.0));
    assert_eq!(skipped(&addr, "attach_failed"), Some(0.0));
    // Some scans later, still one line for it.
    agent.drain_for(Duration::from_secs(3));
    let told = agent
        .log
        .lines()
        .filter(|l| l.contains(&format!("(pid {}) is not watched", second.id())))
        .count();
    assert_eq!(told, 1, "told once:\n{}", agent.log);
    drop(second);
    wait_until(&mut agent, w, "duplicate_id back to 0", |_| {
        skipped(&addr, "duplicate_id") == Some(0.0)
    });
    first.kill_now();

    let (status, log) = agent.stop();
    assert!(status.success(), "{status:?}\n{log}");
    drop(pod);
    drop(host);
}

/// The id the agent watches `pid` under, from its "watching ID (pid N)"
/// line, once a line names an id starting with `prefix`.
fn watched_id(agent: &mut Agent, prefix: &str, pid: u32, w: Duration) -> String {
    let line = agent.wait_for(&[&format!("watching {prefix}"), &format!("(pid {pid})")], w);
    id_after(&line, "watching ")
}

/// The word after `marker` in `line`.
fn id_after(line: &str, marker: &str) -> String {
    line.split(marker)
        .nth(1)
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no word after {marker:?} in {line}"))
        .to_owned()
}

/// Waits until the log has, for each of `wanted`, a line with all its
/// parts, in whatever order they came; returns those lines.
fn wait_lines(agent: &mut Agent, wanted: &[&[&str]], w: Duration) -> Vec<String> {
    let deadline = Instant::now() + w;
    loop {
        let found: Vec<Option<String>> = wanted
            .iter()
            .map(|parts| {
                let line = agent
                    .log
                    .lines()
                    .find(|l| parts.iter().all(|p| l.contains(p)));
                line.map(str::to_owned)
            })
            .collect();
        if let Some(all) = found.iter().cloned().collect::<Option<Vec<_>>>() {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "never logged all of {wanted:?}:\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(300));
    }
}

fn sleep_binary() -> std::path::PathBuf {
    let path = std::path::PathBuf::from("/bin/sleep");
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// Polls `done` (with the agent's log drained between tries) until it
/// holds, or fails after `w`.
fn wait_until(agent: &mut Agent, w: Duration, what: &str, mut done: impl FnMut(&Agent) -> bool) {
    let deadline = Instant::now() + w;
    while !done(agent) {
        assert!(Instant::now() < deadline, "never: {what}\n{}", agent.log);
        agent.drain_for(Duration::from_millis(300));
    }
}

/// A `sleep` run under another name, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start(link: &std::path::Path) -> Sleeper {
        Sleeper(Command::new(link).arg("600").spawn().unwrap())
    }

    fn id(&self) -> u32 {
        self.0.id()
    }

    fn kill_now(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.kill_now();
    }
}
