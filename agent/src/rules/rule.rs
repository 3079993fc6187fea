//! A compiled rule ([`Rule`]) and whether it applies to a recording
//! ([`Applies`]): the target process (a mongod rule for a mongod), the page
//! size, architecture, kernel, mongod and allocator requirements, then the
//! fact groups it needs.
//!
//! Kept apart from [`super::compile`], which builds a [`Rule`] from a file,
//! so that what a loaded rule is and how it is judged read on their own.

use std::collections::BTreeMap;

use cel::Program;
use semver::VersionReq;

use super::facts;
use super::{FactValue, Facts, RuleFile};

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
    pub(super) arch: Vec<String>,
    pub(super) arch_priors: BTreeMap<String, f64>,
    pub(super) kernel: Option<VersionReq>,
    pub(super) mongod: Option<VersionReq>,
    pub(super) condition: Program,
    pub(super) hold: Option<Program>,
    pub(super) evidence: Vec<Evidence>,
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

    /// The hysteresis band's condition, if the rule has one.
    pub fn hold(&self) -> Option<&Program> {
        self.hold.as_ref()
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
    /// (normalised). Checked in order: target process, page size,
    /// architecture, kernel, mongod, allocator, then the required fact groups.
    pub fn applies(&self, facts: &Facts, arch: &str) -> Applies {
        self.target_mismatch(facts)
            .or_else(|| self.page_size_mismatch(facts))
            .or_else(|| self.arch_mismatch(facts, arch))
            .or_else(|| self.kernel_mismatch(facts))
            .or_else(|| self.mongod_mismatch(facts))
            .or_else(|| self.allocator_mismatch(facts))
            .or_else(|| self.missing_group(facts))
            .unwrap_or(Applies::Yes)
    }

    /// Not the kind of process (`applies_to.target`) the rule is about.
    fn target_mismatch(&self, facts: &Facts) -> Option<Applies> {
        if let Some(kind) = &self.def.applies_to.target
            && let Some(other) = other_process(facts, kind)
        {
            return Some(Applies::No(format!(
                "about {kind}'s own settings; {other}, not a {kind}"
            )));
        }
        None
    }

    /// Not a page size the rule is written for.
    fn page_size_mismatch(&self, facts: &Facts) -> Option<Applies> {
        let sizes = &self.def.applies_to.page_size;
        if let Some(FactValue::Int(size)) = facts.get("host.page_size")
            && !sizes.is_empty()
            && !sizes.iter().any(|s| i64::try_from(*s).ok() == Some(*size))
        {
            let kib = |b: i64| format!("{} KiB", b / 1024);
            return Some(Applies::No(format!(
                "written for kernels with {} pages; this kernel's page is {}",
                sizes
                    .iter()
                    .map(|s| kib(i64::try_from(*s).unwrap_or(i64::MAX)))
                    .collect::<Vec<_>>()
                    .join(" or "),
                kib(*size)
            )));
        }
        None
    }

    /// Another architecture than the rule's, or an unknown one.
    fn arch_mismatch(&self, facts: &Facts, arch: &str) -> Option<Applies> {
        if !self.arch.is_empty() && facts::unnamed(arch) {
            let why = facts
                .arch_unknown
                .as_deref()
                .unwrap_or("the recording does not name it");
            return Some(Applies::Unknown(format!(
                "architecture unknown: {why}; the rule is only for {} (--arch names one)",
                self.arch.join(", ")
            )));
        }
        if !self.arch.is_empty() && !self.arch.iter().any(|a| a == arch) {
            return Some(Applies::No(format!(
                "only for {}; this is {arch}",
                self.arch.join(", ")
            )));
        }
        None
    }

    /// A kernel outside the rule's requirement, or an unknown one.
    fn kernel_mismatch(&self, facts: &Facts) -> Option<Applies> {
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
                    return Some(Applies::Unknown(match &facts.kernel_unknown {
                        Some(why) => {
                            format!("kernel unknown: {why}; the rule needs kernel {req}")
                        }
                        None => format!(
                            "kernel release {kernel_release:?} not understood; the rule needs kernel {req}"
                        ),
                    }));
                }
                Some(v) if !req.matches(v) => {
                    return Some(Applies::No(format!(
                        "needs kernel {req}; this host runs {v} ({kernel_release})"
                    )));
                }
                Some(_) => {}
            }
        }
        None
    }

    /// A mongod version outside the rule's requirement, or an unknown one.
    fn mongod_mismatch(&self, facts: &Facts) -> Option<Applies> {
        if let Some(req) = &self.mongod {
            match &facts.mongod_version {
                None => {
                    return Some(Applies::Unknown(format!(
                        "mongod version unknown ({}); the rule needs mongod {req}",
                        facts
                            .mongod_version_unknown
                            .as_deref()
                            .unwrap_or("the recording has no mongod data")
                    )));
                }
                Some(v) if !req.matches(v) => {
                    return Some(Applies::No(format!(
                        "needs mongod {req}; the target runs {v}"
                    )));
                }
                Some(_) => {}
            }
        }
        None
    }

    /// Another allocator than the rule is about, or an unknown one.
    fn allocator_mismatch(&self, facts: &Facts) -> Option<Applies> {
        let allocators = &self.def.applies_to.allocator;
        if !allocators.is_empty() {
            match &facts.allocator {
                None => {
                    return Some(Applies::Unknown(format!(
                        "memory allocator unknown ({}); the rule is about {}",
                        facts.allocator_unknown.as_deref().unwrap_or("not recorded"),
                        allocators.join(", ")
                    )));
                }
                Some(a) if !allocators.iter().any(|x| x == a) => {
                    let uses = match a.as_str() {
                        "unknown" => "another one (e.g. macOS's or Windows' own)".to_string(),
                        named => named.to_string(),
                    };
                    return Some(Applies::No(format!(
                        "about the {} allocator; the target uses {uses}",
                        allocators.join(", ")
                    )));
                }
                Some(_) => {}
            }
        }
        None
    }

    /// A required fact group the recording lacks.
    fn missing_group(&self, facts: &Facts) -> Option<Applies> {
        for group in &self.def.requires {
            if let Some(reason) = facts.absent_reason(group) {
                return Some(Applies::Unknown(format!("needs {group} data: {reason}")));
            }
        }
        None
    }
}

