//! Flame graphs: a [`Profile`](super::Profile)'s folded stacks drawn as a
//! self-contained, searchable SVG, and that SVG wrapped in a sandboxed
//! `<iframe>` for the HTML report.
//!
//! The drawing is inferno's (`inferno::flamegraph`, the Rust port of Brendan
//! Gregg's flamegraph.pl) rather than hand-written SVG: it is well kept, it
//! handles the corner cases (frame merging, text truncation, tiny frames),
//! and it draws the very SVG flamegraph.pl users know, with its click-to-zoom,
//! its mouse-over details and its search (the "Search" button, Ctrl-F or F3:
//! a regular expression, matching frames turn magenta and the share of the
//! samples they cover is shown bottom right).
//!
//! The options are fixed here so every graph mdiag draws looks the same:
//! a fixed width of [`WIDTH_PX`], deterministic colours (a hash of the
//! function name, never inferno's random pick: the same profile always gives
//! the same bytes), stacks merged (a flame graph, not a flame chart), and
//!
//! - on-CPU: inferno's `java` palette, which reads the `_[k]` annotation of
//!   kernel frames (orange) and tells C++ (`::`, yellow) from C (red; names
//!   starting with a capital, such as most thread classes, come out green,
//!   Java's rule); the count is "samples" and the subtitle says what one
//!   sample is worth.
//! - off-CPU: the `io` palette (blues, on a blue background) of Brendan
//!   Gregg's off-CPU flame graphs; the values are nanoseconds, shown in µs
//!   (inferno's `factor`: frame widths stay exact, only the labels scale).
//!
//! The SVG is self-contained: its style and script are inline, its fonts are
//! the generic `monospace`, and the only URLs left in it are XML namespace
//! names (never fetched) and text (inferno's credits, in comments and in a
//! message of its script); inferno's DOCTYPE, whose DTD a validating XML
//! reader could fetch, is dropped.
//!
//! inferno's script assumes it owns its document (it finds *the* `svg`, *the*
//! `#frames`, listens on `window`), so two of them inline in one HTML page
//! would clash. [`flame_iframe`] therefore gives each graph its own document,
//! an `<iframe srcdoc>` sandboxed to `allow-scripts allow-modals`:
//!
//! - `allow-scripts` runs inferno's script (zoom, details, search), in an
//!   opaque origin: it cannot reach the report or anything else.
//! - `allow-modals` lets the search ask for its term: inferno calls
//!   `window.prompt()`, which a sandbox without it silently blocks (the
//!   button would do nothing). Dialogs (prompt, alert) are all it adds.
//! - inferno records the zoom and search in the page address
//!   (`history.replaceState("?s=…")`); a srcdoc document (`about:srcdoc`) may
//!   not take such an address and the browser throws, which would stop the
//!   search half-way (frames highlighted, but no "Reset Search" and no
//!   percentage). A two-line script before inferno's makes that call a no-op
//!   inside the iframe; the SVG itself is not patched.
//!
//! Ctrl-F and F3 reach inferno's search once the graph has the focus (a click
//! in it, on the background to leave the zoom as it is); otherwise they open the browser's own find, which finds the frame
//! labels too (not the truncated ones). A Content-Security-Policy on the page
//! holding the iframes is inherited by the srcdoc document: one forbidding
//! inline scripts leaves the graph drawn but not interactive.

use std::io;

use inferno::flamegraph::{
    self, Options,
    color::{BasicPalette, MultiPalette, Palette},
};

use super::ProfileKind;

/// Width of every flame graph, in pixels (inferno's and flamegraph.pl's
/// default). The iframe scales the graph down when the page is narrower.
pub const WIDTH_PX: usize = 1200;

