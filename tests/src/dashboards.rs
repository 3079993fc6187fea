//! The Grafana dashboards of `packaging/grafana/` as the tests read them:
//! every query of every panel (rows' nested panels too), with its dashboard
//! and panel title for failure messages; template variables substituted by
//! real values (the template variables' own queries too); and the metric names a PromQL expression refers to.
//!
//! Shared by the root test that runs every query against a real Prometheus
//! scraping a real agent (`tests/root/dashboards.rs`) and the unit test that
//! checks the names against docs/agent.md without one
//! (`agent/tests/packaging.rs`, which includes this file by path: the unit
//! tier does not build this crate).

use std::path::{Path, PathBuf};

/// One query of one panel.
#[derive(Debug, Clone)]
pub struct Query {
    /// The dashboard's file name.
    pub dashboard: String,
    pub panel: String,
    /// The panel's type (timeseries, table, stat...).
    pub kind: String,
    pub expr: String,
    /// Run by Grafana as an instant query (table, stat), else a range query.
    pub instant: bool,
}

impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} / panel \"{}\": {}",
            self.dashboard, self.panel, self.expr
        )
    }
}

/// `packaging/grafana/` of this repository.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/grafana")
}

/// Every dashboard file, parsed: (file name, JSON), sorted by name.
pub fn load() -> Vec<(String, serde_json::Value)> {
    let mut out: Vec<(String, serde_json::Value)> = std::fs::read_dir(dir())
        .expect("read packaging/grafana")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a dashboard");
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", p.display()));
            let name = p.file_name().expect("a file name").to_string_lossy();
            (name.into_owned(), json)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no dashboards in {}", dir().display());
    out
}

/// Every panel of a dashboard, the panels inside rows included.
pub fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

/// Every query of every dashboard.
pub fn queries() -> Vec<Query> {
    let mut out = Vec::new();
    for (name, d) in load() {
        for p in panels(&d) {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or_default();
                out.push(Query {
                    dashboard: name.clone(),
                    panel: p["title"].as_str().unwrap_or_default().to_owned(),
                    kind: p["type"].as_str().unwrap_or_default().to_owned(),
                    expr: expr.to_owned(),
                    instant: t["instant"] == true,
                });
            }
        }
    }
    out
}

/// Every template variable of type query, as a [`Query`] of its series
/// selector: `label_values(SELECTOR, label)` is the selector's series
/// (Grafana asks for that label's values among them), `panel` names the
/// variable.
pub fn variable_queries() -> Vec<Query> {
    let mut out = Vec::new();
    for (name, d) in load() {
        for v in d["templating"]["list"].as_array().into_iter().flatten() {
            if v["type"] != "query" {
                continue;
            }
            let q = v["query"].as_str().unwrap_or_default();
            let selector = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|r| r.rsplit_once(','))
                .map_or(q, |(sel, _label)| sel.trim());
            out.push(Query {
                dashboard: name.clone(),
                panel: format!("variable ${}", v["name"].as_str().unwrap_or_default()),
                kind: "variable".to_owned(),
                expr: selector.to_owned(),
                instant: true,
            });
        }
    }
    out
}

/// `expr` with each `$name` and `${name}` of `vars` replaced by its value
/// (longest names first, so `$__rate_interval` is not read as `$__rate`).
pub fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut vars = vars.to_vec();
    vars.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let mut out = expr.to_owned();
    for (name, value) in vars {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    out
}

/// The `$variables` an expression uses.
pub fn variables(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let name: String = rest
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        out.push(name);
    }
    out
}

/// Words of PromQL that are not metric names: aggregations' and binary
/// operators' modifiers, keywords and operators spelled as words.
const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
];

/// Aggregation operators: `sum by (a) (x)` puts `by`, not `(`, after `sum`.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

/// The metric names `expr` refers to: identifiers outside label matchers,
/// range selectors, strings and label lists of `by (...)`/`on (...)`, that
/// are neither functions (followed by `(`), keywords nor numbers.
pub fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    // Nesting of {...} and [...], where identifiers are labels or durations.
    let mut inside = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += usize::from(chars[i] == '\\') + 1;
                }
                i += 1;
            }
            '{' | '[' => {
                inside += 1;
                i += 1;
            }
            '}' | ']' => {
                inside = inside.saturating_sub(1);
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut j = i;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                let next = chars.get(j).copied();
                let lower = word.to_ascii_lowercase();
                if KEYWORDS.contains(&lower.as_str()) {
                    // `by (a, b)`: skip the label list.
                    if next == Some('(') {
                        i = chars[j..]
                            .iter()
                            .position(|&c| c == ')')
                            .map_or(chars.len(), |p| j + p + 1);
                    }
                } else if inside == 0
                    && next != Some('(')
                    && !AGGREGATIONS.contains(&lower.as_str())
                {
                    names.push(word);
                }
            }
            c if c.is_ascii_digit() => {
                // A number, with an exponent or a duration unit.
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    names.sort();
    names.dedup();
    names
}
