//! The builtin rule set: the repository's `rules/*.toml`, compiled into the binary.
//!
//! Embedding the rules means a single `mdiag` binary copied to a host can
//! explain recordings without any other file; `--rules DIR` replaces the set
//! for experiments. The files are parsed and checked when they are loaded
//! (every test run loads them, so a broken builtin rule fails the tests).

use include_dir::{Dir, include_dir};

static RULES_DIR: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../rules");

/// Name and text of every embedded `*.toml` file, sorted by name. Files that
/// are not UTF-8 are returned as `Err(name)`.
pub fn sources() -> Vec<Result<(String, &'static str), String>> {
    let mut files: Vec<_> = RULES_DIR
        .files()
        .filter(|f| f.path().extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort_by(|a, b| a.path().cmp(b.path()));
    files
        .into_iter()
        .map(|f| {
            let name = format!("builtin rules/{}", f.path().display());
            f.contents_utf8()
                .map(|text| (name.clone(), text))
                .ok_or(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeds_the_toml_files_only() {
        let names: Vec<String> = sources()
            .into_iter()
            .map(|s| s.map(|(n, _)| n).unwrap_or_else(|n| n))
            .collect();
        assert!(
            names.contains(&"builtin rules/sched-wakeup-preemption.toml".to_string()),
            "{names:?}"
        );
        assert!(names.iter().all(|n| n.ends_with(".toml")), "{names:?}");
    }

    #[test]
    fn every_rule_file_is_named_after_its_id() {
        // `family.some_name` lives in `family-some-name.toml`, so the file of
        // a rule in a report is found without searching.
        let set = crate::rules::RuleSet::builtin().expect("builtin rules load");
        for rule in set.rules() {
            let want = format!("builtin rules/{}.toml", rule.id().replace(['.', '_'], "-"));
            assert_eq!(rule.file, want, "rule {}", rule.id());
        }
    }

    /// Every built-in rule says whether it is a finding or a checklist item
    /// (the default, a finding, is for rule files of users), and the
    /// configuration-only rules of the third review are checklist items.
    #[test]
    fn every_builtin_rule_states_its_class() {
        use crate::findings::RuleClass;
        for source in sources() {
            let (name, text) = source.expect("UTF-8");
            assert!(
                text.lines()
                    .any(|l| l == "class = \"finding\"" || l == "class = \"checklist\""),
                "{name} does not say class = \"finding\" or \"checklist\""
            );
        }
        let set = crate::rules::RuleSet::builtin().expect("builtin rules load");
        let class = |id: &str| {
            set.rules()
                .iter()
                .find(|r| r.id() == id)
                .map(|r| r.def.class)
                .unwrap_or_else(|| panic!("no rule {id}"))
        };
        // Configuration with neither a measured nor a documented large cost.
        for id in [
            "host.clock_sync",
            "host.swap",
            "host.tcp_keepalive",
            "host.readahead",
            "host.kernel_task_limits",
            "memory.dirty_writeback",
            "storage.noatime",
            "storage.xfs",
        ] {
            assert_eq!(class(id), RuleClass::Checklist, "{id}");
        }
        // Measured, or a setting with a documented large cost for this target.
        for id in [
            "sched.cpu_saturation",
            "memory.thp_legacy_tcmalloc",
            "host.overcommit",
            "allocator.tcmalloc_kernel",
            "system.disk_full",
            "replication.member_unhealthy",
        ] {
            assert_eq!(class(id), RuleClass::Finding, "{id}");
        }
    }
}
