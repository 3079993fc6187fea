//! Scores and ranking of findings, and architecture names.
//!
//! A finding's score is `impact × confidence × arch prior`: how much fixing it
//! is expected to bring, how directly the evidence shows the cause, and how
//! much more (or less) the problem weighs on the architecture the ranking is
//! computed for (a rule's `[arch_priors]`, default 1.0). Findings are ranked by
//! score (descending, compared at the 4 decimals shown in the JSON report),
//! ties by severity (critical first), then by rule id, so the order is stable.
//! Every finding carries a one-line reason that shows this product.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::findings::Finding;

/// Architectures a rule or `--arch` may name (Rust's names, as in the recording).
pub const KNOWN_ARCHES: &[&str] = &[
    "x86_64",
    "aarch64",
    "s390x",
    "powerpc64",
    "powerpc",
    "riscv64",
    "loongarch64",
    "arm",
    "x86",
    "mips64",
    "mips",
    "sparc64",
];

/// Lowercases and maps common aliases to Rust's names (amd64 → x86_64,
/// arm64 → aarch64, ppc64le/ppc64 → powerpc64, i686 → x86). `None` when the
/// result is not in [`KNOWN_ARCHES`].
pub fn normalise_arch(arch: &str) -> Option<String> {
    let lower = arch.trim().to_ascii_lowercase();
    let name = match lower.as_str() {
        "amd64" | "x64" => "x86_64",
        "arm64" => "aarch64",
        "ppc64le" | "ppc64" | "powerpc64le" => "powerpc64",
        "ppc" => "powerpc",
        "i386" | "i486" | "i586" | "i686" => "x86",
        "armv7l" | "armv7" | "armhf" => "arm",
        other => other,
    };
    KNOWN_ARCHES.contains(&name).then(|| name.to_string())
}

/// The parts of one finding's score.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub impact: f64,
    pub confidence: f64,
    /// Architecture the prior was looked up for.
    pub arch: String,
    pub prior: f64,
    /// `true` when the rule has no prior for `arch` (1.0 used).
    pub prior_is_default: bool,
    /// `impact × confidence × prior`, rounded to 4 decimals.
    pub value: f64,
}

impl Score {
    /// "impact 0.60 × confidence 0.80 × s390x prior 1.30 = 0.62".
    pub fn reason(&self) -> String {
        let default = if self.prior_is_default {
            " (default)"
        } else {
            ""
        };
        format!(
            "impact {:.2} × confidence {:.2} × {} prior {:.2}{default} = {:.2}",
            self.impact, self.confidence, self.arch, self.prior, self.value
        )
    }
}

/// Rounds to 4 decimals (what the JSON report shows).
pub fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Scores a rule for `arch` (already normalised).
pub fn score(impact: f64, confidence: f64, priors: &BTreeMap<String, f64>, arch: &str) -> Score {
    let prior = priors.get(arch).copied();
    let prior_value = prior.unwrap_or(1.0);
    Score {
        impact,
        confidence,
        arch: arch.to_string(),
        prior: prior_value,
        prior_is_default: prior.is_none(),
        value: round4(impact * confidence * prior_value),
    }
}

/// The ranking order: score descending, then severity (critical first), then id.
pub fn compare(a: &Finding, b: &Finding) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| b.severity.cmp(&a.severity))
        .then_with(|| a.rule_id.cmp(&b.rule_id))
}

/// Sorts findings into ranking order and numbers them from 1.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(compare);
    for (i, f) in findings.iter_mut().enumerate() {
        f.rank = i + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Severity;

    #[test]
    fn arch_aliases_normalise_to_rust_names() {
        assert_eq!(normalise_arch("x86_64").as_deref(), Some("x86_64"));
        assert_eq!(normalise_arch("AMD64").as_deref(), Some("x86_64"));
        assert_eq!(normalise_arch("arm64").as_deref(), Some("aarch64"));
        assert_eq!(normalise_arch("ppc64le").as_deref(), Some("powerpc64"));
        assert_eq!(normalise_arch(" s390x ").as_deref(), Some("s390x"));
        assert_eq!(normalise_arch("s390"), None);
        assert_eq!(normalise_arch(""), None);
    }

    #[test]
    fn score_multiplies_impact_confidence_and_prior() {
        let priors = BTreeMap::from([("s390x".to_string(), 1.3)]);
        let s = score(0.6, 0.8, &priors, "s390x");
        assert_eq!(s.value, 0.624);
        assert!(!s.prior_is_default);
        assert_eq!(
            s.reason(),
            "impact 0.60 × confidence 0.80 × s390x prior 1.30 = 0.62"
        );
        let x = score(0.6, 0.8, &priors, "x86_64");
        assert_eq!(x.value, 0.48);
        assert!(x.prior_is_default);
        assert!(
            x.reason().contains("x86_64 prior 1.00 (default) = 0.48"),
            "{}",
            x.reason()
        );
    }

    fn finding(id: &str, score: f64, severity: Severity) -> Finding {
        Finding {
            rule_id: id.into(),
            score,
            severity,
            ..crate::report::tests::sample_finding()
        }
    }

    #[test]
    fn ranking_orders_by_score_then_severity_then_id() {
        let mut f = vec![
            finding("b.low_score", 0.2, Severity::Critical),
            finding("z.tie", 0.5, Severity::Medium),
            finding("a.tie", 0.5, Severity::Medium),
            finding("c.tie_high", 0.5, Severity::High),
            finding("d.top", 0.9, Severity::Info),
        ];
        rank(&mut f);
        let order: Vec<(&str, usize)> = f.iter().map(|f| (f.rule_id.as_str(), f.rank)).collect();
        assert_eq!(
            order,
            [
                ("d.top", 1),
                ("c.tie_high", 2),
                ("a.tie", 3),
                ("z.tie", 4),
                ("b.low_score", 5)
            ]
        );
    }
}
