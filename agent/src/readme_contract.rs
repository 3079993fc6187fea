//! Keeps README.md's statements about the code true (test builds only), as
//! `docs_contract.rs` does for `docs/ARCHITECTURE.md`: a README that drifts
//! from the code fails here, naming what to fix.
//!
//! - Every count of rules it states ("N … rules", "that is A of the N") is
//!   the number of built-in rules ([`RuleSet::builtin`]), not of `rules/`'s
//!   files (its README is no rule).
//! - The probe families of the Status section (one bullet each, its family
//!   named after the bold title: `- **scheduler** (`sched`): …`) and of the
//!   Requirements' kernel table are exactly [`FAMILIES`].
//! - The Usage synopsis names exactly the subcommands of the command line
//!   ([`Cli`]), and each of its options is one the subcommand takes.

use std::collections::{BTreeMap, BTreeSet};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::probes::FAMILIES;
use crate::rules::RuleSet;

const README: &str = include_str!("../../README.md");

/// The README's text with every run of whitespace one space (a phrase may
/// wrap).
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `word` without the punctuation around it (`(48`, `rules.`).
fn bare(word: &str) -> &str {
    word.trim_matches(|c: char| !c.is_alphanumeric())
}

/// Every count of rules `text` states, with its phrase: a number followed
/// by "rules" (or "rule"), directly or after one word ("27 recommendation
/// rules"), and the whole of "A of the N" (the rules FTDC can assess).
fn stated_rule_counts(text: &str) -> Vec<(usize, String)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let is_rules = |i: usize| {
        words
            .get(i)
            .is_some_and(|w| matches!(bare(w), "rules" | "rule"))
    };
    let mut counts = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let Ok(n) = bare(word).parse::<usize>() else {
            continue;
        };
        if is_rules(i + 1) {
            counts.push((n, words[i..=i + 1].join(" ")));
        } else if is_rules(i + 2) && bare(words[i + 1]).parse::<f64>().is_err() {
            counts.push((n, words[i..=i + 2].join(" ")));
        } else if i >= 3
            && words[i - 2..i] == ["of", "the"]
            && bare(words[i - 3]).parse::<usize>().is_ok()
        {
            counts.push((n, words[i - 3..=i].join(" ")));
        }
    }
    counts
}

fn builtin_rules() -> usize {
    RuleSet::builtin().expect("the built-in rules load").len()
}

#[test]
fn every_count_of_rules_is_the_builtin_set_s() {
    let total = builtin_rules();
    let counts = stated_rule_counts(&flat(README));
    assert!(
        !counts.is_empty(),
        "README.md states no count of rules any more: drop this check if that is meant"
    );
    let wrong: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n != total)
        .map(|(_, phrase)| format!("\"{phrase}\""))
        .collect();
    assert!(
        wrong.is_empty(),
        "README.md says {}, but there are {total} built-in rules (RuleSet::builtin)",
        wrong.join(", ")
    );
}

#[test]
fn rule_counts_are_found_in_their_phrasings() {
    let text = flat(
        "`explain` runs 27 recommendation\nrules (data); one rule, 3 rules. That is 17 of the 48.\n5.19 rules? On 6.1 and 6.12 (kernels)",
    );
    let counts: Vec<usize> = stated_rule_counts(&text)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(counts, [27, 3, 48]);
}

/// The README from the line starting with `start` to its end.
fn readme_from(start: &str) -> &'static str {
    let at = README
        .find(&format!("\n{start}"))
        .unwrap_or_else(|| panic!("README.md has no line starting with {start:?}"));
    &README[at + 1..]
}

fn code_families() -> BTreeSet<String> {
    FAMILIES.iter().map(|f| f.name.to_string()).collect()
}

/// The family each bullet of the Status section names: `- **title**
/// (`family`...`.
fn status_families() -> Vec<Result<String, String>> {
    readme_from("Status:")
        .lines()
        .skip_while(|l| !l.starts_with("- "))
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("- "))
        .map(|l| {
            l.strip_prefix("- **")
                .and_then(|rest| rest.split_once("** (`"))
                .and_then(|(_, rest)| rest.split_once('`'))
                .map(|(family, _)| family.to_owned())
                .ok_or_else(|| l.to_owned())
        })
        .collect()
}

