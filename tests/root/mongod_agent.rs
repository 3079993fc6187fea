//! `mdiag agent` watching the real mongod 6.0.5 (a single-node replica set,
//! polled through `[mongodb] uri`) through what happens to it in production:
//! a clean restart (SIGTERM as systemd sends it, then mongod started again on
//! the same port and dbpath) and a crash (`kill -9`).
//!
//! Ground truth from outside the agent: the planted host setting (net.ipv4
//! tcp_keepalive_time, as in agent.rs) makes the finding, mongod's own pid
//! and port say which process is which, its log says when it listened
//! again ("Waiting for connections"). mongod runs under its own name
//! (`mdiag-mongod`, a symlink), so that the agent watches it and not the
//! host's other mongods. What docs/agent.md promises: the restarted mongod
//! is watched again under the same id (`NAME:PORT`) within 5 s of listening
//! (1-3 s seen with both CPUs loaded; on a host where one attach takes
//! longer, within that attach and a scan), with its
//! families attached and polled (`mdiag_target_info` names the set, its
//! id and this member's state as mongod's own replSetGetStatus and
//! replSetGetConfig say them), and its finding goes on in the same episode (stale
//! while away, then firing again, never a new pending); after `kill -9` the
//! finding stays stale, never resolved.
//!
//! Cost: 17-28 s (two mongod starts, one-second windows to fire a finding
//! and to see it stale and back); 35-45 s with both CPUs loaded.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mdiag_tests::agent::{Agent, http_get, sample};
use mdiag_tests::mongod::{Mongod, Options};
use mdiag_tests::require_root;

use crate::agent::{Keepalive, config, rules_dir};

const RULE: &str = "host.tcp_keepalive";
/// The name (comm) this test's mongod runs under, and the agent watches.
const NAME: &str = "mdiag-mongod";