/// Why no flame graph could be drawn.
#[derive(Debug, thiserror::Error)]
pub enum FlameError {
    /// No line held a positive count (inferno draws nothing from that).
    #[error("no samples to draw a flame graph from")]
    NoSamples,
    /// inferno failed while writing the SVG.
    #[error("drawing the flame graph: {0}")]
    Render(#[source] io::Error),
    /// inferno wrote bytes that are not UTF-8 (it never should).
    #[error("the flame graph SVG is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
}

/// Draws folded stack lines (`a;b;c 42`, as `folded::folded_lines` writes
/// them, in any order) as an SVG flame graph titled `title`.
///
/// For [`ProfileKind::OnCpu`] the counts are samples taken at `freq_hz` per
/// CPU (0: not known, no subtitle); for [`ProfileKind::OffCpu`] they are
/// nanoseconds blocked, labelled in µs.
pub fn flame_svg(
    title: &str,
    lines: &[String],
    kind: ProfileKind,
    freq_hz: u64,
) -> Result<String, FlameError> {
    let mut opt = options(title, kind, freq_hz);
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut out).map_err(|e| {
        // inferno sorts the lines itself, so its only `InvalidData` is "No
        // stack counts found".
        if e.kind() == io::ErrorKind::InvalidData {
            FlameError::NoSamples
        } else {
            FlameError::Render(e)
        }
    })?;
    let svg = String::from_utf8(out)?;
    Ok(drop_doctype(svg))
}

/// inferno's options for `kind`.
fn options(title: &str, kind: ProfileKind, freq_hz: u64) -> Options<'static> {
    let mut opt = Options::default();
    opt.title = title.to_owned();
    opt.image_width = Some(WIDTH_PX);
    opt.deterministic = true;
    opt.hash = false;
    opt.palette_map = None;
    opt.flame_chart = false;
    opt.reverse_stack_order = false;
    opt.no_sort = false;
    match kind {
        ProfileKind::OnCpu => {
            opt.colors = Palette::Multi(MultiPalette::Java);
            opt.count_name = "samples".to_owned();
            opt.factor = 1.0;
            opt.subtitle = (freq_hz > 0).then(|| {
                format!(
                    "on-CPU, sampled at {freq_hz} Hz per CPU: one sample is about {:.1} ms of CPU time",
                    1000.0 / freq_hz as f64
                )
            });
        }
        ProfileKind::OffCpu => {
            opt.colors = Palette::Basic(BasicPalette::Io);
            opt.count_name = "µs".to_owned();
            opt.factor = 0.001;
            opt.subtitle = Some("off-CPU: time blocked, in µs".to_owned());
        }
    }
    opt
}

/// Removes the `<!DOCTYPE svg PUBLIC … "http://…svg11.dtd">` inferno writes:
/// SVG needs none, and its system identifier is a URL an XML reader with DTD
/// loading on would fetch.
fn drop_doctype(svg: String) -> String {
    // Only in the prolog, before the root element.
    let prolog = svg.find("<svg").unwrap_or(0);
    let Some(start) = svg[..prolog].find("<!DOCTYPE") else {
        return svg;
    };
    let Some(len) = svg[start..].find('>') else {
        return svg;
    };
    let mut end = start + len + 1;
    if svg[end..].starts_with('\n') {
        end += 1;
    }
    let mut out = String::with_capacity(svg.len());
    out.push_str(&svg[..start]);
    out.push_str(&svg[end..]);
    out
}

/// Run before inferno's script inside the iframe: `history.replaceState`
/// throws in an `about:srcdoc` document, and inferno calls it in the middle
/// of its search, zoom and reset handlers.
const SRCDOC_SHIM: &str = "(function(){var h=window.history,r=h.replaceState;\
h.replaceState=function(){try{r.apply(h,arguments)}catch(e){}};})();";

/// Style of the iframe's own document: no margin, and the graph scaled down
/// (never up) to the iframe's width.
const SRCDOC_CSS: &str =
    "html,body{margin:0;padding:0;background:#fff}svg{display:block;max-width:100%;height:auto}";