#[test]
fn the_status_section_lists_exactly_the_code_families() {
    let bullets = status_families();
    let unnamed: Vec<&String> = bullets.iter().filter_map(|b| b.as_ref().err()).collect();
    assert!(
        unnamed.is_empty(),
        "README.md's Status bullets must name their family: - **title** (`family`...): {unnamed:?}"
    );
    let named: Vec<String> = bullets.into_iter().filter_map(Result::ok).collect();
    let documented: BTreeSet<String> = named.iter().cloned().collect();
    assert_eq!(
        documented.len(),
        named.len(),
        "README.md's Status names a family twice: {named:?}"
    );
    assert_eq!(
        documented,
        code_families(),
        "README.md's Status families (left) and probes::FAMILIES (right) differ"
    );
}

#[test]
fn the_kernel_table_covers_exactly_the_code_families() {
    let table = readme_from("  | family | minimum kernel |");
    let mut named = Vec::new();
    for row in table
        .lines()
        .skip(2)
        .take_while(|l| l.trim().starts_with('|'))
    {
        let first = row.trim().split('|').nth(1).unwrap_or_default();
        for part in first.split(',') {
            named.push(
                part.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    let documented: BTreeSet<String> = named.iter().cloned().collect();
    assert_eq!(documented.len(), named.len(), "a family twice: {named:?}");
    assert_eq!(
        documented,
        code_families(),
        "README.md's kernel table (left) and probes::FAMILIES (right) differ"
    );
}

/// The Usage synopsis: each subcommand it shows with the long options its
/// lines name (a subcommand's line starts with `mdiag NAME`, its next lines
/// are indented; `# ...` is a comment, a bare `--` the start of a command).
fn synopsis() -> BTreeMap<String, BTreeSet<String>> {
    let block = readme_from("## Usage")
        .split("```")
        .nth(1)
        .expect("README.md's Usage has a code block");
    let mut commands: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in block.lines() {
        let line = line.split(" # ").next().unwrap_or_default();
        if let Some(rest) = line.strip_prefix("mdiag ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            current = Some(name.to_owned());
        } else if !line.starts_with(' ') {
            continue;
        }
        let Some(name) = &current else { continue };
        let options = commands.entry(name.clone()).or_default();
        for word in line.split_whitespace() {
            let word = word.trim_start_matches(['[', '(']);
            if let Some(long) = word.strip_prefix("--") {
                let long: String = long
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                    .collect();
                if !long.is_empty() {
                    options.insert(long);
                }
            }
        }
    }
    commands
}

/// Clap's visible subcommands (not the `help` it adds) with every long
/// option (and visible alias) each takes, the global ones included.
fn cli_commands() -> BTreeMap<String, BTreeSet<String>> {
    let mut cmd = Cli::command();
    cmd.build();
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| {
            let longs = s
                .get_arguments()
                .flat_map(|a| a.get_long_and_visible_aliases().unwrap_or_default())
                .map(str::to_owned)
                .collect();
            (s.get_name().to_owned(), longs)
        })
        .collect()
}

#[test]
fn the_usage_synopsis_names_exactly_the_subcommands_and_their_options() {
    let documented = synopsis();
    let code = cli_commands();
    assert!(code.len() >= 10, "{code:?}");
    let names = |m: &BTreeMap<String, BTreeSet<String>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&documented),
        names(&code),
        "README.md's Usage synopsis (left) and the subcommands of cli.rs (right) differ"
    );
    let mut unknown = Vec::new();
    for (name, options) in &documented {
        for option in options.difference(&code[name]) {
            unknown.push(format!("mdiag {name} --{option}"));
        }
    }
    assert!(
        unknown.is_empty(),
        "README.md's Usage names options cli.rs does not take: {unknown:?}"
    );
}

#[test]
fn the_synopsis_reader_sees_commands_options_and_continuations() {
    let options = cli_commands();
    assert!(options["record"].contains("duration") && options["record"].contains("verbose"));
    assert!(options["agent"].contains("web.config.file"));
    let documented = synopsis();
    let record = &documented["record"];
    for o in ["duration", "pid", "alloc-every", "probes", "uri", "config"] {
        assert!(record.contains(o), "{o}: {record:?}");
    }
    assert!(!record.contains(""), "{record:?}");
    assert!(documented["export"].contains("pprof") && documented["export"].contains("metrics"));
}
