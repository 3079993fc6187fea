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
/// writes what the match counter then says into a list in the page. So a
/// graph counts only if Chromium parsed the iframe, ran inferno's script
/// and drew the frames the search matched.
///
/// No time budget: the write is synchronous, in the iframe's load handler,
/// and the page's load event waits for every iframe's, after which Chromium
/// dumps the DOM. (Posting messages to the page instead lost graphs on a
/// busy host: one posted before the page's listener existed, or arriving
/// from the iframe's own process after the dump.) Writing into the page
/// needs its origin, so the test adds `allow-same-origin` to the sandbox;
/// the documents stay `about:srcdoc`, as a reader's are.
pub fn search_flame_graphs(html: &str, term: &str, dir: &Path) -> Vec<SearchedGraph> {
    let probe = format!(
        "<script>window.addEventListener('load',function(){{\
         window.prompt=function(){{return '{term}'}};search_prompt();\
         parent.document.getElementById('mdiag-flame-log').textContent+=\
         'mdiag-flame|'+document.title+'|'+(typeof total_samples)+'|'+\
         matchedtxt.firstChild.nodeValue+'\\n'}})</script>"
    );
    // The iframes' documents are escaped into their `srcdoc` attributes.
    let escaped = probe
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let sandbox = "sandbox=\"allow-scripts allow-modals\"";
    let frames = html.matches(sandbox).count();
    let html = html
        .replace("&lt;/body&gt;", &format!("{escaped}&lt;/body&gt;"))
        .replace(
            sandbox,
            "sandbox=\"allow-scripts allow-modals allow-same-origin\"",
        );
    // The list comes before every iframe, so it exists when they load.
    let body = html.find("<body>").expect("the report has a <body>") + "<body>".len();
    let mut html = html;
    html.insert_str(body, "<pre id=\"mdiag-flame-log\"></pre>");
    let page = dir.join("report-searched.html");
    std::fs::write(&page, html).unwrap();
    let out = browser(&["--dump-dom", &format!("file://{}", page.display())]);
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
    let graphs: Vec<SearchedGraph> = log
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("mdiag-flame|")?.split('|');
            let title = f.next()?.replace("&amp;", "&");
            let scripted = f.next()? == "number";
            // inferno leaves the counter empty when nothing matched.
            let matched_pct = match f.next()?.trim() {
                "" => 0.0,
                m => m
                    .strip_prefix("Matched: ")?
                    .trim_end_matches('%')
                    .parse()
                    .ok()?,
            };
            Some(SearchedGraph {
                title,
                scripted,
                matched_pct,
            })
        })
        .collect();
    // Every graph's probe ran to its end (one whose script threw wrote
    // nothing).
    assert_eq!(
        graphs.len(),
        frames,
        "{frames} flame graphs in the report, {} searched: {graphs:#?}\nthe page's list:\n{log}",
        graphs.len()
    );
    graphs
}
