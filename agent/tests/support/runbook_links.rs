//! Whether a runbook link of the alert rules names a page the project
//! ships: the link's part after its docs URL is a file of `docs/`, and its
//! anchor one of that file's headings as the forge renders it (GitHub's
//! heading ids). Shared by the unit tests of `agent/src/alerts.rs` (the
//! rules `mdiag alerts` prints) and `agent/tests/alerts.rs` (the Helm
//! chart's PrometheusRule) through `#[path]`.
#![allow(dead_code, reason = "each test crate uses part of it")]

use std::collections::BTreeSet;
use std::path::Path;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// Prometheus's placeholder for a finding's rule in a link.
const RULE_LABEL: &str = "{{ $labels.rule }}";

/// What is wrong with `page` (a link's part after the docs URL:
/// `rules/<id>.md`, `agent.md#alerts`) as a page of `docs_dir`: a file
/// that is missing (a page with Prometheus's `{{ $labels.rule }}` stands
/// for the page of each of `rule_ids`), an anchor that is no heading of its
/// file. Empty: the page is there.
pub fn problems(page: &str, docs_dir: &Path, rule_ids: &[String]) -> Vec<String> {
    let (file, anchor) = page
        .split_once('#')
        .map_or((page, None), |(f, a)| (f, Some(a)));
    let files: Vec<String> = if file.contains(RULE_LABEL) {
        if rule_ids.is_empty() {
            return vec![format!("{page}: no rule ids to check it for")];
        }
        rule_ids
            .iter()
            .map(|id| file.replace(RULE_LABEL, id))
            .collect()
    } else {
        vec![file.to_owned()]
    };
    let mut problems = Vec::new();
    for file in files {
        let path = docs_dir.join(&file);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("no page {file} ({}: {e})", path.display()));
                continue;
            }
        };
        if let Some(anchor) = anchor
            && !anchors(&text).contains(anchor)
        {
            problems.push(format!("{file} has no heading #{anchor}"));
        }
    }
    problems
}

/// The anchors of a Markdown text's headings as GitHub makes them: the
/// heading's text in lower case, without punctuation, spaces as `-`, a
/// repeated one numbered (`-1`, `-2`).
pub fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                let slug: String = text
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                let mut anchor = slug.clone();
                let mut n = 0;
                while !seen.insert(anchor.clone()) {
                    n += 1;
                    anchor = format!("{slug}-{n}");
                }
            }
            _ => {}
        }
    }
    seen
}
