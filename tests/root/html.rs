//! The HTML report of a real recording, opened in headless Chromium (Debian's
//! `chromium`, installed by `cargo xtask setup`): the charts must survive a
//! real browser's parser (checked in the DOM it dumps) and the page must
//! render (a screenshot is written next to the report for a human to look at).

use std::{path::Path, process::Command};

use mdiag_tests::{browser::browser, finish, require_root, run_mdiag, start_record};

const LOOPBACK: &str = env!("CARGO_BIN_EXE_mdiag-loopback");
const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");

#[test]
fn html_report_renders_with_its_charts_in_chromium() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.mdiag");
    // Host-wide, with loopback traffic (NET_RX) and an oversubscribed spinner
    // (preemptions), so every chart has data: both start once the probes
    // are attached, and run for most of the recording.
    let threads = (2 * mdiag::host::online_cpus() + 2).to_string();
    let (record, stderr) = start_record(&[
        "--host-wide",
        "--duration",
        "4s",
        "--no-progress",
        "-o",
        rec.to_str().unwrap(),
    ]);
    let mut load = Command::new(LOOPBACK)
        .args(["--ms", "3000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut spin = Command::new(SPIN)
        .args(["--threads", &threads, "--spin-ms", "3000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, _, err) = finish(record, stderr);
    let _ = load.wait();
    let _ = spin.wait();
    assert!(status.success(), "{err}");

    let html = run_mdiag(&["explain", "--format", "html", rec.to_str().unwrap()]);
    assert!(
        html.status.success(),
        "{}",
        String::from_utf8_lossy(&html.stderr)
    );
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html.stdout).unwrap();
    let url = format!("file://{}", page.display());

    let dom = browser(&["--dump-dom", &url]);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    for id in ["chart-softirq", "chart-preemptions", "chart-timeline"] {
        let at = dom
            .find(&format!("<svg id=\"{id}\""))
            .unwrap_or_else(|| panic!("{id} missing from the DOM Chromium built"));
        let end = at + dom[at..].find("</svg>").expect("closed svg");
        let svg = &dom[at..end];
        let marks = svg.matches("<rect class=\"bar\"").count() + svg.matches("<circle").count();
        assert!(marks > 0, "{id} has no marks: {svg}");
    }
    assert!(dom.contains("<h2>Findings</h2>") && dom.contains("<h2>Measurements</h2>"));
    // Top-down: the overview, then the charts, then the findings' details.
    let at = |h: &str| dom.find(&format!("<h2>{h}</h2>"));
    assert!(at("Charts") < at("Findings"), "charts after the details");
    if let Some(overview) = at("Overview") {
        assert!(Some(overview) < at("Charts"));
        // Every finding in the overview links to its details, as built.
        let table = &dom[overview..at("Charts").unwrap_or(dom.len())];
        let links: Vec<&str> = table
            .split("href=\"#")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect();
        // An overview of checklist items only is one line, no table.
        assert!(
            !links.is_empty() || !table.contains("<table"),
            "an overview table without links: {table}"
        );
        for id in links {
            assert!(
                dom.contains(&format!("id=\"{id}\"")),
                "no details for #{id}"
            );
        }
        assert!(
            !table.contains("<table") || dom.contains("<details class=\"finding\" open=\"\">"),
            "details not collapsible"
        );
    }

    // The screenshot: kept in target/ for a human to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mdiag-report.png");
    let _ = std::fs::remove_file(&shot);
    let s = browser(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1100,2400",
        &url,
    ]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 20_000,
        "screenshot suspiciously small: {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}
