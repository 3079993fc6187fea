//! Diagnosis rules: TOML files with CEL conditions over facts derived from a recording.
//!
//! A rule says when it applies (architecture, kernel, mongod, allocator), which
//! fact groups it needs (`requires`), when it fires (`condition`), which
//! numbers to show (`evidence`), how much fixing it should bring and how sure
//! we are (`impact`, `confidence`, `arch_priors`), and the exact fix. Keeping
//! rules as data means new diagnoses are added without touching the engine;
//! the format is documented in `rules/README.md`.
//!
//! Files: [`format`] (the schema), [`facts`] (facts from a recording),
//! [`eval`] (CEL), [`ranking`] (scores, architecture names), [`builtin`]
//! (rules embedded in the binary), `compile` (one file checked into a
//! [`Rule`]), `rule` (a [`Rule`] and whether it [`Applies`]), `set` (loading
//! a [`RuleSet`]). This module holds what they share: the error types and
//! where a rule set came from.
//!
//! Loading is strict: every problem in every file is reported, each naming the
//! file (and line when known), and nothing is half-loaded. Fact names read by
//! each expression are checked on its syntax tree, and each expression is
//! evaluated once against [`Facts::example`], so that a misspelt fact, a group
//! missing from `requires` or a wrongly typed result is found at load time,
//! not mid-report.

pub mod builtin;
mod compile;
pub mod config_files;
pub mod eval;
pub mod facts;
pub mod format;
pub mod placeholders;
pub mod ranking;
#[cfg(test)]
mod references_tests;
mod rule;
#[cfg(test)]
mod scenarios;
mod set;
#[cfg(test)]
pub(crate) mod testdata;
pub mod wt_config;

use std::fmt;
use std::path::PathBuf;

pub use compile::compile;
pub use eval::EvalError;
pub use facts::{FACT_GROUPS, FactValue, Facts};
pub use format::RuleFile;
pub use rule::{Applies, Evidence, Rule};
pub use set::RuleSet;

/// Fact groups bound for every rule, whether or not it lists them in `requires`.
pub const ALWAYS_BOUND: &[&str] = &["host", "recording", "target"];

/// A problem in one rule file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct RuleFileError {
    /// The file's path (`--rules DIR`) or `builtin rules/NAME.toml`.
    pub file: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for RuleFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Why a rule set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("cannot read rules directory {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read rule file {}: {source}", file.display())]
    ReadFile {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("no rule files (*.toml) in {}", dir.display())]
    NoRules { dir: PathBuf },
    #[error("{}", invalid_message(.0))]
    Invalid(Vec<RuleFileError>),
}

fn invalid_message(errors: &[RuleFileError]) -> String {
    match errors {
        [one] => format!("invalid rule file {one}"),
        many => {
            let mut s = format!("{} problems in rule files:", many.len());
            for e in many {
                s.push_str("\n  - ");
                s.push_str(&e.to_string().replace('\n', "\n    "));
            }
            s
        }
    }
}

/// Where a rule set came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// Embedded in the binary from the repository's `rules/`.
    Builtin,
    /// Loaded with `--rules DIR`.
    Dir(PathBuf),
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::Builtin => f.write_str("builtin"),
            RuleSource::Dir(dir) => write!(f, "{}", dir.display()),
        }
    }
}