#[test]
fn the_agent_follows_a_real_mongod_through_a_restart_and_a_crash() {
    let _serial = mdiag_tests::serial();
    require_root();
    let _planted = Keepalive::set(7200);
    // The set named with `--replSet`, which reaches getCmdLineOpts as
    // `replication.replSet` (a config file's `replSetName` is checked in
    // `real_mongod.rs`): `rs_nm` must show it. Run under its own name, so that the agent watches this mongod and
    // not the host's others (whose tests its probes would disturb).
    let mut server = Mongod::start_with(Options {
        repl_set: Some("rs0".into()),
        name: Some(NAME.into()),
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), &format!("\"{NAME}\""));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("[mongodb]\nuri = \"{}\"\n", server.uri()));
    std::fs::write(&cfg, text).unwrap();

    let agent_started = SystemTime::now();
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    let id = format!("{NAME}:{}", server.port());
    let w = Duration::from_secs(60);
    agent.wait_for(&[&format!("watching {id} (pid {})", server.pid())], w);
    // What an attach costs on this host: from the agent's start to its
    // first "watching" line (start-up, a scan, the probes loaded).
    let first_attach = ms(agent.matched_at) - ms(agent_started);
    agent.wait_for(
        &[&format!("finding {RULE} on {id}:"), "pending → firing"],
        w,
    );
    let before = wait_metrics(&mut agent, &addr, &id, &repl_truth(&server), "firing", w);

    // SIGTERM: a clean shutdown; the finding goes stale, not resolved.
    let pid1 = server.pid();
    server.stop();
    agent.wait_for(&[&format!("{id} (pid {pid1}) is gone")], w);
    agent.wait_for(&[&format!("finding {RULE} on {id}:"), "firing → stale"], w);
    wait_state(&mut agent, &addr, &id, "stale", w);

    // Started again on the same port: the same id, within 5 s of listening
    // (when mongod's own log says it waits for connections, to when the
    // agent's line came).
    let spawned = SystemTime::now();
    server.restart();
    let pid2 = server.pid();
    let line = agent.wait_for(&["watching ", &format!("(pid {pid2})")], w);
    assert!(
        line.contains(&format!("watching {id} (pid {pid2})")),
        "the restarted mongod is watched under another id than {id}: {line}\n{}",
        agent.log
    );
    let listened = listened_at(&server.log());
    let took = ms(agent.matched_at) - listened;
    // Within 5 s, or, on a host slow enough that one attach takes longer,
    // within what the first attach took and a scan (1 s) more: a restart
    // costs no more than an attach.
    let bound = 5_000.max(first_attach + 2_000);
    assert!(
        took < bound,
        "re-attached {took} ms after mongod listened again ({} ms after it was started; \
         the first attach took {first_attach} ms)\n{}",
        ms(agent.matched_at) - ms(spawned),
        agent.log
    );
    agent.wait_for(&[&format!("finding {RULE} on {id}:"), "stale → firing"], w);
    let after = wait_metrics(&mut agent, &addr, &id, &repl_truth(&server), "firing", w);
    assert_eq!(
        before.probes_up, after.probes_up,
        "the same families attached before and after the restart"
    );
    eprintln!(
        "re-attached {took} ms after mongod listened (it took {} ms to listen); families: {:?}",
        listened - ms(spawned),
        after.probes_up
    );

    // kill -9: stale and left so, whatever the number of windows after.
    let restarted = server.pid();
    server.kill();
    agent.wait_for(&[&format!("{id} (pid {restarted}) is gone")], w);
    agent.wait_for(&[&format!("finding {RULE} on {id}:"), "firing → stale"], w);
    let from = windows(&addr);
    // resolve_after = 3 clean windows would resolve a finding; let more pass.
    let deadline = Instant::now() + w;
    while windows(&addr) < from + 5.0 {
        assert!(
            Instant::now() < deadline,
            "the agent stopped evaluating windows\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(500));
    }
    wait_state(&mut agent, &addr, &id, "stale", w);
    let (_, _, text) = http_get(&addr, "/metrics");
    assert_eq!(
        sample(&text, &format!("mdiag_target_up{{target=\"{id}\"}}")).unwrap_or(0.0),
        0.0,
        "a killed mongod is not up:\n{text}"
    );

    let (status, log) = agent.stop();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        !log.contains("→ resolved"),
        "a mongod away is never resolved:\n{log}"
    );
    let pendings = log
        .lines()
        .filter(|l| l.contains(&format!("finding {RULE} on {id}:")) && l.contains("→ pending"))
        .count();
    assert_eq!(pendings, 1, "one episode throughout, begun once:\n{log}");
    // (Other mongods of this host, if any, are watched too: only lines of
    // the restarted one's pid count.)
    assert!(
        !log.lines()
            .any(|l| l.contains(&format!("{NAME}@")) && l.contains(&format!("(pid {restarted})"))),
        "the restarted mongod was never known by another id:\n{log}"
    );
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// When mongod last logged "Waiting for connections" (its listener up), in
/// Unix ms, from its JSON log's `t.$date` (UTC, as mongod writes it here).
fn listened_at(log: &str) -> i64 {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("\"msg\":\"Waiting for connections\""))
        .unwrap_or_else(|| panic!("mongod never logged that it listens:\n{log}"));
    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    let date = v["t"]["$date"].as_str().expect("t.$date");
    assert!(
        date.ends_with("+00:00"),
        "mongod's log is not in UTC: {date}"
    );
    crate::fleet::chrono_free::parse(date)
}

