//! Headless Chromium (Debian's `chromium`, installed by `cargo xtask
//! setup`) for the HTML report: the DOM it builds, screenshots, and what
//! the report's flame graphs answer to a search once rendered.

use std::{path::Path, process::Command};

/// The Chromium binary.
pub fn chromium() -> &'static str {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return p;
        }
    }
    panic!("no chromium: run `cargo xtask setup` (Debian package chromium)");
}

/// Runs headless Chromium with `args` (and the flags a root, GPU-less,
/// first-run browser needs).
pub fn browser(args: &[&str]) -> std::process::Output {
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .args(args)
        .output()
        .expect("run chromium")
}

/// One flame graph of a report as Chromium rendered it, after searching it
/// the way its Search button does.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchedGraph {
    /// The graph's document title (the report's heading for it).
    pub title: String,
    /// inferno's script ran (its `total_samples` is a number).
    pub scripted: bool,
    /// The share of the graph the search matched, in percent.
    pub matched_pct: f64,
}

/// Opens the HTML report `html` in Chromium with a probe added to each
/// flame graph's document (a sandboxed `srcdoc` iframe): once the graph has
/// loaded, it searches `term` through inferno's own `search_prompt` and
/// posts what the match counter then says to the page, which lists it. So a
/// graph counts only if Chromium parsed the iframe, ran inferno's script
/// and drew the frames the search matched.
pub fn search_flame_graphs(html: &str, term: &str, dir: &Path) -> Vec<SearchedGraph> {
    let probe = format!(
        "<script>window.addEventListener('load',function(){{\
         window.prompt=function(){{return '{term}'}};search_prompt();\
         parent.postMessage('mdiag-flame|'+document.title+'|'+(typeof total_samples)+'|'+\
         matchedtxt.firstChild.nodeValue,'*')}})</script>"
    );
    // The iframes' documents are escaped into their `srcdoc` attributes.
    let escaped = probe
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let html = html.replace("&lt;/body&gt;", &format!("{escaped}&lt;/body&gt;"));
    let listener = "<pre id=\"mdiag-flame-log\"></pre><script>window.addEventListener('message',\
                    function(e){document.getElementById('mdiag-flame-log').textContent+=e.data+'\\n'})\
                    </script></body>";
    let html = html.replacen("</body>", listener, 1);
    let page = dir.join("report-searched.html");
    std::fs::write(&page, html).unwrap();
    let out = browser(&[
        "--virtual-time-budget=10000",
        "--dump-dom",
        &format!("file://{}", page.display()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = dom
        .split("<pre id=\"mdiag-flame-log\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_default();
    log.lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("mdiag-flame|")?.split('|');
            let title = f.next()?.replace("&amp;", "&");
            let scripted = f.next()? == "number";
            let matched_pct = f
                .next()?
                .trim()
                .strip_prefix("Matched: ")?
                .trim_end_matches('%')
                .parse()
                .ok()?;
            Some(SearchedGraph {
                title,
                scripted,
                matched_pct,
            })
        })
        .collect()
}
