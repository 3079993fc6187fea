//! `mdiag agent` against the real host: a planted problem (a host setting
//! the test sets itself, so the ground truth is known) goes pending →
//! firing → resolved once removed, `/metrics` answers with real series, the
//! flight recording of the moment is ranked by `explain` with that finding
//! first; a watched process that restarts is re-attached within seconds
//! and its findings go stale (never resolved) while it is away; one seen
//! before it listens is known by its port once it does, in the same episode.

use std::{path::PathBuf, process::Command, time::Duration};

use mdiag_tests::agent::{Agent, http_get, sample};
use mdiag_tests::{require_root, run_mdiag};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");
const KEEPALIVE: &str = "/proc/sys/net/ipv4/tcp_keepalive_time";
const RULE: &str = "host.tcp_keepalive";

/// Sets net.ipv4.tcp_keepalive_time and puts the old value back when dropped.
pub(crate) struct Keepalive(String);

impl Keepalive {
    pub(crate) fn set(secs: u32) -> Keepalive {
        let old = std::fs::read_to_string(KEEPALIVE).unwrap();
        std::fs::write(KEEPALIVE, secs.to_string()).unwrap();
        Keepalive(old)
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        let _ = std::fs::write(KEEPALIVE, self.0.trim());
    }
}

/// A rules directory holding only the planted rule, so what fires is known.
/// The builtin rule applies to a mongod target only; these tests watch
/// stand-in processes (a spinner, a WiredTiger workload), so the copy drops
/// that one line and is otherwise the builtin rule.
pub(crate) fn rules_dir(dir: &std::path::Path) -> PathBuf {
    let rules = dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rules/host-tcp-keepalive.toml");
    let text = std::fs::read_to_string(src).unwrap();
    let any_target = text.replacen("target = \"mongod\"\n", "", 1);
    assert_ne!(
        any_target, text,
        "host.tcp_keepalive no longer names its target"
    );
    std::fs::write(rules.join("host-tcp-keepalive.toml"), any_target).unwrap();
    rules
}