/// An HTML fragment: `svg` (from [`flame_svg`]) in its own sandboxed
/// `<iframe srcdoc>` titled `title`, as tall as the SVG says it is
/// (`height_hint_px` when the SVG does not say), as wide as the page allows
/// up to [`WIDTH_PX`]. See the module documentation for why an iframe and why
/// `sandbox="allow-scripts allow-modals"`.
pub fn flame_iframe(title: &str, svg: &str, height_hint_px: u32) -> String {
    // The graph scales down with the iframe's width: keep its aspect ratio
    // so that the iframe shrinks with it instead of leaving a blank band.
    let (height, ratio) = match svg_size(svg) {
        Some((w, h)) => (h, format!("height:auto;aspect-ratio:{w}/{h};")),
        None => (height_hint_px, String::new()),
    };
    let doc = srcdoc(title, svg);
    format!(
        "<iframe class=\"flame\" title=\"{}\" sandbox=\"allow-scripts allow-modals\" \
         width=\"100%\" height=\"{height}\" \
         style=\"border:0;display:block;max-width:{WIDTH_PX}px;{ratio}\" srcdoc=\"{}\"></iframe>",
        escape_attr(title),
        escape_attr(&doc),
    )
}

/// The HTML document the iframe shows: the SVG inline, without the XML
/// declaration and DOCTYPE an HTML parser has no use for.
fn srcdoc(title: &str, svg: &str) -> String {
    let body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    format!(
        "<!DOCTYPE html><html><head><title>{}</title><style>{SRCDOC_CSS}</style>\
         <script>{SRCDOC_SHIM}</script></head><body>{body}</body></html>",
        escape_attr(title),
    )
}

/// The `width="…"` and `height="…"` of the SVG's root element, in pixels.
fn svg_size(svg: &str) -> Option<(u32, u32)> {
    let start = svg.find("<svg")?;
    let tag = &svg[start..start + svg[start..].find('>')?];
    let attr = |name: &str| -> Option<u32> {
        let value = tag
            .split(&format!(" {name}=\""))
            .nth(1)?
            .split('"')
            .next()?;
        value.trim_end_matches("px").parse().ok().filter(|&v| v > 0)
    };
    Some((attr("width")?, attr("height")?))
}

