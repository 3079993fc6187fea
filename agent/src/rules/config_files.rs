//! One WiredTiger configString for the whole report.
//!
//! mongod reads `storage.wiredTiger.engineConfig.configString` as one
//! string, so when several findings each add settings to it (more eviction
//! threads, larger data-handle hash tables), pasting their fragments one
//! after the other would keep only the last. After ranking, every finding
//! whose fix has a `wiredtiger_config` addition gets the same mongod.conf
//! fragment: the server's recorded configString with all additions merged
//! in ranking order ([`super::wt_config::merge`]).

use super::RuleSet;
use super::wt_config::merge;
use crate::findings::Finding;

/// Fills the `wiredtiger_config` file fragments of `findings` (ranked) with
/// the combined setting. `recorded` is the server's configString (`Some("")`
/// when it has none, `None` when mongod's options were not recorded).
pub fn combine_wiredtiger_config(
    findings: &mut [Finding],
    rules: &RuleSet,
    recorded: Option<&str>,
) {
    // (finding index, file index, addition), in ranking order.
    let mut additions = Vec::new();
    for (i, f) in findings.iter().enumerate() {
        let Some(rule) = rules.rules().iter().find(|r| r.id() == f.rule_id) else {
            continue;
        };
        for (j, file) in rule.def.fix.files.iter().enumerate() {
            // The finding holds the addition with its placeholders filled.
            if let (Some(_), Some(filled)) = (&file.wiredtiger_config, f.fix.files.get(j)) {
                additions.push((i, j, filled.content.trim().to_string(), f.rule_id.clone()));
            }
        }
    }
    if additions.is_empty() {
        return;
    }
    let adds: Vec<&str> = additions.iter().map(|a| a.2.as_str()).collect();
    let combined = merge(recorded.unwrap_or(""), &adds);
    let mut ids: Vec<&str> = additions.iter().map(|a| a.3.as_str()).collect();
    ids.dedup();
    let content =
        format!("storage:\n  wiredTiger:\n    engineConfig:\n      configString: \"{combined}\"");
    let base = match recorded {
        Some("") => "the server had no configString".to_string(),
        Some(r) => format!("keeps the server's recorded configString \"{r}\""),
        None => "the server's configString was not recorded (mongod not polled): \
                 merge with any configString mongod.conf already has"
            .to_string(),
    };
    let note = if ids.len() > 1 {
        format!(
            "one setting for every configString change in this report ({}); {base}",
            ids.join(", ")
        )
    } else {
        base
    };
    for (i, j, _, _) in &additions {
        if let Some(file) = findings[*i].fix.files.get_mut(*j) {
            file.content = content.clone();
            file.language = Some("yaml".into());
            file.how = format!("{}; {note}", file.how);
        }
    }
}
