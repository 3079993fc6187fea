//! `mdiag fleet --format html`: one self-contained page (the report's
//! inline stylesheet, no script, nothing fetched) laying out the same
//! [`FleetView`] as the terminal format, with tables where the terminal
//! aligns columns. Every text from the store is escaped.

use std::fmt::Write;

use super::render::{
    FACTS_COLUMNS, SILENT_COLUMNS, filter_text, host_list, human_secs, more_facts, states_line,
};
use super::view::{Episode, FACTS_SHOWN, FleetView, HostHistory, RuleGroup};
use crate::report::svg::esc;

/// What the fleet page adds to the report's stylesheet: a colour per state.
const CSS: &str = r#"
.state{font-weight:600;padding:0 .3em;border-radius:3px}
.state-firing{background:#fbe3e0;color:#a1260d}
.state-flapping{background:#fdf0d5;color:#8a5a00}
.state-pending{background:#e8f0fb;color:#1d4f91}
.state-stale{background:#eee;color:#555}
.state-resolved{background:#e3f4e6;color:#1e6b31}
.timeline{margin:.2em 0 .8em 1.2em;font-size:.9em;color:#333}
"#;

fn state(s: &str) -> String {
    format!("<span class=\"state state-{}\">{}</span>", esc(s), esc(s))
}

fn row(out: &mut String, cells: &[String], head: bool) {
    let tag = if head { "th" } else { "td" };
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<{tag}>{c}</{tag}>");
    }
    out.push_str("</tr>\n");
}

fn group(out: &mut String, g: &RuleGroup) {
    let _ = writeln!(
        out,
        "<h3><code>{}</code> {}: {} episode{} on {} host{}</h3>",
        esc(&g.rule),
        state(&g.state),
        g.episodes,
        if g.episodes == 1 { "" } else { "s" },
        g.hosts.len(),
        if g.hosts.len() == 1 { "" } else { "s" },
    );
    let _ = writeln!(out, "<p>{}</p>", esc(&g.title));
    if let (Some(a), Some(b)) = (&g.first_since, &g.last_since) {
        let _ = writeln!(
            out,
            "<p>{} since {} (latest {})</p>",
            esc(&g.state),
            esc(a),
            esc(b)
        );
    }
    out.push_str("<table>\n");
    row(out, &FACTS_COLUMNS.map(String::from), true);
    for f in g.by_facts.iter().take(FACTS_SHOWN) {
        row(
            out,
            &[
                esc(&f.arch),
                esc(&f.mongod_version),
                esc(&f.kernel),
                f.episodes.to_string(),
                f.hosts.to_string(),
            ],
            false,
        );
    }
    out.push_str("</table>\n");
    if let Some(more) = more_facts(g) {
        let _ = writeln!(out, "<p>{}</p>", esc(&more));
    }
    let _ = writeln!(out, "<p>Hosts: {}</p>", esc(&host_list(&g.hosts)));
}

fn episodes(out: &mut String, list: &[Episode], with_host: bool) {
    out.push_str("<table>\n");
    let mut head = vec![
        "state",
        "rule",
        "target",
        "episode start",
        "since",
        "transitions",
    ];
    if with_host {
        head.insert(0, "host");
    }
    row(
        out,
        &head.into_iter().map(String::from).collect::<Vec<_>>(),
        true,
    );
    for e in list {
        let timeline: Vec<String> = e
            .transitions
            .iter()
            .map(|t| {
                format!(
                    "{} {} &rarr; {}",
                    esc(t.at.as_deref().unwrap_or("?")),
                    esc(&t.from),
                    esc(&t.to)
                )
            })
            .collect();
        let mut cells = vec![
            state(&e.state),
            format!("<code>{}</code><br>{}", esc(&e.rule), esc(&e.title)),
            esc(&e.target),
            esc(e.episode_start.as_deref().unwrap_or("?")),
            esc(e.since.as_deref().unwrap_or("?")),
            format!("<div class=\"timeline\">{}</div>", timeline.join("<br>")),
        ];
        if with_host {
            cells.insert(0, esc(&e.host));
        }
        row(out, &cells, false);
    }
    out.push_str("</table>\n");
}

fn host(out: &mut String, h: &HostHistory) {
    let _ = writeln!(out, "<h2>Host {}</h2>", esc(&h.host));
    if h.known {
        out.push_str("<table>\n");
        for (k, v) in [
            ("architecture", h.arch.clone()),
            ("kernel", h.kernel.clone()),
            ("mongod", h.mongod_version.clone()),
            ("replica set", h.rs_nm.clone().unwrap_or_else(|| "-".into())),
            ("agent", h.agent_version.clone()),
            ("targets", h.targets.join(", ")),
            ("first seen", h.first_seen.clone().unwrap_or_default()),
            ("last seen", h.last_seen.clone().unwrap_or_default()),
        ] {
            row(out, &[k.to_owned(), esc(&v)], false);
        }
        out.push_str("</table>\n");
    } else {
        out.push_str("<p class=\"no-data\">Not in the store's hosts: its agent never reported, or the name is wrong.</p>\n");
    }
    if h.episodes.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"no-data\">No findings on {} in the store.</p>",
            esc(&h.host)
        );
    } else {
        let _ = writeln!(
            out,
            "<h2>History: {} episode{}, newest first</h2>",
            h.episodes.len(),
            if h.episodes.len() == 1 { "" } else { "s" }
        );
        episodes(out, &h.episodes, false);
    }
}

/// The view as one HTML document.
pub fn render(view: &FleetView) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>mdiag fleet</h1>");
    let _ = writeln!(
        body,
        "<p>Store {} (database {}), {}. Hosts: {} known, {} silent (no report for {} or more).</p>",
        esc(&view.store),
        esc(&view.database),
        esc(&view.generated_at),
        view.hosts_total,
        view.silent_total,
        esc(&human_secs(view.silent_after_secs)),
    );
    if let Some(f) = filter_text(view) {
        let _ = writeln!(body, "<p>Filter: {}</p>", esc(&f));
    }
    if let Some(h) = &view.host {
        host(&mut body, h);
    } else if view.groups.is_empty() {
        body.push_str(
            "<p class=\"no-data\">No findings: no open episode in the store matches.</p>\n",
        );
    } else {
        let _ = writeln!(body, "<h2>Now</h2>\n<p>{}</p>", esc(&states_line(view)));
        for g in &view.groups {
            group(&mut body, g);
        }
    }
    if !view.rule_episodes.is_empty() {
        let _ = writeln!(
            body,
            "<h2>Latest episodes of <code>{}</code></h2>",
            esc(view.filter.rule.as_deref().unwrap_or(""))
        );
        episodes(&mut body, &view.rule_episodes, true);
    }
    if !view.silent.is_empty() {
        let _ = writeln!(
            body,
            "<h2>Silent hosts ({})</h2>\n<table>",
            view.silent_total
        );
        row(&mut body, &SILENT_COLUMNS.map(String::from), true);
        for s in &view.silent {
            row(
                &mut body,
                &[
                    esc(&s.host),
                    esc(s.last_seen.as_deref().unwrap_or("?")),
                    s.silent_secs.map_or_else(|| "?".into(), human_secs),
                    esc(&s.arch),
                    esc(&s.kernel),
                    esc(&s.mongod_version),
                ],
                false,
            );
        }
        body.push_str("</table>\n");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"mdiag {}\">\n<title>mdiag fleet</title>\n<style>{}{CSS}</style>\n</head>\n<body>\n{body}<footer>Written by mdiag {} from the fleet store; self-contained, no network access needed.</footer>\n</body>\n</html>\n",
        esc(&view.mdiag_version),
        crate::report::html::CSS,
        esc(&view.mdiag_version),
    )
}
