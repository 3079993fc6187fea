//! Brendan Gregg's folded-stack text: one line per distinct stack,
//! `class;root;…;leaf value`.
//!
//! It is the input of flamegraph.pl, inferno (our own SVG flame graphs,
//! [`super::flame`]) and speedscope, and the easiest format to grep, diff or
//! post-process with a one-line awk. `mdiag export --folded` writes it.
//!
//! The layout of a line:
//!
//! - the thread class first, as the root element, so a flame graph splits
//!   by class at its base (`conn`, `WTCheckpointThr`, …);
//! - `[truncated]` right after the class when the unwinder stopped before
//!   the thread's entry point, so the partial stacks stand apart instead of
//!   posing as callees of the class;
//! - the frames, root first, each its function name; kernel frames get the
//!   `_[k]` suffix, what `stackcollapse-perf.pl --kernel` and
//!   `inferno-collapse-perf --kernel` write and what the `java`, `perl` and
//!   `js` palettes of flamegraph.pl and inferno colour orange, as kernel code;
//! - a space and the value (samples, or nanoseconds off CPU).
//!
//! The text must stay parseable whatever the names hold:
//!
//! - `;` separates frames: inside a name it becomes `:`, as both
//!   stackcollapse-perf.pl (`tr/;/:/`) and inferno's collapsers
//!   (`func.replace(';', ":")`) do;
//! - a line is a stack: newlines, and every other control character, become
//!   a space; spaces at either end of an element are dropped (the readers
//!   trim lines, and would merge `f ` with `f` anyway);
//! - the readers take the last space-separated word as the count, and the
//!   one before it, if numeric too, as the first count of a differential
//!   profile: a leaf (or a frameless class) whose last word is a number
//!   (`foo 2`) would be misread, so its last space becomes `_`.
//!
//! Stacks that fold to the same text (the same function names, whatever the
//! objects or the sanitizing) are merged, their values summed, and the lines
//! come sorted (byte order of the whole line, the order inferno checks), so
//! that the same profile always gives the same file.

use std::collections::BTreeMap;
use std::io::Write;

use super::Profile;

/// The element after the class of a truncated stack.
pub const TRUNCATED: &str = "[truncated]";

/// The suffix of kernel frames (flamegraph.pl's convention).
pub const KERNEL_SUFFIX: &str = "_[k]";

