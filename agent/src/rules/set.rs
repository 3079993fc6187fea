//! Loading a [`RuleSet`]: the builtin rules or every `*.toml` file of a
//! directory, each compiled by [`super::compile`], with every problem of
//! every file reported at once and duplicate ids refused.

use std::collections::HashMap;
use std::path::Path;

use super::{Facts, Rule, RuleFileError, RuleSource, RulesError, builtin, compile};

/// A loaded rule set.
#[derive(Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    source: RuleSource,
}

impl RuleSet {
    /// The rules embedded in the binary.
    pub fn builtin() -> Result<RuleSet, RulesError> {
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for source in builtin::sources() {
            match source {
                Ok((name, text)) => files.push((name, text.to_string())),
                Err(name) => errors.push(RuleFileError {
                    file: name,
                    line: None,
                    message: "not UTF-8 text".into(),
                }),
            }
        }
        if !errors.is_empty() {
            return Err(RulesError::Invalid(errors));
        }
        RuleSet::from_sources(RuleSource::Builtin, files)
    }

    /// Every `*.toml` file directly in `dir` (sorted by name), instead of the builtin set.
    pub fn load_dir(dir: &Path) -> Result<RuleSet, RulesError> {
        let read_dir_err = |source| RulesError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_dir_err)? {
            let path = entry.map_err(read_dir_err)?.path();
            if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
                paths.push(path);
            }
        }
        if paths.is_empty() {
            return Err(RulesError::NoRules {
                dir: dir.to_path_buf(),
            });
        }
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| RulesError::ReadFile {
                file: path.clone(),
                source,
            })?;
            files.push((path.display().to_string(), text));
        }
        RuleSet::from_sources(RuleSource::Dir(dir.to_path_buf()), files)
    }

    /// Compiles `(file name, text)` pairs. Fails with every problem found when
    /// any file is invalid or two files share an id.
    pub fn from_sources(
        source: RuleSource,
        files: impl IntoIterator<Item = (String, String)>,
    ) -> Result<RuleSet, RulesError> {
        let example = Facts::example();
        let mut rules: Vec<Rule> = Vec::new();
        let mut errors = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (file, text) in files {
            match compile(&file, &text, &example) {
                Ok(rule) => {
                    if let Some(first) = seen.get(rule.id()) {
                        errors.push(RuleFileError {
                            file: file.clone(),
                            line: None,
                            message: format!("rule id {:?} is already used by {first}", rule.id()),
                        });
                    } else {
                        seen.insert(rule.id().to_string(), file.clone());
                        rules.push(rule);
                    }
                }
                Err(mut e) => errors.append(&mut e),
            }
        }
        if !errors.is_empty() {
            return Err(RulesError::Invalid(errors));
        }
        Ok(RuleSet { rules, source })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn source(&self) -> &RuleSource {
        &self.source
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    #[test]
    fn builtin_rules_parse() {
        let set = RuleSet::builtin().unwrap();
        assert_eq!(set.source(), &RuleSource::Builtin);
        let ids: Vec<&str> = set.rules().iter().map(Rule::id).collect();
        assert!(ids.contains(&"sched.wakeup_preemption"), "{ids:?}");
        let rule = &set.rules()[0];
        assert!(!rule.def.fix.commands.is_empty());
        assert!(!rule.evidence().is_empty());
    }

    #[test]
    fn rules_dir_of_the_repository_loads_like_the_builtin_set() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
        let from_dir = RuleSet::load_dir(&dir).unwrap();
        let builtin = RuleSet::builtin().unwrap();
        let ids = |set: &RuleSet| {
            set.rules()
                .iter()
                .map(|r| r.id().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&from_dir), ids(&builtin));
        assert!(from_dir.rules()[0].file.ends_with(".toml"));
    }

    #[test]
    fn bad_file_in_dir_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("good.toml"),
            testdata::rule_toml("t.good", "true", 0.5, 0.5, ""),
        )
        .unwrap();
        std::fs::write(dir.path().join("README.md"), "not a rule").unwrap();
        std::fs::write(
            dir.path().join("broken.toml"),
            "id = \"t.broken\"\ntitle = \n",
        )
        .unwrap();
        let err = RuleSet::load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("broken.toml"), "{err}");
        assert!(!err.contains("good.toml"), "{err}");
        assert!(err.contains("line 2"), "{err}");

        std::fs::remove_file(dir.path().join("broken.toml")).unwrap();
        let set = RuleSet::load_dir(dir.path()).unwrap();
        assert_eq!(set.len(), 1);
        assert_eq!(set.source(), &RuleSource::Dir(dir.path().to_path_buf()));
    }

    #[test]
    fn empty_or_missing_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = RuleSet::load_dir(dir.path()).unwrap_err();
        assert!(matches!(err, RulesError::NoRules { .. }), "{err}");
        let err = RuleSet::load_dir(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(err, RulesError::ReadDir { .. }), "{err}");
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn duplicate_ids_name_both_files() {
        let text = testdata::rule_toml("t.dup", "true", 0.5, 0.5, "");
        let err = RuleSet::from_sources(
            RuleSource::Builtin,
            [
                ("a.toml".to_string(), text.clone()),
                ("b.toml".to_string(), text),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("b.toml: rule id \"t.dup\" is already used by a.toml"),
            "{err}"
        );
    }
}