pub(crate) fn config(dir: &std::path::Path, processes: &str) -> PathBuf {
    let path = dir.join("mdiag.toml");
    let text = format!(
        "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
         processes = [{processes}]\nflight_before = \"60s\"\nflight_after = \"1s\"\n\
         [agent.lifecycle]\nfire_in = 2\nof_last = 3\nresolve_after = 3\n",
        dir.join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `/metrics` (`text`) says the host watch's sched family is attached.
pub(crate) fn assert_host_sched_attached(text: &str) {
    assert_eq!(
        sample(
            text,
            "mdiag_probe_up{target=\"host\",family=\"sched\",reason=\"attached\"}"
        ),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn a_planted_problem_fires_resolves_and_leaves_a_flight_recording() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), "\"mdiag-no-such\"");
    // The problem: keepalive at the kernel's 2-hour default.
    let planted = Keepalive::set(7200);
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    agent.wait_for(
        &["watching the host", "probes attached"],
        Duration::from_secs(120),
    );
    let w = Duration::from_secs(60);
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "inactive → pending"],
        w,
    );
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "pending → firing"],
        w,
    );

    // The endpoint answers with real series: the finding, the probes, the
    // figures of the last window, the agent's own health.
    let (status, ctype, text) = http_get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let firing =
        format!("mdiag_checklist_item{{rule=\"{RULE}\",target=\"host\",state=\"firing\"}}");
    assert_eq!(sample(&text, &firing), Some(1.0), "{text}");
    assert_host_sched_attached(&text);
    let share = sample(
        &text,
        "mdiag_sched_involuntary_share_ratio{target=\"host\"}",
    )
    .unwrap_or_else(|| panic!("no sched figure: {text}"));
    assert!((0.0..=1.0).contains(&share), "{share}");
    let rss = sample(&text, "process_resident_memory_bytes{}").unwrap();
    let own_rss = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .unwrap()
        * 1024.0;
    // The exposition is at most a second old: same order of magnitude as /proc now.
    assert!(
        rss > own_rss / 2.0 && rss < own_rss * 2.0,
        "{rss} vs /proc {own_rss}"
    );
    let (status, _, _) = http_get(&addr, "/nope");
    assert!(status.contains("404"), "{status}");
    // Within the series limit on this busy host, every bucket counted.
    let series = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    assert!(series <= 251, "{series} series:\n{text}");
    // Counters and a classic histogram of the target, drops per family,
    // and the kernel's own accounting of the programs' run time.
    // Involuntary switches can be 0 for a window of a quiet host (a CI
    // run saw 0 beside 185 voluntary ones); both series are there, and
    // together they count the host's switches. Their numbers are checked
    // against /proc in `sched`.
    let switches = |kind: &str| {
        let s = format!("mdiag_sched_context_switches_total{{target=\"host\",kind=\"{kind}\"}}");
        sample(&text, &s).unwrap_or_else(|| panic!("no {kind} switches: {text}"))
    };
    assert!(
        switches("involuntary") + switches("voluntary") > 0.0,
        "{text}"
    );
    let runq = "mdiag_sched_runqueue_delay_seconds_count{target=\"host\"}";
    assert!(sample(&text, runq).is_some_and(|v| v > 0.0), "{text}");
    let drops = "mdiag_probe_drops_total{target=\"host\",family=\"sched\"}";
    assert!(sample(&text, drops).is_some(), "{text}");
    assert!(
        sample(&text, "mdiag_bpf_run_seconds_total{}").is_some_and(|v| v > 0.0),
        "{text}"
    );
    // A scrape only copies the last exposition: fast even on a busy host.
    let mut took: Vec<Duration> = (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            http_get(&addr, "/metrics");
            t.elapsed()
        })
        .collect();
    took.sort();
    assert!(took[2] < Duration::from_millis(50), "scrapes took {took:?}");

    let saved = agent.wait_for(&["flight recording saved:"], w);
    let flight = saved.rsplit("saved: ").next().unwrap().trim().to_owned();

    // SIGHUP reads the file again; SIGUSR1 saves a recording on demand.
    let pid = agent.child.id() as i32;
    // SAFETY: kill(2) on the agent this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    agent.wait_for(&["SIGHUP: settings read again"], w);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let on_demand = agent.wait_for(&["flight recording saved:", "on-demand"], w);
    let on_demand = on_demand.rsplit("saved: ").next().unwrap().trim();
    assert!(std::path::Path::new(on_demand).exists(), "{on_demand}");

    // Removed: resolved after the clean windows, never before.
    let fixed = Keepalive::set(120);
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "firing → resolved"],
        w,
    );
    drop(fixed);
    drop(planted);
    let (status, log) = agent.stop();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("stopped"), "{log}");
    // One line per change, never one per window.
    assert_eq!(log.matches("pending → firing").count(), 1, "{log}");
    crate::record_cli::assert_detached();

    // The flight recording is an ordinary recording, and explain ranks the
    // finding of the moment first, with the value the test planted.
    let out = run_mdiag(&[
        "explain",
        "--rules",
        rules.to_str().unwrap(),
        "--format",
        "json",
        &flight,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["checklist"][0]["rule_id"], RULE, "{report:#}");
    let evidence = report["checklist"][0]["evidence"].to_string();
    assert!(evidence.contains("7200"), "{evidence}");
}