/// The labels `mdiag_target_info` must show of a member, as mongod says
/// them (outside mdiag): `rs_state` from replSetGetStatus (`myState`, the
/// number, as mongodb_exporter's label holds it; its own member says
/// PRIMARY), `cl_id` from replSetGetConfig's `settings.replicaSetId`.
fn repl_truth(server: &Mongod) -> [String; 2] {
    let status = server.command(bson::doc! { "replSetGetStatus": 1 });
    let members = status.get_array("members").expect("members");
    let me = members
        .iter()
        .filter_map(|m| m.as_document())
        .find(|m| m.get_bool("self").unwrap_or(false))
        .expect("its own member");
    assert_eq!(
        me.get_str("stateStr").expect("stateStr"),
        "PRIMARY",
        "a single-node set, initiated: {status}"
    );
    let state = status
        .get("myState")
        .and_then(bson::Bson::as_i32)
        .expect("myState");
    let config = server.command(bson::doc! { "replSetGetConfig": 1 });
    let id = config
        .get_document("config")
        .and_then(|c| c.get_document("settings"))
        .and_then(|s| s.get_object_id("replicaSetId"))
        .expect("settings.replicaSetId");
    [
        format!("rs_state=\"{state}\""),
        format!("cl_id=\"{}\"", id.to_hex()),
    ]
}

/// What `/metrics` said of the target once it showed what was waited for.
struct Seen {
    probes_up: Vec<String>,
}

/// Waits until `/metrics` shows the target polled (`mdiag_target_info`
/// with `rs_nm="rs0"`, mongod's version and the `repl` labels, as mongod
/// answered them), up, with families attached, and the finding in `state`.
fn wait_metrics(
    agent: &mut Agent,
    addr: &str,
    id: &str,
    repl: &[String],
    state: &str,
    w: Duration,
) -> Seen {
    let deadline = Instant::now() + w;
    loop {
        let (_, _, text) = http_get(addr, "/metrics");
        let info = text
            .lines()
            .find(|l| l.starts_with(&format!("mdiag_target_info{{target=\"{id}\"")));
        let polled = info.is_some_and(|l| {
            l.contains("rs_nm=\"rs0\"")
                && l.contains("mongod_version=\"6.0.5\"")
                && repl.iter().all(|r| l.contains(r.as_str()))
        });
        let up = sample(&text, &format!("mdiag_target_up{{target=\"{id}\"}}")) == Some(1.0);
        let mut probes_up: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with(&format!("mdiag_probe_up{{target=\"{id}\"")))
            .filter(|l| value(l) == Some(1.0))
            .filter_map(|l| l.split("family=\"").nth(1)?.split('"').next())
            .map(str::to_owned)
            .collect();
        probes_up.sort();
        if polled && up && !probes_up.is_empty() && finding_state(&text, id) == Some(state.into()) {
            return Seen { probes_up };
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never showed {id} polled, up, with families and its finding {state} \
             (info {info:?}, up {up}, families {probes_up:?}, finding {:?}):\n{text}\n{}",
            finding_state(&text, id),
            agent.log
        );
        agent.drain_for(Duration::from_millis(300));
    }
}

/// Waits until `/metrics` shows the finding in `state`.
fn wait_state(agent: &mut Agent, addr: &str, id: &str, state: &str, w: Duration) {
    let deadline = Instant::now() + w;
    loop {
        let (_, _, text) = http_get(addr, "/metrics");
        let now = finding_state(&text, id);
        if now.as_deref() == Some(state) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the finding on {id} is {now:?}, not {state}:\n{text}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(300));
    }
}

/// The state `mdiag_checklist_item` gives the planted checklist item on
/// `id` (TCP keepalive is a setting, exported apart from findings).
fn finding_state(text: &str, id: &str) -> Option<String> {
    let prefix = format!("mdiag_checklist_item{{rule=\"{RULE}\",target=\"{id}\",state=\"");
    text.lines()
        .filter(|l| value(l) == Some(1.0))
        .find_map(|l| {
            l.strip_prefix(&prefix)?
                .split('"')
                .next()
                .map(str::to_owned)
        })
}

/// The value of an exposition line.
fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next()?.parse().ok()
}

/// `mdiag_windows_total`: windows the agent evaluated.
fn windows(addr: &str) -> f64 {
    let (_, _, text) = http_get(addr, "/metrics");
    sample(&text, "mdiag_windows_total{}").unwrap_or(0.0)
}
