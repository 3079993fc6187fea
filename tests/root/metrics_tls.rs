//! The real `mdiag agent` with `--web.config.file`: `/metrics` over TLS with
//! basic auth, scraped by curl (a client outside mdiag) trusting only the
//! CA made here. The right password reads the agent's metrics, a wrong or
//! missing one gets 401, plain HTTP gets no answer. A renewed certificate
//! (renamed over the files) is presented without a restart, and the
//! agent's metrics count the reload.

use std::{path::Path, process::Command, time::Duration};

use mdiag_tests::{agent::Agent, require_root};

use crate::agent::config;

#[path = "../../agent/tests/support/pki.rs"]
mod pki;

const PASSWORD: &str = "correct horse";

/// `curl` on `url`: (HTTP status, or 0 when no HTTP answer came; body, or
/// curl's error).
fn curl(dir: &Path, url: &str, port: u16, user: Option<&str>) -> (u16, String) {
    let body = dir.join("body");
    let _ = std::fs::remove_file(&body);
    let mut cmd = Command::new("curl");
    cmd.args(["--silent", "--show-error", "--max-time", "10", "--cacert"])
        .arg(dir.join("ca.crt"))
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .args(["--write-out", "%{http_code}", "--output"])
        .arg(&body)
        .arg(url);
    if let Some(u) = user {
        cmd.args(["--user", u]);
    }
    let out = cmd.output().expect("run curl");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let text = std::fs::read_to_string(&body).unwrap_or_default();
    (code, text + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_agent_serves_metrics_over_tls_with_basic_auth() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    pki::Ca::new().write(
        dir.path(),
        &["localhost"],
        ["server.crt", "server.key", "ca.crt"],
    );
    let web = dir.path().join("web-config.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  prometheus: {}\n",
            bcrypt::hash(PASSWORD, 4).unwrap()
        ),
    )
    .unwrap();
    let cfg = config(dir.path(), "\"mdiag-none\"");
    let mut agent = Agent::start(
        &cfg,
        &["--no-mongo", "--web.config.file", web.to_str().unwrap()],
    );
    let line = agent.wait_for(
        &["serving metrics at https://127.0.0.1:", "(authenticated)"],
        Duration::from_secs(30),
    );
    let port: u16 = line
        .rsplit("127.0.0.1:")
        .next()
        .and_then(|s| s.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line}"));
    let https = format!("https://localhost:{port}/metrics");
    let right = format!("prometheus:{PASSWORD}");
    // The first exposition comes with the main loop's first turn.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = curl(dir.path(), &https, port, Some(&right));
        assert_eq!(code, 200, "{body}\n{}", agent.log);
        if body.contains("mdiag_build_info") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{body}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(200));
    }
    for user in [Some("prometheus:wrong"), Some("nobody:correct horse"), None] {
        let (code, body) = curl(dir.path(), &https, port, user);
        assert_eq!(code, 401, "{user:?}: {body}");
        assert!(!body.contains("mdiag_"), "{user:?}: {body}");
    }
    let (code, body) = curl(
        dir.path(),
        &format!("http://localhost:{port}/metrics"),
        port,
        Some(&right),
    );
    assert_eq!(code, 0, "plain HTTP answered: {body}");
    renewal(dir.path(), &mut agent, port, &https, &right);
    let (status, log) = agent.stop();
    assert!(status.success(), "{log}");
    // Loopback: no warning about exposure.
    assert!(!log.contains("without authentication"), "{log}");
    assert!(log.contains("changed: read again"), "{log}");
}

/// A new pair from another CA renamed over the agent's files, as a renewer
/// does; curl then trusts only that CA: it reads the metrics once the agent
/// presents the new certificate, which the agent's own metrics count.
fn renewal(dir: &Path, agent: &mut Agent, port: u16, https: &str, user: &str) {
    let new = dir.join("renewed");
    std::fs::create_dir(&new).unwrap();
    pki::Ca::new().write(&new, &["localhost"], ["server.crt", "server.key", "ca.crt"]);
    for f in ["server.key", "server.crt", "ca.crt"] {
        std::fs::rename(new.join(f), dir.join(f)).unwrap();
    }
    let reloaded = "mdiag_web_tls_reloads_total{files=\"certificate\",result=\"ok\"} ";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = curl(dir, https, port, Some(user));
        // 200: the new certificate was presented; the exposition (built
        // once a second) then shows the reload. The key renamed first may
        // have been seen alone (a failed reload): the pair then read well.
        if code == 200 && body.contains(reloaded) {
            assert!(
                body.contains("mdiag_web_tls_reload_failed{files=\"certificate\"} 0"),
                "{body}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the renewed certificate was not presented: {code}: {body}\n{}",
            agent.log
        );
        agent.drain_for(Duration::from_millis(200));
    }
}