/// How the recording names a process that is not a `kind` ("the target is
/// `spin` (pid 42)", "the server is a mongos"), or `None` when it is one. A
/// host-wide recording without the server's answers names no process: the
/// host is what was asked about, so the rule applies.
fn other_process(facts: &Facts, kind: &str) -> Option<String> {
    let text = |name: &str| match facts.get(name) {
        Some(FactValue::Text(s)) => s.as_str(),
        _ => "",
    };
    let process = text("target.process");
    if process.is_empty() || process == kind {
        return None;
    }
    match facts.get("target.pid") {
        Some(FactValue::Int(pid)) if *pid > 0 => Some(format!(
            "the target is `{process}` (pid {pid}, known from {})",
            text("target.process_from")
        )),
        _ => Some(format!("the server is a {process}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{compile, testdata};

    fn compile_one(text: &str) -> Rule {
        compile("test.toml", text, &Facts::example()).unwrap()
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
        let rule = compile_one(&text);
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
    fn a_mongod_rule_does_not_apply_to_another_process() {
        let rule = compile_one(&testdata::rule_toml(
            "t.target",
            "true",
            0.5,
            0.5,
            "[applies_to]\ntarget = \"mongod\"\n",
        ));
        let mut rec = testdata::oversubscribed();
        assert_eq!(rule.applies(&Facts::derive(&rec), "x86_64"), Applies::Yes);
        // A CPU spinner named `spin`: not about mongod, and the reason says so.
        if let Some(t) = rec.target.as_mut() {
            t.comm = "spin".into();
            t.exe = Some("/usr/local/bin/spin".into());
            t.pid = 4242;
        }
        match rule.applies(&Facts::derive(&rec), "x86_64") {
            Applies::No(r) => assert_eq!(
                r,
                "about mongod's own settings; the target is `spin` (pid 4242, known from the \
                 target's executable name), not a mongod"
            ),
            other => panic!("{other:?}"),
        }
        // A mongod renamed in comm but not in its executable is still a mongod.
        if let Some(t) = rec.target.as_mut() {
            t.exe = Some("/opt/mongodb/bin/mongod".into());
        }
        assert_eq!(rule.applies(&Facts::derive(&rec), "x86_64"), Applies::Yes);
        // Host-wide without mongod's answers: the host is judged.
        rec.target = None;
        assert_eq!(rule.applies(&Facts::derive(&rec), "x86_64"), Applies::Yes);
        // A server that answered as a mongos (FTDC or --uri, no target).
        let mut mongos = testdata::baseline();
        mongos.target = None;
        if let Some(i) = mongos.mongod.as_mut().and_then(|m| m.info.as_mut()) {
            i.process = Some("mongos".into());
        }
        assert!(
            matches!(rule.applies(&Facts::derive(&mongos), "x86_64"), Applies::No(r) if r.ends_with("the server is a mongos, not a mongod"))
        );
        // Only known kinds are accepted.
        let bad = testdata::rule_toml(
            "t.bad",
            "true",
            0.5,
            0.5,
            "[applies_to]\ntarget = \"mysqld\"\n",
        );
        let e = compile("t.toml", &bad, &Facts::example()).unwrap_err();
        assert!(
            e.iter()
                .any(|e| e.message
                    == "applies_to.target: unknown target \"mysqld\"; use one of mongod"),
            "{e:?}"
        );
    }

    #[test]
    fn mongod_and_allocator_requirements_are_not_assessed_without_data() {
        let rule = compile_one(&testdata::rule_toml(
            "t.mongod",
            "true",
            0.5,
            0.5,
            "[applies_to]\nmongod = \">=7.0\"\nallocator = [\"google_tcmalloc\"]\n",
        ));
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
