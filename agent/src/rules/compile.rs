//! Parsing and checking one rule file into a [`Rule`]: the schema, ids,
//! texts, version requirements, fact groups, fix placeholders, and every CEL
//! expression (fact names on the syntax tree, then a trial evaluation on
//! [`Facts::example`]).
//!
//! Every problem is collected with the file (and line when known) instead of
//! stopping at the first, so that one run of `--rules DIR` lists them all.

use std::collections::BTreeMap;

use cel::{Context, Program};
use semver::VersionReq;
use toml::Spanned;

use super::{
    ALWAYS_BOUND, EvalError, Evidence, FACT_GROUPS, Facts, Rule, RuleFile, RuleFileError, eval,
    facts, placeholders, ranking,
};

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
    let mut p = Problems {
        file,
        errors: Vec::new(),
    };
    let def: RuleFile = match toml::from_str(text) {
        Ok(def) => def,
        Err(e) => {
            p.add(None, e.to_string().trim_end().to_string());
            return Err(p.errors);
        }
    };

    check_id(&def, &mut p);
    check_texts(&def, &mut p);
    check_fix_placeholders(&def, example, &mut p);
    check_scores(&def, &mut p);
    check_groups(&def, &mut p);
    let arch = arches(&def, &mut p);
    let arch_priors = arch_priors(&def, &mut p);
    let kernel = version_req("kernel", def.applies_to.kernel.as_ref(), &mut p);
    let mongod = version_req("mongod", def.applies_to.mongod.as_ref(), &mut p);
    check_applies_to(&def, &mut p);
    check_references(&def, &mut p);
    check_fix(&def, &mut p);
    check_class(&def, &mut p);

    let (condition, hold, evidence) = {
        let expressions = Expressions::new(&def, text, example);
        let condition = expressions.boolean("condition", &def.condition, &mut p);
        let hold = def
            .hold
            .as_ref()
            .and_then(|h| expressions.boolean("hold", h, &mut p));
        (condition, hold, expressions.evidence(&def, &mut p))
    };

    match condition {
        Some(condition) if p.errors.is_empty() => Ok(Rule {
            def,
            file: file.to_string(),
            arch,
            arch_priors,
            kernel,
            mongod,
            condition,
            hold,
            evidence,
        }),
        _ => Err(p.errors),
    }
}

/// The problems found in one file, in the order the passes find them.
struct Problems<'a> {
    file: &'a str,
    errors: Vec<RuleFileError>,
}

impl Problems<'_> {
    fn add(&mut self, line: Option<usize>, message: String) {
        self.errors.push(RuleFileError {
            file: self.file.to_string(),
            line,
            message,
        });
    }
}

/// The id has the `family.name` shape.
fn check_id(def: &RuleFile, p: &mut Problems<'_>) {
    if !valid_id(&def.id) {
        p.add(
            None,
            format!(
                "id {:?} must look like family.name (lowercase letters, digits, '_'), e.g. \"sched.wakeup_preemption\"",
                def.id
            ),
        );
    }
}

/// The texts a reader sees are not empty.
fn check_texts(def: &RuleFile, p: &mut Problems<'_>) {
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
            p.add(None, format!("{field} must not be empty"));
        }
    }
}

/// Every `{group.fact}` placeholder in the fix names a fact the rule may read.
fn check_fix_placeholders(def: &RuleFile, example: &Facts, p: &mut Problems<'_>) {
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
                p.add(None, format!("fix: {problem}"));
            }
        }
    }
}

/// Confidence and impact score are between 0 and 1.
fn check_scores(def: &RuleFile, p: &mut Problems<'_>) {
    for (field, value) in [
        ("confidence", def.confidence),
        ("impact.score", def.impact.score),
    ] {
        if !(0.0..=1.0).contains(&value) {
            p.add(
                None,
                format!("{field} must be between 0 and 1, not {value}"),
            );
        }
    }
}

/// `requires` and `optional` name known fact groups, each once.
fn check_groups(def: &RuleFile, p: &mut Problems<'_>) {
    for (i, group) in def.requires.iter().enumerate() {
        if !FACT_GROUPS.contains(&group.as_str()) {
            p.add(
                None,
                format!(
                    "requires: unknown fact group {group:?} (known: {})",
                    FACT_GROUPS.join(", ")
                ),
            );
        } else if def.requires[..i].contains(group) {
            p.add(None, format!("requires: {group:?} is listed twice"));
        }
    }
    for (i, group) in def.optional.iter().enumerate() {
        if !FACT_GROUPS.contains(&group.as_str()) {
            p.add(
                None,
                format!(
                    "optional: unknown fact group {group:?} (known: {})",
                    FACT_GROUPS.join(", ")
                ),
            );
        } else if def.optional[..i].contains(group) || def.requires.contains(group) {
            p.add(
                None,
                format!("optional: {group:?} is listed twice (or also in requires)"),
            );
        }
    }
}