#[test]
fn a_restarted_target_is_reattached_and_its_findings_stale_meanwhile() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), "\"mdiag-spin\"");
    let _planted = Keepalive::set(7200);
    let spin = || {
        Command::new(SPIN)
            .args([
                "--threads",
                "1",
                "--spin-ms",
                "10",
                "--wait-stdin",
                "--linger",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = spin();
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let w = Duration::from_secs(60);
    let pid1 = first.id().to_string();
    let line = agent.wait_for(&["watching mdiag-spin", &format!("(pid {pid1})")], w);
    let id = line
        .split("watching ")
        .nth(1)
        .and_then(|s| s.split(" (pid").next())
        .unwrap()
        .to_owned();
    agent.wait_for(&[&format!("on {id}:"), "pending → firing"], w);

    first.kill().unwrap();
    first.wait().unwrap();
    agent.wait_for(&[&id, "is gone"], Duration::from_secs(10));
    agent.wait_for(&[&format!("on {id}:"), "firing → stale"], w);

    let mut second = spin();
    let restarted = std::time::Instant::now();
    let pid2 = second.id().to_string();
    agent.wait_for(&[&format!("watching {id}"), &format!("(pid {pid2})")], w);
    let took = restarted.elapsed();
    // Re-attached within 5 s of the restart (a scan every second, then attach).
    assert!(
        took < Duration::from_secs(5),
        "re-attached after {took:?}\n{}",
        agent.log
    );
    agent.wait_for(&[&format!("on {id}:"), "stale → firing"], w);
    second.kill().unwrap();
    second.wait().unwrap();
    let (status, log) = agent.stop();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        !log.contains("→ resolved"),
        "data missing is never resolved:\n{log}"
    );
}

#[test]
fn a_polled_mongod_is_known_by_its_port_and_labelled_from_its_own_answers() {
    let _serial = mdiag_tests::serial();
    require_root();
    // The real mongod, standalone, under a name of its own (so that only
    // this one is watched).
    let server = mdiag_tests::mongod::Mongod::start_with(mdiag_tests::mongod::Options {
        name: Some("mdiag-mongod-a".into()),
        ..Default::default()
    });
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", server.pid()))
        .unwrap()
        .trim()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), &format!("\"{comm}\""));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("[mongodb]\nuri = \"{}\"\n", server.uri()));
    std::fs::write(&cfg, text).unwrap();
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    let id = format!("{comm}:{}", server.port());
    let w = Duration::from_secs(90);
    agent.wait_for(&[&format!("watching {id} (pid {})", server.pid())], w);
    agent.wait_for(&[&format!("{id}: mongod answers serverStatus")], w);
    // The next window's exposition names the server's version, as mongod
    // itself gave it (buildInfo), on the target's info series.
    let deadline = std::time::Instant::now() + w;
    let info = loop {
        let (_, _, metrics) = http_get(&addr, "/metrics");
        if let Some(line) = metrics
            .lines()
            .find(|l| l.starts_with(&format!("mdiag_target_info{{target=\"{id}\"")))
            && !line.contains("mongod_version=\"\"")
        {
            break line.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{metrics}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(500));
    };
    assert!(
        info.contains("rs_nm=\"\""),
        "a standalone server has no replica set: {info}"
    );
    let (status, log) = agent.stop();
    assert!(status.success(), "{log}");
}

/// A process named `mdiag-late` (set through its own `comm`) that listens on
/// a port of the kernel's choice once told to on stdin, and prints it.
const LATE: &str = "import socket, sys\n\
open('/proc/self/comm', 'w').write('mdiag-late')\n\
print('named', flush=True)\n\
sys.stdin.readline()\n\
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
print(s.getsockname()[1], flush=True)\n\
sys.stdin.readline()\n";

#[test]
fn a_target_seen_before_it_listens_is_known_by_its_port_once_it_does() {
    use std::io::{BufRead, Write};
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), "\"mdiag-late\"");
    let _planted = Keepalive::set(7200);
    let mut late = Command::new("python3")
        .args(["-c", LATE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(late.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "named");
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    let w = Duration::from_secs(60);
    let pid = late.id();
    // Not listening: known by its executable first; its finding fires.
    let seen = agent.wait_for(&["watching mdiag-late@", &format!("(pid {pid})")], w);
    let exe_id = seen
        .split("watching ")
        .nth(1)
        .and_then(|s| s.split(" (pid").next())
        .unwrap()
        .to_owned();
    agent.wait_for(&[&format!("on {exe_id}:"), "pending → firing"], w);

    let mut stdin = late.stdin.take().unwrap();
    stdin.write_all(b"listen\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let id = format!("mdiag-late:{port}");
    let listened = std::time::Instant::now();
    agent.wait_for(&[&format!("{exe_id} now listens: watched as {id}")], w);
    agent.wait_for(&[&format!("watching {id} (pid {pid})")], w);
    // Looked at again every 5 s: known by its port within two looks.
    let took = listened.elapsed();
    assert!(took < Duration::from_secs(12), "{took:?}\n{}", agent.log);
    // The same episode goes on under the new name: firing, with no new
    // pending line for it.
    let firing =
        format!("mdiag_checklist_item{{rule=\"{RULE}\",target=\"{id}\",state=\"firing\"}}");
    let deadline = std::time::Instant::now() + w;
    loop {
        let (_, _, text) = http_get(&addr, "/metrics");
        if sample(&text, &firing) == Some(1.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{text}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(500));
    }
    drop(stdin);
    late.wait().unwrap();
    let (status, log) = agent.stop();
    assert!(status.success(), "{log}");
    assert!(
        !log.contains(&format!("on {id}: inactive → pending")),
        "the episode began under the old name and goes on:\n{log}"
    );
}