/// Escapes text for an HTML attribute value in double quotes (and for
/// element text).
fn escape_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{Profile, folded::folded_lines as folded, test_stack as stack};

    /// 100 samples: conn 75 (60 in the B-tree search, 15 in the kernel's
    /// send), WTCheckpointThr 25 (truncated).
    fn on_cpu() -> Profile {
        Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 99,
            duration_ns: 1_000_000_000,
            stacks: vec![
                stack(
                    "conn",
                    &[
                        ("mongo::ServiceStateMachine::_runOnce", "mongod"),
                        ("__wt_row_search", "mongod"),
                    ],
                    false,
                    60,
                ),
                stack(
                    "conn",
                    &[
                        ("mongo::ServiceStateMachine::_runOnce", "mongod"),
                        ("__send", "libc.so.6"),
                        ("tcp_sendmsg", "[kernel]"),
                    ],
                    false,
                    15,
                ),
                stack(
                    "WTCheckpointThr",
                    &[("__wt_checkpoint", "mongod")],
                    true,
                    25,
                ),
            ],
        }
    }

    fn off_cpu() -> Profile {
        Profile {
            kind: ProfileKind::OffCpu,
            freq_hz: 0,
            duration_ns: 1_000_000_000,
            stacks: vec![
                stack(
                    "conn",
                    &[
                        ("pthread_cond_wait", "libc.so.6"),
                        ("futex_wait", "[kernel]"),
                    ],
                    false,
                    3_000_000,
                ),
                stack(
                    "conn",
                    &[("__poll", "libc.so.6"), ("do_sys_poll", "[kernel]")],
                    false,
                    1_000_000,
                ),
            ],
        }
    }

    fn svg_of(p: &Profile) -> String {
        flame_svg("CPU", &folded(p), p.kind, p.freq_hz).unwrap()
    }

    #[test]
    fn on_cpu_svg_has_the_frames_and_their_shares() {
        let svg = flame_svg("mongod on-CPU", &folded(&on_cpu()), ProfileKind::OnCpu, 99).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
        assert!(svg.contains(">mongod on-CPU</text>"));
        assert!(svg.contains("sampled at 99 Hz per CPU"));
        assert!(svg.contains(r#"width="1200""#));
        for title in [
            "<title>all (100 samples, 100%)</title>",
            "<title>conn (75 samples, 75.00%)</title>",
            "<title>mongo::ServiceStateMachine::_runOnce (75 samples, 75.00%)</title>",
            "<title>__wt_row_search (60 samples, 60.00%)</title>",
            "<title>__send (15 samples, 15.00%)</title>",
            // The `_[k]` annotation colours the frame and is not shown.
            "<title>tcp_sendmsg (15 samples, 15.00%)</title>",
            "<title>WTCheckpointThr (25 samples, 25.00%)</title>",
            "<title>[truncated] (25 samples, 25.00%)</title>",
            "<title>__wt_checkpoint (25 samples, 25.00%)</title>",
        ] {
            assert!(svg.contains(title), "{title}");
        }
        assert!(!svg.contains("_[k]"));
        // Searchable: inferno's script and its Search button are there.
        assert!(svg.contains("function search(term)"));
        assert!(svg.contains(r#"id="search""#));
        assert!(svg.contains("var fluiddrawing = false"));
    }

    #[test]
    fn off_cpu_svg_counts_microseconds() {
        let p = off_cpu();
        let svg = flame_svg("mongod off-CPU", &folded(&p), p.kind, p.freq_hz).unwrap();
        for title in [
            "<title>all (4,000 µs, 100%)</title>",
            "<title>pthread_cond_wait (3,000 µs, 75.00%)</title>",
            "<title>futex_wait (3,000 µs, 75.00%)</title>",
            "<title>do_sys_poll (1,000 µs, 25.00%)</title>",
        ] {
            assert!(svg.contains(title), "{title}");
        }
        assert!(svg.contains("off-CPU: time blocked"));
        // The io palette's blue background, not the hot palette's yellow.
        assert!(svg.contains("#e0e0ff"), "{}", &svg[..2000]);
    }

    #[test]
    fn on_cpu_colours_kernel_frames_apart() {
        let svg = svg_of(&on_cpu());
        let fill = |name: &str| {
            let at = svg.find(&format!("<title>{name} (")).unwrap();
            let rest = &svg[at..];
            let f = rest.find("fill=\"").unwrap() + 6;
            rest[f..f + rest[f..].find('"').unwrap()].to_owned()
        };
        // java palette: kernel orange, C++ yellow, C red.
        let rgb = |s: String| -> Vec<u32> {
            s.trim_start_matches("rgb(")
                .trim_end_matches(')')
                .split(',')
                .map(|c| c.parse().unwrap())
                .collect()
        };
        let kernel = rgb(fill("tcp_sendmsg"));
        let cpp = rgb(fill("mongo::ServiceStateMachine::_runOnce"));
        assert_ne!(kernel, cpp);
        assert!(kernel[0] > 150 && kernel[2] < 100, "{kernel:?}");
    }

    #[test]
    fn svg_is_self_contained() {
        for p in [on_cpu(), off_cpu()] {
            let svg = svg_of(&p);
            // No DTD to fetch.
            assert!(!svg.contains("<!DOCTYPE"));
            // Every attribute holding a URL is a namespace declaration (a
            // name, never fetched). inferno's credits (a comment, a comment
            // of its script, a string of its script) are text, not links.
            for scheme in ["=\"http://", "=\"https://"] {
                for (at, _) in svg.match_indices(scheme) {
                    let attr = svg[..at].rsplit(' ').next().unwrap();
                    assert!(
                        attr == "xmlns" || attr.starts_with("xmlns:"),
                        "URL in attribute {attr}: {}",
                        &svg[at..at + 60]
                    );
                }
            }
            // Nothing else that loads: no link, import, external font or
            // image, no request from the script; `url()` only names an
            // element of the SVG itself.
            for needle in [
                "<link",
                "@import",
                "@font-face",
                "href=",
                " src=",
                "<image",
                "fetch(",
                "XMLHttpRequest",
                "import(",
            ] {
                assert!(!svg.contains(needle), "{needle}");
            }
            assert_eq!(svg.matches("url(").count(), svg.matches("url(#").count());
            assert!(svg.contains("font-family:monospace"));
        }
    }

    #[test]
    fn names_are_escaped() {
        let p = Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 99,
            duration_ns: 1_000_000_000,
            stacks: vec![stack(
                "conn",
                &[("std::vector<int>::push_back(int&&) [clone .cold]", "mongod")],
                false,
                1,
            )],
        };
        let svg = svg_of(&p);
        assert!(svg.contains(
            "<title>std::vector&lt;int&gt;::push_back(int&amp;&amp;) [clone .cold] (1 samples, 100.00%)</title>"
        ));
        let html = flame_iframe("t", &svg, 100);
        assert!(html.contains("std::vector&amp;lt;int&amp;gt;::push_back(int&amp;amp;&amp;amp;)"));
    }

    #[test]
    fn svg_is_deterministic() {
        let p = on_cpu();
        let lines = folded(&p);
        let a = flame_svg("t", &lines, p.kind, p.freq_hz).unwrap();
        // Input order does not matter either.
        let reversed: Vec<String> = lines.iter().rev().cloned().collect();
        let b = flame_svg("t", &reversed, p.kind, p.freq_hz).unwrap();
        assert_eq!(a, b);
        let q = off_cpu();
        assert_eq!(svg_of(&q), svg_of(&q));
    }

    #[test]
    fn no_samples_is_an_error() {
        assert!(matches!(
            flame_svg("t", &[], ProfileKind::OnCpu, 99),
            Err(FlameError::NoSamples)
        ));
        assert!(matches!(
            flame_svg("t", &["a;b 0".to_owned()], ProfileKind::OnCpu, 99),
            Err(FlameError::NoSamples)
        ));
    }

    /// Undoes [`escape_attr`] (and nothing else: the test input has no other
    /// entity).
    fn unescape(s: &str) -> String {
        s.replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    fn attr<'a>(html: &'a str, name: &str) -> &'a str {
        let start = html.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        &html[start..start + html[start..].find('"').unwrap()]
    }

    #[test]
    fn iframe_escapes_and_round_trips() {
        let svg = svg_of(&on_cpu());
        let title = r#"conn <on-CPU> "mongod" & 'co'"#;
        let html = flame_iframe(title, &svg, 300);
        assert!(html.starts_with("<iframe "));
        assert!(html.ends_with("></iframe>"));
        // One element: every <, > and " of the document is escaped.
        assert_eq!(html.matches('<').count(), 2, "{html}");
        assert_eq!(html.matches('>').count(), 2);
        assert_eq!(attr(&html, "sandbox"), "allow-scripts allow-modals");
        assert_eq!(unescape(attr(&html, "title")), title);
        let doc = unescape(attr(&html, "srcdoc"));
        assert_eq!(doc, srcdoc(title, &svg));
        // The SVG is there whole, minus its XML declaration.
        let body = &svg[svg.find("<svg").unwrap()..];
        assert!(doc.contains(&format!("<body>{body}</body>")));
        assert!(!doc.contains("<?xml"));
        assert!(doc.find(SRCDOC_SHIM).unwrap() < doc.find("function search(term)").unwrap());
    }

    #[test]
    fn iframe_is_as_tall_as_the_svg() {
        let svg = svg_of(&on_cpu());
        let (w, h) = svg_size(&svg).unwrap();
        assert_eq!(w, 1200);
        // Title and subtitle, 5 levels (all, class, 3 frames), details line.
        assert!((100..400).contains(&h), "{h}");
        let html = flame_iframe("t", &svg, 999);
        assert_eq!(attr(&html, "height"), h.to_string());
        assert!(attr(&html, "style").contains(&format!("aspect-ratio:1200/{h};")));
        // Not an inferno SVG: the hint, no aspect ratio.
        let html = flame_iframe("t", "<svg width=\"10\"></svg>", 250);
        assert_eq!(attr(&html, "height"), "250");
        assert!(!html.contains("aspect-ratio"));
    }

    fn chromium() -> Option<&'static str> {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
    }

    /// Two flame graphs in one page, each in its iframe, in headless
    /// Chromium: both documents load, inferno's script runs in each
    /// (`init` ran and the search works despite `about:srcdoc`), and each
    /// reports back to the page. Skipped when Chromium is not installed
    /// (`cargo xtask setup` installs it).
    #[test]
    fn two_iframes_render_and_search_in_chromium() {
        let Some(chromium) = chromium() else {
            eprintln!("skipped: no chromium (cargo xtask setup installs it)");
            return;
        };
        let on = flame_iframe("on-CPU", &svg_of(&on_cpu()), 300);
        let off = flame_iframe("off-CPU", &svg_of(&off_cpu()), 300);
        // A test-only probe, after inferno's script in each document: once
        // the document has loaded (inferno's `init` runs on the SVG's load,
        // before), search the way the Search button does, with `prompt`
        // answering `term` (a headless browser would wait on a real one),
        // and write what the button and the match counter then say into the
        // page's log. The write is synchronous, so the page's own load
        // event, which waits for every iframe's, finds every line written,
        // and Chromium dumps the DOM only after it: no time budget, nothing
        // left to chance on a busy host. Writing into the page needs its
        // origin (`allow-same-origin`, test only); the document is still
        // `about:srcdoc`, whose `replaceState` the shim must tame.
        let probe = |html: &str, term: &str| {
            let script = format!(
                "<script>window.addEventListener('load',function(){{\
                 window.prompt=function(){{return '{term}'}};search_prompt();\
                 parent.document.getElementById('log').textContent+=document.title+'|'+\
                 (typeof total_samples)+'|'+searchbtn.firstChild.nodeValue+'|'+\
                 matchedtxt.firstChild.nodeValue+'\\n'}})</script>"
            );
            html.replace(
                "&lt;/body&gt;",
                &format!("{}&lt;/body&gt;", escape_attr(&script)),
            )
            .replace(
                "sandbox=\"allow-scripts allow-modals\"",
                "sandbox=\"allow-scripts allow-modals allow-same-origin\"",
            )
        };
        let page = format!(
            "<!DOCTYPE html><html><head><title>flames</title></head><body>\
             <pre id=\"log\"></pre>{}{}</body></html>",
            probe(&on, "wt_row"),
            probe(&off, "futex"),
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flames.html");
        std::fs::write(&path, page).unwrap();
        let out = std::process::Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--dump-dom",
            ])
            .arg(format!("file://{}", path.display()))
            .output()
            .unwrap();
        let dom = String::from_utf8_lossy(&out.stdout);
        let log = dom
            .split("<pre id=\"log\">")
            .nth(1)
            .and_then(|s| s.split("</pre>").next())
            .unwrap_or_default();
        let mut lines: Vec<&str> = log.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "off-CPU|number|Reset Search|Matched: 75.0%",
                "on-CPU|number|Reset Search|Matched: 60.0%",
            ],
            "{dom}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
