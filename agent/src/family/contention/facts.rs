//! The `contention` fact group: waits inside vs outside the target's
//! checkpoint windows (futex waits, kernel lock waits, D-state sleeps), their
//! rates and ratios, and the top D-state stack's signature — the evidence a
//! checkpoint-lock-contention rule needs.
//!
//! Derived by the same function the report's contention measurements come
//! from ([`build`], with their model in [`super::measurements`]), so rules
//! and report cannot disagree.
//! A rate or ratio that cannot be computed (no checkpoint time, a quiet
//! outside window) is left out of the group rather than set to 0: rules
//! that need it then say it was missing.

use super::measurements::SplitMeasurement;
use super::totals::{ContentionWindow, build};
use crate::kit::fact::{FactGroup, float, int, text};

/// Why the group is absent.
pub const NO_CONTENTION: &str =
    "neither the syscalls nor the contention probe recorded anything (not attached)";

/// The `contention` facts of a window of a recording.
pub fn facts(w: &ContentionWindow) -> Result<FactGroup, String> {
    let c = build(w).ok_or_else(|| NO_CONTENTION.to_string())?;
    let mut g = FactGroup::new();
    g.insert("duration_s".into(), float(c.duration_s));
    g.insert("checkpoints".into(), int(c.checkpoints));
    g.insert("checkpoint_s".into(), float(c.checkpoint_s));
    for (name, s) in [
        ("futex", &c.futex),
        ("lock", &c.kernel_locks),
        ("dstate", &c.dstate),
    ] {
        if let Some(s) = s {
            insert_split(&mut g, name, s);
        }
    }
    if let Some(top) = c.top_stacks.first() {
        if let Some(sig) = &top.signature {
            g.insert("top_dstate_signature".into(), text(sig.clone()));
        }
        g.insert("top_dstate_ms".into(), float(top.total_ms));
    }
    if let Some(k) = c
        .classes
        .iter()
        .find(|k| k.class == crate::threads::CHECKPOINTER)
        && let Some(r) = k.futex_inside_ms_per_s
    {
        g.insert("checkpointer_futex_inside_ms_per_s".into(), float(r));
    }
    // Application (connection) threads: the ones a checkpoint lock storm stalls.
    if let Some(k) = c.classes.iter().find(|k| k.class == crate::threads::CONN) {
        g.insert("conn_threads".into(), int(k.threads));
        if let Some(r) = k.futex_inside_ms_per_s {
            g.insert("conn_futex_inside_ms_per_s".into(), float(r));
        }
        if let Some(r) = k.futex_outside_ms_per_s {
            g.insert("conn_futex_outside_ms_per_s".into(), float(r));
        }
        if let (Some(i), Some(o)) = (k.futex_inside_ms_per_s, k.futex_outside_ms_per_s)
            && o > 0.0
        {
            g.insert("conn_futex_ratio".into(), float(i / o));
        }
    }
    Ok(g)
}

/// `<name>_inside_ms_per_s`, `<name>_outside_ms_per_s`, `<name>_ratio`
/// (each only when defined) and `<name>_inside_waits`, `<name>_outside_waits`.
fn insert_split(g: &mut FactGroup, name: &str, s: &SplitMeasurement) {
    g.insert(format!("{name}_inside_waits"), int(s.inside_count));
    g.insert(format!("{name}_outside_waits"), int(s.outside_count));
    for (key, v) in [
        ("inside_ms_per_s", s.inside_ms_per_s),
        ("outside_ms_per_s", s.outside_ms_per_s),
        ("ratio", s.ratio),
    ] {
        if let Some(v) = v {
            g.insert(format!("{name}_{key}"), float(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::FactValue;

    #[test]
    fn rates_and_ratios_without_checkpoints_are_left_out() {
        let mut rec = crate::rules::testdata::oversubscribed();
        assert_eq!(
            facts(&ContentionWindow::of(&rec.family_window(&rec.window()))),
            Err(NO_CONTENTION.to_string())
        );
        for s in &mut rec.slices {
            s.syscalls = Some(Default::default());
        }
        let g = facts(&ContentionWindow::of(&rec.family_window(&rec.window()))).unwrap();
        assert_eq!(g.get("checkpoints"), Some(&FactValue::Int(0)));
        assert_eq!(g.get("futex_inside_waits"), Some(&FactValue::Int(0)));
        // No checkpoint time: no inside rate and no ratio.
        assert_eq!(g.get("futex_inside_ms_per_s"), None);
        assert_eq!(g.get("futex_ratio"), None);
        assert_eq!(
            g.get("futex_outside_ms_per_s"),
            Some(&FactValue::Float(0.0))
        );
        // The contention family did not run: no lock or D-state facts.
        assert_eq!(g.get("lock_inside_waits"), None);
    }

    #[test]
    fn the_split_of_a_recording_with_checkpoints() {
        let rec = super::super::report::tests::recording();
        let g = facts(&ContentionWindow::of(&rec.family_window(&rec.window()))).unwrap();
        assert_eq!(g.get("checkpoints"), Some(&FactValue::Int(2)));
        assert_eq!(g.get("checkpoint_s"), Some(&FactValue::Float(1.0)));
        assert_eq!(g.get("futex_ratio"), Some(&FactValue::Float(40.0)));
        assert_eq!(
            g.get("futex_inside_ms_per_s"),
            Some(&FactValue::Float(400.0))
        );
        assert_eq!(g.get("dstate_inside_waits"), Some(&FactValue::Int(3)));
        assert_eq!(
            g.get("top_dstate_signature"),
            Some(&FactValue::Text("xfs_ilock".into()))
        );
        assert_eq!(g.get("lock_ratio"), Some(&FactValue::Float(81.0)));
    }
}
