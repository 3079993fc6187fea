//! `{{group.fact}}` placeholders in a rule's fix: commands, revert commands
//! and the verify text may name a fact of the recording (the disk under the
//! data directory, say), which the finding shows filled in, so the commands
//! are exact for this host. Rule loading checks every name against the
//! example facts; a fact missing from a recording leaves the placeholder as
//! written (never a guessed value).

use super::{FactValue, Facts};

/// The names between `{{` and `}}` in `text`, trimmed.
pub fn names(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

/// Facts that are shell fragments of several words, built by mdiag itself
/// from quoted parts (`target.mongosh_args`: the server's URI as one quoted
/// word and, when it wants authentication, `--username "$MONGOSH_USER"`;
/// `mongod.fcv_*_eval`: one single-quoted word built from a version's
/// digits, `mongo::fcv`); they are inserted as they are.
pub const SHELL_FRAGMENTS: &[&str] = &[
    "target.mongosh_args",
    "mongod.fcv_set_eval",
    "mongod.fcv_revert_eval",
];

/// A fact as it appears in a command: numbers in plain digits, text as is
/// when it is a plain word (a disk name, a path), else single-quoted for the
/// shell, so that a recorded value (a data directory with a space or a `$`)
/// can never become more than one argument of a fix command. The facts of
/// [`SHELL_FRAGMENTS`] are the exception: mdiag quoted their parts.
fn shown(name: &str, v: &FactValue) -> Option<String> {
    match v {
        FactValue::Text(s) if SHELL_FRAGMENTS.contains(&name) => Some(s.clone()),
        FactValue::Text(s) => Some(shell_word(s)),
        FactValue::Int(i) => Some(i.to_string()),
        FactValue::Float(f) => Some(f.to_string()),
        FactValue::Bool(b) => Some(b.to_string()),
        FactValue::Map(_) => None,
    }
}

/// `s` as one POSIX shell word.
pub(crate) fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=+-@%,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Why `name` cannot be a placeholder of a rule that may read `groups`, or
/// `None` when it can.
pub fn check(name: &str, groups: &[&str], example: &Facts) -> Option<String> {
    let group = name.split('.').next().unwrap_or_default();
    if !groups.contains(&group) {
        return Some(format!(
            "placeholder {{{{{name}}}}}: group {group:?} is not in requires or optional"
        ));
    }
    match example.get(name) {
        Some(v) if shown(name, v).is_some() => None,
        Some(_) => Some(format!("placeholder {{{{{name}}}}} is a map, not a value")),
        None => Some(format!(
            "placeholder {{{{{name}}}}}: no fact named `{name}`"
        )),
    }
}

/// `text` with every placeholder whose fact the recording has filled in.
pub fn fill(text: &str, facts: &Facts) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        let name = after[..end].trim();
        match facts.get(name).and_then(|v| shown(name, v)) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_checked_and_filled() {
        let f = Facts::example();
        let cmd = "blockdev --setra 32 /dev/{{ storage.disk }} # {{storage.read_ahead_kb}} KiB now";
        assert_eq!(names(cmd), ["storage.disk", "storage.read_ahead_kb"]);
        assert_eq!(
            fill(cmd, &f),
            "blockdev --setra 32 /dev/nvme0n1 # 128 KiB now"
        );
        assert_eq!(check("storage.disk", &["host", "storage"], &f), None);
        assert!(
            check("storage.disk", &["host"], &f)
                .unwrap()
                .contains("not in requires")
        );
        assert!(
            check("storage.disks", &["storage"], &f)
                .unwrap()
                .contains("no fact named")
        );
        assert!(
            check("sched.classes", &["sched"], &f)
                .unwrap()
                .contains("map")
        );
        // Text that is not a plain word is one quoted shell word.
        assert_eq!(shell_word("/var/lib/mongo"), "/var/lib/mongo");
        assert_eq!(shell_word("/data/my db"), "'/data/my db'");
        assert_eq!(shell_word("/d/$(x)'y"), r"'/d/$(x)'\''y'");
        assert_eq!(shell_word(""), "''");
        // Unknown in this recording: left as written. Unclosed braces stay.
        assert_eq!(fill("x {{storage.nope}} y", &f), "x {{storage.nope}} y");
        assert_eq!(fill("awk '{print $1}' {{", &f), "awk '{print $1}' {{");
    }
}
