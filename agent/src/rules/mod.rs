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
//! (rules embedded in the binary). This module loads and checks rule files
//! into a [`RuleSet`] and decides whether a [`Rule`] applies to a recording.
//!
//! Loading is strict: every problem in every file is reported, each naming the
//! file (and line when known), and nothing is half-loaded. Fact names read by
//! each expression are checked on its syntax tree, and each expression is
//! evaluated once against [`Facts::example`], so that a misspelt fact, a group
//! missing from `requires` or a wrongly typed result is found at load time,
//! not mid-report.

pub mod builtin;
pub mod config_files;
pub mod eval;
pub mod facts;
pub mod format;
pub mod placeholders;
pub mod ranking;
#[cfg(test)]
mod scenarios;
#[cfg(test)]
pub(crate) mod testdata;
pub mod wt_config;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use cel::Program;
use semver::VersionReq;

pub use eval::EvalError;
pub use facts::{FACT_GROUPS, FactValue, Facts};
pub use format::{RuleFile, Severity};

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

/// One evidence entry, compiled.
#[derive(Debug)]
pub struct Evidence {
    pub label: String,
    pub expr: String,
    pub program: Program,
}

/// A checked, compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// The file as written.
    pub def: RuleFile,
    /// File it came from (for messages).
    pub file: String,
    arch: Vec<String>,
    arch_priors: BTreeMap<String, f64>,
    kernel: Option<VersionReq>,
    mongod: Option<VersionReq>,
    condition: Program,
    evidence: Vec<Evidence>,
}

/// Whether a rule can be evaluated on a recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applies {
    Yes,
    /// The rule does not concern this host (other architecture, kernel, ...).
    No(String),
    /// Cannot tell: something the rule needs was not recorded.
    Unknown(String),
}

impl Rule {
    pub fn id(&self) -> &str {
        &self.def.id
    }

    pub fn condition(&self) -> &Program {
        &self.condition
    }

    /// Evidence in file order.
    pub fn evidence(&self) -> &[Evidence] {
        &self.evidence
    }

    /// Priors keyed by normalised architecture name.
    pub fn arch_priors(&self) -> &BTreeMap<String, f64> {
        &self.arch_priors
    }