/// Writes `profile` as folded stacks, one line each, sorted.
pub fn write_folded(profile: &Profile, out: &mut impl Write) -> std::io::Result<()> {
    for line in folded_lines(profile) {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The folded lines of `profile` (without line ends): merged, sorted.
pub fn folded_lines(profile: &Profile) -> Vec<String> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for stack in &profile.stacks {
        let mut elements = Vec::with_capacity(stack.frames.len() + 2);
        elements.push(sanitize(&stack.class));
        if stack.truncated {
            elements.push(TRUNCATED.to_owned());
        }
        for frame in &stack.frames {
            let mut name = sanitize(&frame.function);
            if frame.kernel() {
                name.push_str(KERNEL_SUFFIX);
            }
            elements.push(name);
        }
        if let Some(last) = elements.last_mut() {
            protect_count(last);
        }
        let value = merged.entry(elements.join(";")).or_default();
        *value = value.saturating_add(stack.value);
    }
    let mut lines: Vec<String> = merged
        .into_iter()
        .map(|(stack, value)| format!("{stack} {value}"))
        .collect();
    lines.sort_unstable();
    lines
}

/// One element's text: no `;`, no control character, no space at its ends.
fn sanitize(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    match replaced.trim() {
        trimmed if trimmed.len() == replaced.len() => replaced,
        trimmed => trimmed.to_owned(),
    }
}

/// The last element of a line must not end in ` <number>`, which the
/// readers would take for a count: its last space becomes `_`.
fn protect_count(last: &mut String) {
    let Some(space) = last.rfind(' ') else {
        return;
    };
    let word = &last[space + 1..];
    let numeric = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_digit() || c == '.')
        && word.chars().filter(|&c| c == '.').count() <= 1;
    if numeric {
        last.replace_range(space..=space, "_");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{KERNEL_OBJECT, ProfileKind, ProfileStack};

    fn stack(class: &str, frames: &[(&str, &str)], value: u64) -> ProfileStack {
        crate::stacks::test_stack(class, frames, false, value)
    }

    fn profile(stacks: Vec<ProfileStack>) -> Profile {
        Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 99,
            duration_ns: 1_000_000_000,
            stacks,
        }
    }

    fn written(p: &Profile) -> String {
        let mut out = Vec::new();
        write_folded(p, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Reads folded text back the way flamegraph.pl does: the count after
    /// the last space, the frames split on `;`.
    fn parse(text: &str) -> Vec<(Vec<String>, u64)> {
        text.lines()
            .map(|line| {
                let (stack, count) = line.rsplit_once(' ').unwrap();
                (
                    stack.split(';').map(str::to_owned).collect(),
                    count.parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn round_trip_of_a_small_profile() {
        let p = profile(vec![
            stack(
                "conn",
                &[
                    ("start_thread", "libc.so.6"),
                    ("mongo::ServiceStateMachine::run()", "mongod"),
                    ("__wt_btcur_search", "mongod"),
                ],
                7,
            ),
            stack("WTCheckpointThr", &[("__wt_checkpoint", "mongod")], 3),
            stack("conn", &[("start_thread", "libc.so.6")], 1),
        ]);
        let text = written(&p);
        assert!(text.ends_with('\n'), "{text:?}");
        assert_eq!(
            parse(&text),
            vec![
                (vec!["WTCheckpointThr".into(), "__wt_checkpoint".into()], 3),
                (vec!["conn".into(), "start_thread".into()], 1),
                (
                    vec![
                        "conn".into(),
                        "start_thread".into(),
                        "mongo::ServiceStateMachine::run()".into(),
                        "__wt_btcur_search".into()
                    ],
                    7
                ),
            ]
        );
        assert_eq!(text.lines().collect::<Vec<_>>(), folded_lines(&p));
        let total: u64 = parse(&text).iter().map(|(_, n)| n).sum();
        assert_eq!(total, p.total());
    }

    #[test]
    fn lines_are_sorted_whatever_the_input_order() {
        let a = stack("conn", &[("a", "mongod"), ("b", "mongod")], 1);
        let b = stack("conn", &[("a", "mongod")], 2);
        let c = stack("LogicalSessionCacheRefresh", &[("z", "mongod")], 3);
        let forward = folded_lines(&profile(vec![a.clone(), b.clone(), c.clone()]));
        let backward = folded_lines(&profile(vec![c, b, a]));
        assert_eq!(forward, backward);
        let mut sorted = forward.clone();
        sorted.sort();
        assert_eq!(forward, sorted);
    }

    #[test]
    fn stacks_with_the_same_text_are_merged() {
        let p = profile(vec![
            stack("conn", &[("main", "mongod"), ("f", "mongod")], 2),
            stack("conn", &[("main", "mongod"), ("g", "mongod")], 5),
            // Same names in another object fold to the same text.
            stack("conn", &[("main", "mongod"), ("f", "libfoo.so")], 3),
            stack("conn", &[("main", "mongod"), ("f", "mongod")], 4),
        ]);
        assert_eq!(folded_lines(&p), vec!["conn;main;f 9", "conn;main;g 5"]);
    }

    #[test]
    fn truncated_stacks_get_a_marker_after_the_class() {
        let mut partial = stack("conn", &[("f", "mongod"), ("g", "mongod")], 4);
        partial.truncated = true;
        let whole = stack("conn", &[("f", "mongod"), ("g", "mongod")], 1);
        let p = profile(vec![partial, whole]);
        assert_eq!(
            folded_lines(&p),
            vec!["conn;[truncated];f;g 4", "conn;f;g 1"]
        );
    }

    #[test]
    fn kernel_frames_get_the_k_suffix() {
        let p = profile(vec![stack(
            "conn",
            &[
                ("recv", "libc.so.6"),
                ("entry_SYSCALL_64", KERNEL_OBJECT),
                ("tcp_recvmsg", KERNEL_OBJECT),
            ],
            6,
        )]);
        assert_eq!(
            folded_lines(&p),
            vec!["conn;recv;entry_SYSCALL_64_[k];tcp_recvmsg_[k] 6"]
        );
    }

    #[test]
    fn special_characters_do_not_break_the_format() {
        let p = profile(vec![
            stack(
                "we;ird\nclass",
                &[
                    ("a;b", "mongod"),
                    ("multi\nline\r\n", "mongod"),
                    ("\ttabbed ", "mongod"),
                    ("k;n", KERNEL_OBJECT),
                ],
                2,
            ),
            // A leaf whose last word is a number, then a frameless class.
            stack("conn", &[("operator new 42", "mongod")], 3),
            stack("worker 7", &[], 4),
            stack("conn", &[("f 1.5", "mongod")], 5),
        ]);
        let text = written(&p);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert_eq!(
            folded_lines(&p),
            vec![
                "conn;f_1.5 5",
                "conn;operator new_42 3",
                "we:ird class;a:b;multi line;tabbed;k:n_[k] 2",
                "worker_7 4",
            ]
        );
        for (frames, _) in parse(&text) {
            for f in frames {
                assert!(!f.chars().any(char::is_control), "{f:?}");
            }
        }
    }

    #[test]
    fn an_empty_profile_writes_nothing() {
        assert_eq!(written(&profile(vec![])), "");
    }
}