/// `applies_to.arch`, normalised; unknown architectures are problems.
fn arches(def: &RuleFile, p: &mut Problems<'_>) -> Vec<String> {
    let mut arch = Vec::new();
    for a in &def.applies_to.arch {
        match ranking::normalise_arch(a) {
            Some(n) => arch.push(n),
            None => p.add(
                None,
                format!(
                    "applies_to.arch: unknown architecture {a:?} (known: {})",
                    ranking::KNOWN_ARCHES.join(", ")
                ),
            ),
        }
    }
    arch
}

/// `arch_priors` by normalised architecture; each prior is in (0, 10].
fn arch_priors(def: &RuleFile, p: &mut Problems<'_>) -> BTreeMap<String, f64> {
    let mut arch_priors = BTreeMap::new();
    for (a, &prior) in &def.arch_priors {
        match ranking::normalise_arch(a) {
            Some(n) => {
                arch_priors.insert(n, prior);
            }
            None => p.add(
                None,
                format!(
                    "arch_priors: unknown architecture {a:?} (known: {})",
                    ranking::KNOWN_ARCHES.join(", ")
                ),
            ),
        }
        if !(prior.is_finite() && prior > 0.0 && prior <= 10.0) {
            p.add(
                None,
                format!("arch_priors.{a} must be a number above 0 and at most 10, not {prior}"),
            );
        }
    }
    arch_priors
}

/// `applies_to.FIELD` parsed as a semver requirement, when given.
fn version_req(field: &str, value: Option<&String>, p: &mut Problems<'_>) -> Option<VersionReq> {
    let value = value?;
    match VersionReq::parse(value) {
        Ok(req) => Some(req),
        Err(e) => {
            p.add(
                None,
                format!(
                    "applies_to.{field}: {value:?} is not a version requirement like \">=6.6\": {e}"
                ),
            );
            None
        }
    }
}

/// `applies_to`'s allocator, target and page sizes are ones mdiag knows.
fn check_applies_to(def: &RuleFile, p: &mut Problems<'_>) {
    for a in &def.applies_to.allocator {
        if !facts::allocator::KIND_NAMES.contains(&a.as_str()) {
            p.add(
                None,
                format!(
                    "applies_to.allocator: unknown allocator {a:?}; use one of {}",
                    facts::allocator::KIND_NAMES.join(", ")
                ),
            );
        }
    }
    if let Some(t) = &def.applies_to.target
        && !facts::TARGET_KINDS.contains(&t.as_str())
    {
        p.add(
            None,
            format!(
                "applies_to.target: unknown target {t:?}; use one of {}",
                facts::TARGET_KINDS.join(", ")
            ),
        );
    }
    for size in &def.applies_to.page_size {
        if !size.is_power_of_two() || *size < 4096 {
            p.add(
                None,
                format!(
                    "applies_to.page_size: {size} is not a page size (a power of two, 4096 or more)"
                ),
            );
        }
    }
}

/// A checklist item has its line, whose value names one of its evidence
/// entries; a finding has none.
fn check_class(def: &RuleFile, p: &mut Problems<'_>) {
    use crate::findings::RuleClass;
    match (def.class, &def.checklist) {
        (RuleClass::Checklist, None) => p.add(
            None,
            "class = \"checklist\" needs a [checklist] table (setting, value, notes)".into(),
        ),
        (RuleClass::Finding, Some(_)) => p.add(
            None,
            "[checklist] is only for class = \"checklist\" (a finding is ranked, not listed)"
                .into(),
        ),
        (RuleClass::Checklist, Some(c)) => {
            if !def.evidence.contains_key(&c.value) {
                p.add(
                    None,
                    format!(
                        "checklist.value {:?} must be the label of one of the rule's evidence entries",
                        c.value
                    ),
                );
            }
            for (field, text) in [
                ("checklist.setting", &c.setting),
                ("checklist.notes", &c.notes),
            ] {
                if text.trim().is_empty() {
                    p.add(None, format!("{field} must not be empty"));
                }
            }
        }
        (RuleClass::Finding, None) => {}
    }
}

/// References have a title and an http(s) url.
fn check_references(def: &RuleFile, p: &mut Problems<'_>) {
    for r in &def.references {
        if r.title.trim().is_empty() {
            p.add(None, "references: title must not be empty".into());
        }
        if let Some(url) = &r.url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            p.add(
                None,
                format!("references: url {url:?} must start with https:// or http://"),
            );
        }
    }
}