    /// Whether the rule applies to a recording with `facts`, ranked for `arch`
    /// (normalised). Checked in order: architecture, kernel, mongod, allocator,
    /// then the required fact groups.
    pub fn applies(&self, facts: &Facts, arch: &str) -> Applies {
        if !self.arch.is_empty() && facts::unnamed(arch) {
            let why = facts
                .arch_unknown
                .as_deref()
                .unwrap_or("the recording does not name it");
            return Applies::Unknown(format!(
                "architecture unknown: {why}; the rule is only for {} (--arch names one)",
                self.arch.join(", ")
            ));
        }
        if !self.arch.is_empty() && !self.arch.iter().any(|a| a == arch) {
            return Applies::No(format!("only for {}; this is {arch}", self.arch.join(", ")));
        }
        let kernel_release = facts
            .get("host.kernel")
            .and_then(|v| match v {
                FactValue::Text(s) => Some(s.as_str()),
                _ => None,
            })
            .unwrap_or("?");
        if let Some(req) = &self.kernel {
            match &facts.kernel_version {
                None => {
                    return Applies::Unknown(match &facts.kernel_unknown {
                        Some(why) => {
                            format!("kernel unknown: {why}; the rule needs kernel {req}")
                        }
                        None => format!(
                            "kernel release {kernel_release:?} not understood; the rule needs kernel {req}"
                        ),
                    });
                }
                Some(v) if !req.matches(v) => {
                    return Applies::No(format!(
                        "needs kernel {req}; this host runs {v} ({kernel_release})"
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(req) = &self.mongod {
            match &facts.mongod_version {
                None => {
                    return Applies::Unknown(format!(
                        "mongod version unknown ({}); the rule needs mongod {req}",
                        facts
                            .mongod_version_unknown
                            .as_deref()
                            .unwrap_or("the recording has no mongod data")
                    ));
                }
                Some(v) if !req.matches(v) => {
                    return Applies::No(format!("needs mongod {req}; the target runs {v}"));
                }
                Some(_) => {}
            }
        }
        let allocators = &self.def.applies_to.allocator;
        if !allocators.is_empty() {
            match &facts.allocator {
                None => {
                    return Applies::Unknown(format!(
                        "memory allocator unknown ({}); the rule is about {}",
                        facts.allocator_unknown.as_deref().unwrap_or("not recorded"),
                        allocators.join(", ")
                    ));
                }
                Some(a) if !allocators.iter().any(|x| x == a) => {
                    let uses = match a.as_str() {
                        "unknown" => "another one (e.g. macOS's or Windows' own)".to_string(),
                        named => named.to_string(),
                    };
                    return Applies::No(format!(
                        "about the {} allocator; the target uses {uses}",
                        allocators.join(", ")
                    ));
                }
                Some(_) => {}
            }
        }
        for group in &self.def.requires {
            if let Some(reason) = facts.absent_reason(group) {
                return Applies::Unknown(format!("needs {group} data: {reason}"));
            }
        }
        Applies::Yes
    }
}

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

/// `family.name`: lowercase ASCII letters, digits and `_`, at least two
/// dot-separated parts, each starting with a letter.
fn valid_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            p.starts_with(|c: char| c.is_ascii_lowercase())
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

/// Parses and checks one rule file. Returns every problem found.
pub fn compile(file: &str, text: &str, example: &Facts) -> Result<Rule, Vec<RuleFileError>> {
    let mut errors = Vec::new();
    let mut err = |line: Option<usize>, message: String| {
        errors.push(RuleFileError {
            file: file.to_string(),
            line,
            message,
        })
    };
    let def: RuleFile = match toml::from_str(text) {
        Ok(def) => def,
        Err(e) => {
            err(None, e.to_string().trim_end().to_string());
            return Err(errors);
        }
    };

    if !valid_id(&def.id) {
        err(
            None,
            format!(
                "id {:?} must look like family.name (lowercase letters, digits, '_'), e.g. \"sched.wakeup_preemption\"",
                def.id
            ),
        );
    }
    let texts = [
        ("title", &def.title),
        ("summary", &def.summary),
        ("impact.expected", &def.impact.expected),
        ("impact.source", &def.impact.source),
        ("fix.summary", &def.fix.summary),
        ("fix.risk", &def.fix.risk),
        ("fix.verify", &def.fix.verify),
    ];
    for (field, value) in texts {
        if value.trim().is_empty() {
            err(None, format!("{field} must not be empty"));
        }
    }
    let readable: Vec<&str> = ALWAYS_BOUND
        .iter()
        .copied()
        .chain(def.requires.iter().map(String::as_str))
        .chain(def.optional.iter().map(String::as_str))
        .collect();
    let fix_texts = def
        .fix
        .commands
        .iter()
        .chain(def.fix.revert.iter())
        .chain(def.fix.files.iter().map(|f| &f.content))
        .chain(std::iter::once(&def.fix.verify));
    for text in fix_texts {
        for name in placeholders::names(text) {
            if let Some(problem) = placeholders::check(name, &readable, example) {
                err(None, format!("fix: {problem}"));
            }
        }
    }
    for (field, value) in [
        ("confidence", def.confidence),
        ("impact.score", def.impact.score),
    ] {
        if !(0.0..=1.0).contains(&value) {
            err(
                None,
                format!("{field} must be between 0 and 1, not {value}"),
            );
        }
    }
    for (i, group) in def.requires.iter().enumerate() {
        if !FACT_GROUPS.contains(&group.as_str()) {
            err(
                None,
                format!(
                    "requires: unknown fact group {group:?} (known: {})",
                    FACT_GROUPS.join(", ")
                ),
            );
        } else if def.requires[..i].contains(group) {
            err(None, format!("requires: {group:?} is listed twice"));
        }
    }
    for (i, group) in def.optional.iter().enumerate() {
        if !FACT_GROUPS.contains(&group.as_str()) {
            err(
                None,
                format!(
                    "optional: unknown fact group {group:?} (known: {})",
                    FACT_GROUPS.join(", ")
                ),
            );
        } else if def.optional[..i].contains(group) || def.requires.contains(group) {
            err(
                None,
                format!("optional: {group:?} is listed twice (or also in requires)"),
            );
        }
    }
    let known_arches = ranking::KNOWN_ARCHES.join(", ");
    let mut arch = Vec::new();
    for a in &def.applies_to.arch {
        match ranking::normalise_arch(a) {
            Some(n) => arch.push(n),
            None => err(
                None,
                format!("applies_to.arch: unknown architecture {a:?} (known: {known_arches})"),
            ),
        }
    }
    let mut arch_priors = BTreeMap::new();
    for (a, &prior) in &def.arch_priors {
        match ranking::normalise_arch(a) {
            Some(n) => {
                arch_priors.insert(n, prior);
            }
            None => err(
                None,
                format!("arch_priors: unknown architecture {a:?} (known: {known_arches})"),
            ),
        }
        if !(prior.is_finite() && prior > 0.0 && prior <= 10.0) {
            err(
                None,
                format!("arch_priors.{a} must be a number above 0 and at most 10, not {prior}"),
            );
        }
    }
    let mut version_req = |field: &str, value: &Option<String>| -> Option<VersionReq> {
        let value = value.as_ref()?;
        match VersionReq::parse(value) {
            Ok(req) => Some(req),
            Err(e) => {
                err(
                    None,
                    format!(
                        "applies_to.{field}: {value:?} is not a version requirement like \">=6.6\": {e}"
                    ),
                );
                None
            }
        }
    };
    let kernel = version_req("kernel", &def.applies_to.kernel);
    let mongod = version_req("mongod", &def.applies_to.mongod);
    for a in &def.applies_to.allocator {
        if !facts::allocator::KIND_NAMES.contains(&a.as_str()) {
            err(
                None,
                format!(
                    "applies_to.allocator: unknown allocator {a:?}; use one of {}",
                    facts::allocator::KIND_NAMES.join(", ")
                ),
            );
        }
    }
    for r in &def.references {
        if r.title.trim().is_empty() {
            err(None, "references: title must not be empty".into());
        }
        if let Some(url) = &r.url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            err(
                None,
                format!("references: url {url:?} must start with https:// or http://"),
            );
        }
    }
    if def
        .fix
        .commands
        .iter()
        .chain(&def.fix.revert)
        .any(|c| c.trim().is_empty())
    {
        err(None, "fix: commands must not be empty strings".into());
    }
    for f in &def.fix.files {
        let has_content = !f.content.trim().is_empty() || f.wiredtiger_config.is_some();
        if !f.path.starts_with('/') || f.how.trim().is_empty() || !has_content {
            err(
                None,
                format!(
                    "fix.files: {:?} needs an absolute path, a `how` and some content",
                    f.path
                ),
            );
        }
    }

    // Expressions: compile, then evaluate on the example facts with only the
    // always-bound and required groups, so unknown facts and missing
    // `requires` entries are caught now.
    let mut bound: Vec<&str> = ALWAYS_BOUND.to_vec();
    bound.extend(def.requires.iter().map(String::as_str));
    bound.extend(def.optional.iter().map(String::as_str));
    let ctx = eval::context(example, Some(&bound));
    let explain_error = |what: &str, e: EvalError| -> String {
        match &e {
            EvalError::UnknownName(name) if FACT_GROUPS.contains(&name.as_str()) => {
                format!(
                    "{what} reads {name}.* facts but neither `requires` nor `optional` lists \"{name}\""
                )
            }
            EvalError::NoSuchFact(_) => {
                format!("{what}: {e} (the facts are listed in rules/README.md)")
            }
            _ => format!("{what}: {e}"),
        }
    };
    // Fact names are checked on the syntax tree first (every branch), then
    // by a trial evaluation (types, anything the walk cannot see).
    let static_check = |what: &str, program: &Program| -> Option<String> {
        for (group, field) in eval::selections(program) {
            if !FACT_GROUPS.contains(&group.as_str()) {
                continue;
            }
            if !bound.contains(&group.as_str()) {
                return Some(explain_error(what, EvalError::UnknownName(group)));
            }
            if example
                .group(&group)
                .is_some_and(|g| !g.contains_key(&field))
            {
                return Some(explain_error(
                    what,
                    EvalError::NoSuchFact(format!("{group}.{field}")),
                ));
            }
        }
        None
    };
    let condition_line = Some(line_of(text, def.condition.span().start));
    let condition = match eval::compile(def.condition.get_ref()) {
        Ok(program) => {
            if let Some(problem) = static_check("condition", &program) {
                err(condition_line, problem);
            } else if let Err(e) = eval::eval_bool(&program, &ctx) {
                err(condition_line, explain_error("condition", e));
            }
            Some(program)
        }
        Err(e) => {
            err(condition_line, format!("condition: {e}"));
            None
        }
    };
    if def.evidence.is_empty() {
        err(
            None,
            "evidence: at least one entry is needed (the numbers that make the rule fire)".into(),
        );
    }
    let mut evidence = Vec::new();
    for (label, expr) in def.evidence_in_file_order() {
        let line = Some(line_of(text, expr.span().start));
        let what = format!("evidence {label:?}");
        match eval::compile(expr.get_ref()) {
            Ok(program) => {
                if let Some(problem) = static_check(&what, &program) {
                    err(line, problem);
                } else if let Err(e) = eval::eval_scalar(&program, &ctx) {
                    err(line, explain_error(&what, e));
                }
                evidence.push(Evidence {
                    label: label.to_string(),
                    expr: expr.get_ref().clone(),
                    program,
                });
            }
            Err(e) => err(line, format!("{what}: {e}")),
        }
    }

    match condition {
        Some(condition) if errors.is_empty() => Ok(Rule {
            def,
            file: file.to_string(),
            arch,
            arch_priors,
            kernel,
            mongod,
            condition,
            evidence,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile_one(text: &str) -> Result<Rule, Vec<RuleFileError>> {
        compile("test.toml", text, &Facts::example())
    }

    fn errors_of(text: &str) -> String {
        match compile_one(text) {
            Ok(_) => panic!("expected errors"),
            Err(errors) => errors.iter().map(|e| e.to_string() + "\n").collect(),
        }
    }

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
    fn evidence_keeps_file_order() {
        let text = testdata::rule_toml("t.order", "true", 0.5, 0.5, "").replace(
            "\"involuntary share\" = \"sched.involuntary_share\"",
            "zeta = \"sched.threads\"\nalpha = \"sched.voluntary\"\nmid = \"host.cpu_count\"",
        );
        let rule = compile_one(&text).unwrap();
        let labels: Vec<&str> = rule.evidence().iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["zeta", "alpha", "mid"]);
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
    fn unknown_keys_and_bad_values_are_reported() {
        let base = testdata::rule_toml("t.bad", "true", 0.5, 0.5, "");
        let typo = base.replace("severity =", "severty =");
        assert!(errors_of(&typo).contains("unknown field `severty`"));

        let e = errors_of(&testdata::rule_toml("Bad Id", "true", 1.5, -0.1, ""));
        assert!(
            e.contains("id \"Bad Id\" must look like family.name"),
            "{e}"
        );
        assert!(
            e.contains("confidence must be between 0 and 1, not 1.5"),
            "{e}"
        );
        assert!(
            e.contains("impact.score must be between 0 and 1, not -0.1"),
            "{e}"
        );

        let e = errors_of(&testdata::rule_toml(
            "t.applies",
            "true",
            0.5,
            0.5,
            "[applies_to]\narch = [\"s390\"]\nkernel = \">=six\"\n\n[arch_priors]\nx86_64 = 0.0\n",
        ));
        assert!(e.contains("unknown architecture \"s390\""), "{e}");
        assert!(
            e.contains("applies_to.kernel: \">=six\" is not a version requirement"),
            "{e}"
        );
        assert!(
            e.contains("arch_priors.x86_64 must be a number above 0"),
            "{e}"
        );

        let e = errors_of(&base.replace("requires = [\"sched\"]", "requires = [\"shed\"]"));
        assert!(e.contains("unknown fact group \"shed\""), "{e}");
    }

    #[test]
    fn cel_problems_are_reported_with_line() {
        let e = errors_of(&testdata::rule_toml(
            "t.syntax",
            "sched.threads >",
            0.5,
            0.5,
            "",
        ));
        assert!(
            e.contains("test.toml:7: condition: CEL syntax error"),
            "{e}"
        );

        let e = errors_of(&testdata::rule_toml(
            "t.fact",
            "sched.runq_p98_us > 1.0",
            0.5,
            0.5,
            "",
        ));
        assert!(
            e.contains("condition: no fact named `sched.runq_p98_us`"),
            "{e}"
        );

        // A typo behind a short-circuit is found too.
        let e = errors_of(&testdata::rule_toml(
            "t.short",
            "sched.involuntary >= 1000000 && sched.runq_p98_us > 1.0",
            0.5,
            0.5,
            "",
        ));
        assert!(
            e.contains("test.toml:7: condition: no fact named `sched.runq_p98_us`"),
            "{e}"
        );

        let e = errors_of(&testdata::rule_toml(
            "t.type",
            "sched.threads",
            0.5,
            0.5,
            "",
        ));
        assert!(e.contains("must be true or false"), "{e}");

        let missing = testdata::rule_toml("t.req", "sched.threads > 1", 0.5, 0.5, "")
            .replace("requires = [\"sched\"]", "requires = []")
            .replace("\"sched.involuntary_share\"", "\"host.cpu_count\"");
        let e = errors_of(&missing);
        assert!(
            e.contains("condition reads sched.* facts but neither `requires` nor `optional` lists \"sched\""),
            "{e}"
        );

        let e = errors_of(
            &testdata::rule_toml("t.ev", "true", 0.5, 0.5, "")
                .replace("\"sched.involuntary_share\"", "\"sched.classes\""),
        );
        assert!(
            e.contains("test.toml:10: evidence \"involuntary share\": must give a number"),
            "{e}"
        );
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

    #[test]
    fn applicability_checks_arch_kernel_and_requirements() {
        let text = testdata::rule_toml(
            "t.apply",
            "true",
            0.5,
            0.5,
            "[applies_to]\narch = [\"s390x\", \"x86_64\"]\nkernel = \">=6.6\"\n",
        );
        let rule = compile_one(&text).unwrap();
        let facts = |kernel: &str| Facts::derive(&testdata::base(kernel, "x86_64", 2));
        let mut rec = testdata::oversubscribed();
        let on_618 = Facts::derive(&rec);
        assert_eq!(rule.applies(&on_618, "x86_64"), Applies::Yes);
        assert_eq!(rule.applies(&on_618, "s390x"), Applies::Yes);
        assert!(
            matches!(rule.applies(&on_618, "aarch64"), Applies::No(r) if r.contains("only for s390x, x86_64"))
        );
        match rule.applies(&facts("5.15.0-91-generic"), "x86_64") {
            Applies::No(r) => assert!(
                r.contains("needs kernel >=6.6; this host runs 5.15.0"),
                "{r}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(rule.applies(&facts("weird"), "x86_64"), Applies::Unknown(r) if r.contains("not understood"))
        );
        // An architecture or kernel the recording does not name: not
        // assessed, never judged against an empty name.
        let mut unnamed = testdata::base("", "", 2);
        let f = Facts::derive(&unnamed);
        for arch in ["", "unknown"] {
            assert!(
                matches!(rule.applies(&f, arch), Applies::Unknown(r) if r.starts_with("architecture unknown: the recording does not name it; the rule is only for s390x, x86_64"))
            );
        }
        unnamed.host.arch = "x86_64".into();
        assert!(
            matches!(rule.applies(&Facts::derive(&unnamed), "x86_64"), Applies::Unknown(r) if r.starts_with("kernel unknown: the recording does not name it; the rule needs kernel >=6.6"))
        );
        // 6.6.0 itself is included.
        rec.host.kernel_release = "6.6.0".into();
        assert_eq!(rule.applies(&Facts::derive(&rec), "x86_64"), Applies::Yes);
        // No slices: sched facts absent → not assessed with the reason.
        match rule.applies(&facts("6.8.0"), "x86_64") {
            Applies::Unknown(r) => assert!(
                r.contains("needs sched data") && r.contains("no scheduler data"),
                "{r}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mongod_and_allocator_requirements_are_not_assessed_without_data() {
        let rule = compile_one(&testdata::rule_toml(
            "t.mongod",
            "true",
            0.5,
            0.5,
            "[applies_to]\nmongod = \">=7.0\"\nallocator = [\"google_tcmalloc\"]\n",
        ))
        .unwrap();
        let mut facts = Facts::derive(&testdata::oversubscribed());
        assert!(
            matches!(rule.applies(&facts, "x86_64"), Applies::Unknown(r) if r.contains("mongod version unknown"))
        );
        facts.mongod_version = Some(semver::Version::new(6, 0, 14));
        assert!(
            matches!(rule.applies(&facts, "x86_64"), Applies::No(r) if r.contains("needs mongod >=7.0"))
        );
        facts.mongod_version = Some(semver::Version::new(7, 0, 2));
        assert!(
            matches!(rule.applies(&facts, "x86_64"), Applies::Unknown(r) if r.contains("allocator unknown"))
        );
        facts.allocator = Some("google_tcmalloc".into());
        assert_eq!(rule.applies(&facts, "x86_64"), Applies::Yes);
    }
}
