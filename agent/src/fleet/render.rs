//! `mdiag fleet`'s terminal and JSON formats. Both lay out one
//! [`FleetView`]; nothing here queries or decides what to show. The text is
//! plain (aligned columns, no colour), so it reads the same in a terminal,
//! a pager or a ticket.

use std::fmt::Write;

use super::view::{Episode, FACTS_SHOWN, FleetView, HOSTS_SHOWN, HostHistory, RuleGroup};

/// The columns of a rule's per-facts table, in every format.
pub const FACTS_COLUMNS: [&str; 5] = ["arch", "mongod", "kernel", "episodes", "hosts"];
/// The columns of the silent hosts' table, in every format.
pub const SILENT_COLUMNS: [&str; 6] = [
    "host",
    "last seen",
    "silent for",
    "arch",
    "kernel",
    "mongod",
];

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("writing the fleet view as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The view as pretty JSON (the shape of `docs/fleet-json.md`).
pub fn json(view: &FleetView) -> Result<String, RenderError> {
    Ok(format!("{}\n", serde_json::to_string_pretty(view)?))
}

/// `3h 20m`, `45s`: a duration as people say it (two units at most).
pub fn human_secs(secs: u64) -> String {
    let units = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];
    let mut parts = Vec::new();
    let mut rest = secs;
    for (name, size) in units {
        if rest >= size || (parts.is_empty() && size == 1) {
            parts.push(format!("{}{name}", rest / size));
            rest %= size;
        }
        if parts.len() == 2 {
            break;
        }
    }
    parts.join(" ")
}