/// The fix's commands are not empty and its files say where, how and what.
fn check_fix(def: &RuleFile, p: &mut Problems<'_>) {
    if def
        .fix
        .commands
        .iter()
        .chain(&def.fix.revert)
        .any(|c| c.trim().is_empty())
    {
        p.add(None, "fix: commands must not be empty strings".into());
    }
    for f in &def.fix.files {
        let has_content = !f.content.trim().is_empty() || f.wiredtiger_config.is_some();
        if !f.path.starts_with('/') || f.how.trim().is_empty() || !has_content {
            p.add(
                None,
                format!(
                    "fix.files: {:?} needs an absolute path, a `how` and some content",
                    f.path
                ),
            );
        }
    }
}

/// Checks the CEL expressions: each is compiled, its fact names checked on
/// the syntax tree (every branch), then it is evaluated on the example facts
/// with only the always-bound, required and optional groups, so unknown
/// facts and missing `requires` entries are caught now (types, anything the
/// walk cannot see).
struct Expressions<'a> {
    text: &'a str,
    example: &'a Facts,
    bound: Vec<&'a str>,
    ctx: Context<'static, 'static>,
}

impl<'a> Expressions<'a> {
    fn new(def: &'a RuleFile, text: &'a str, example: &'a Facts) -> Self {
        let mut bound: Vec<&str> = ALWAYS_BOUND.to_vec();
        bound.extend(def.requires.iter().map(String::as_str));
        bound.extend(def.optional.iter().map(String::as_str));
        let ctx = eval::context(example, Some(&bound));
        Self {
            text,
            example,
            bound,
            ctx,
        }
    }

    /// The message for an evaluation error of `what`.
    fn explain_error(what: &str, e: EvalError) -> String {
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
    }

    /// The first fact the program selects that is unbound or unknown.
    fn static_check(&self, what: &str, program: &Program) -> Option<String> {
        for (group, field) in eval::selections(program) {
            if !FACT_GROUPS.contains(&group.as_str()) {
                continue;
            }
            if !self.bound.contains(&group.as_str()) {
                return Some(Self::explain_error(what, EvalError::UnknownName(group)));
            }
            if self
                .example
                .group(&group)
                .is_some_and(|g| !g.contains_key(&field))
            {
                return Some(Self::explain_error(
                    what,
                    EvalError::NoSuchFact(format!("{group}.{field}")),
                ));
            }
        }
        None
    }

    /// A boolean expression (`condition`, `hold`): its program when it
    /// compiles, even if it then fails a check.
    fn boolean(&self, what: &str, expr: &Spanned<String>, p: &mut Problems<'_>) -> Option<Program> {
        let line = Some(line_of(self.text, expr.span().start));
        match eval::compile(expr.get_ref()) {
            Ok(program) => {
                if let Some(problem) = self.static_check(what, &program) {
                    p.add(line, problem);
                } else if let Err(e) = eval::eval_bool(&program, &self.ctx) {
                    p.add(line, Self::explain_error(what, e));
                }
                Some(program)
            }
            Err(e) => {
                p.add(line, format!("{what}: {e}"));
                None
            }
        }
    }

    /// The evidence entries in file order (at least one), each a scalar.
    fn evidence(&self, def: &RuleFile, p: &mut Problems<'_>) -> Vec<Evidence> {
        if def.evidence.is_empty() {
            p.add(
                None,
                "evidence: at least one entry is needed (the numbers that make the rule fire)"
                    .into(),
            );
        }
        let mut evidence = Vec::new();
        for (label, expr) in def.evidence_in_file_order() {
            let line = Some(line_of(self.text, expr.span().start));
            let what = format!("evidence {label:?}");
            match eval::compile(expr.get_ref()) {
                Ok(program) => {
                    if let Some(problem) = self.static_check(&what, &program) {
                        p.add(line, problem);
                    } else if let Err(e) = eval::eval_scalar(&program, &self.ctx) {
                        p.add(line, Self::explain_error(&what, e));
                    }
                    evidence.push(Evidence {
                        label: label.to_string(),
                        expr: expr.get_ref().clone(),
                        program,
                    });
                }
                Err(e) => p.add(line, format!("{what}: {e}")),
            }
        }
        evidence
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

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
    fn a_hold_band_is_checked_like_the_condition() {
        let base = testdata::rule_toml("t.hold", "sched.involuntary_share >= 0.25", 0.5, 0.5, "");
        let with = |hold: &str| {
            base.replace(
                "condition = 'sched.involuntary_share >= 0.25'",
                &format!("condition = 'sched.involuntary_share >= 0.25'\nhold = '{hold}'"),
            )
        };
        assert!(compile_one(&with("sched.involuntary_share >= 0.2")).is_ok());
        let e = errors_of(&with("sched.involuntary_shar >= 0.2"));
        assert!(e.contains("test.toml:8: hold: no fact named"), "{e}");
        let e = errors_of(&with("sched.involuntary_share"));
        assert!(e.contains("hold"), "{e}");
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
}