/// Rows as columns padded to the widest cell, each line indented.
fn table(out: &mut String, indent: &str, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = indent.to_owned();
        for (c, cell) in r.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < r.len() {
                let pad = widths[c].saturating_sub(cell.chars().count()) + 2;
                line.push_str(&" ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The line under a per-facts table cut at [`FACTS_SHOWN`] rows.
pub fn more_facts(g: &RuleGroup) -> Option<String> {
    let rest = &g.by_facts[g.by_facts.len().min(FACTS_SHOWN)..];
    (!rest.is_empty()).then(|| {
        format!(
            "and {} more combinations with {} episodes (all in --format json)",
            rest.len(),
            rest.iter().map(|f| f.episodes).sum::<u64>()
        )
    })
}

/// `h1, h2, h3 and 5 more`.
pub fn host_list(hosts: &[String]) -> String {
    let mut s = hosts
        .iter()
        .take(HOSTS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if hosts.len() > HOSTS_SHOWN {
        let _ = write!(s, " and {} more", hosts.len() - HOSTS_SHOWN);
    }
    s
}

/// The filter line, or `None` without filters.
pub fn filter_text(view: &FleetView) -> Option<String> {
    let f = &view.filter;
    let mut parts = Vec::new();
    if let Some(h) = &f.host {
        parts.push(format!("host {h}"));
    }
    if let Some(r) = &f.rule {
        parts.push(format!("rule {r}"));
    }
    if let Some(s) = &f.since {
        parts.push(format!("open or resolved since {s}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// `12 firing on 10 hosts, 1 pending on 1 host`.
pub fn states_line(view: &FleetView) -> String {
    view.states
        .iter()
        .map(|s| {
            format!(
                "{} {} on {} host{}",
                s.episodes,
                s.state,
                s.hosts,
                if s.hosts == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn group(out: &mut String, g: &RuleGroup) {
    let _ = writeln!(
        out,
        "  {}  {} episode{} on {} host{}: {}",
        g.rule,
        g.episodes,
        if g.episodes == 1 { "" } else { "s" },
        g.hosts.len(),
        if g.hosts.len() == 1 { "" } else { "s" },
        g.title
    );
    if let (Some(a), Some(b)) = (&g.first_since, &g.last_since) {
        let _ = writeln!(out, "    {} since {a} (latest {b})", g.state);
    }
    let mut rows = vec![FACTS_COLUMNS.map(String::from).to_vec()];
    for f in g.by_facts.iter().take(FACTS_SHOWN) {
        rows.push(vec![
            f.arch.clone(),
            f.mongod_version.clone(),
            f.kernel.clone(),
            f.episodes.to_string(),
            f.hosts.to_string(),
        ]);
    }
    table(out, "    ", &rows);
    if let Some(more) = more_facts(g) {
        let _ = writeln!(out, "    {more}");
    }
    let _ = writeln!(out, "    hosts: {}", host_list(&g.hosts));
}

fn episode(out: &mut String, e: &Episode, with_host: bool) {
    let on = if with_host {
        format!("{} {}", e.host, e.target)
    } else {
        e.target.clone()
    };
    let _ = writeln!(out, "  [{}] {} on {}: {}", e.state, e.rule, on, e.title);
    let _ = writeln!(
        out,
        "    episode from {}, {} since {}",
        e.episode_start.as_deref().unwrap_or("?"),
        e.state,
        e.since.as_deref().unwrap_or("?")
    );
    for t in &e.transitions {
        let _ = writeln!(
            out,
            "      {}  {} -> {}",
            t.at.as_deref().unwrap_or("?"),
            t.from,
            t.to
        );
    }
}

fn host(out: &mut String, h: &HostHistory) {
    if h.known {
        let mut facts = format!(
            "{}, kernel {}, mongod {}",
            h.arch, h.kernel, h.mongod_version
        );
        if let Some(rs) = &h.rs_nm {
            let _ = write!(facts, ", replica set {rs}");
        }
        let _ = writeln!(out, "Host {}: {facts}; agent {}", h.host, h.agent_version);
        let _ = writeln!(
            out,
            "  targets: {}; first seen {}, last seen {}",
            if h.targets.is_empty() {
                "none".to_owned()
            } else {
                h.targets.join(", ")
            },
            h.first_seen.as_deref().unwrap_or("?"),
            h.last_seen.as_deref().unwrap_or("?")
        );
    } else {
        let _ = writeln!(
            out,
            "Host {}: not in the store's hosts (its agent never reported, or the name is wrong)",
            h.host
        );
    }
    if h.episodes.is_empty() {
        let _ = writeln!(out, "\nNo findings on {} in the store.", h.host);
        return;
    }
    let _ = writeln!(
        out,
        "\nHistory: {} episode{}, newest first",
        h.episodes.len(),
        if h.episodes.len() == 1 { "" } else { "s" }
    );
    for e in &h.episodes {
        episode(out, e, false);
    }
}

/// The view for a terminal.
pub fn terminal(view: &FleetView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mdiag fleet: {} (database {}), {}",
        view.store, view.database, view.generated_at
    );
    let _ = writeln!(
        out,
        "Hosts: {} known, {} silent (no report for {} or more)",
        view.hosts_total,
        view.silent_total,
        human_secs(view.silent_after_secs)
    );
    if let Some(f) = filter_text(view) {
        let _ = writeln!(out, "Filter: {f}");
    }
    out.push('\n');
    if let Some(h) = &view.host {
        host(&mut out, h);
    } else if view.groups.is_empty() {
        let _ = writeln!(
            out,
            "No findings: no episode in the store {}.",
            if view.filter.rule.is_some() || view.filter.since.is_some() {
                "matches the filter"
            } else {
                "is open"
            }
        );
    } else {
        let _ = writeln!(out, "Now: {}", states_line(view));
        let mut state = "";
        for g in &view.groups {
            if g.state != state {
                state = &g.state;
                let _ = writeln!(out, "\n{}", state.to_uppercase());
            }
            group(&mut out, g);
        }
    }
    if !view.rule_episodes.is_empty() {
        let _ = writeln!(
            out,
            "\nLatest episodes of {}, newest first",
            view.filter.rule.as_deref().unwrap_or("the rule")
        );
        for e in &view.rule_episodes {
            episode(&mut out, e, true);
        }
    }
    if !view.silent.is_empty() {
        let _ = writeln!(
            out,
            "\nSilent hosts ({}), longest silent first",
            view.silent_total
        );
        let mut rows = vec![SILENT_COLUMNS.map(String::from).to_vec()];
        for s in &view.silent {
            rows.push(vec![
                s.host.clone(),
                s.last_seen.clone().unwrap_or_else(|| "?".into()),
                s.silent_secs.map_or_else(|| "?".into(), human_secs),
                s.arch.clone(),
                s.kernel.clone(),
                s.mongod_version.clone(),
            ]);
        }
        table(&mut out, "  ", &rows);
        if view.silent_total > view.silent.len() as u64 {
            let _ = writeln!(
                out,
                "  and {} more",
                view.silent_total - view.silent.len() as u64
            );
        }
    }
    out
}
