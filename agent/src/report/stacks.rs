//! The report's stacks: the target's hottest on-CPU stacks per thread class
//! (terminal and Markdown), and one flame graph per class (HTML).
//!
//! Built from the recording's profile (`Recording::cpu_profile`, summed by
//! the reader from every slice). A stack is shown leaf first, the way people
//! read "where is the time": `c ← b ← a ← …`, at most [`SHOWN_FRAMES`]
//! frames, kernel frames marked `[k]`.

use std::{
    borrow::Cow,
    collections::{HashMap, hash_map::Entry},
    fmt::Write,
};

use serde::{Deserialize, Serialize};

use crate::stacks::{Frame, Profile, ProfileKind, ProfileStack};

/// Thread classes listed.
pub const CLASSES: usize = 4;
/// Stacks listed per class.
pub const PER_CLASS: usize = 5;
/// Frames shown per stack, leaf first.
pub const SHOWN_FRAMES: usize = 10;
/// Kernel frames shown per stack at most, leaf first: a wait's kernel
/// stack (scheduler, syscall, entry: about ten frames) would otherwise fill
/// the line and hide the program's own code, which is what the reader acts on.
pub const SHOWN_KERNEL_FRAMES: usize = 5;
/// The object of the off-CPU profile's first frame, why the thread waited.
const WAIT_OBJECT: &str = "[wait]";

/// The hottest stacks of the target, on CPU (samples) or off CPU (ns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotStacks {
    pub kind: ProfileKind,
    /// On CPU: samples per second and CPU.
    pub freq_hz: u64,
    /// Samples, or ns off CPU, with a stack.
    pub total: u64,
    /// Of which in stacks whose root the unwinder did not reach.
    pub truncated: u64,
    /// Off CPU: of `total`, in waits that began inside a checkpoint.
    pub in_checkpoint: u64,
    /// Off CPU: the stacks were taken for one switch-out in up to this many
    /// (random): each thread's time is exact, its split between stacks an
    /// estimate. 0 or 1: every switch-out.
    #[serde(default)]
    pub sampled_one_in: u32,
    /// Most first.
    pub classes: Vec<ClassStacks>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassStacks {
    pub class: String,
    pub total: u64,
    /// Off CPU: of `total`, inside checkpoints.
    pub in_checkpoint: u64,
    /// Most first.
    pub stacks: Vec<HotStack>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotStack {
    pub value: u64,
    /// Off CPU: why the thread waited ("[sleeping]", …).
    pub wait: Option<String>,
    /// Leaf first; kernel frames end in ` [k]`.
    pub frames: Vec<String>,
    /// Frames not shown (closer to the root).
    pub more_frames: usize,
    /// Kernel frames not shown, between the kernel frames shown (the first
    /// of `frames`) and the user frames.
    #[serde(default)]
    pub more_kernel_frames: usize,
    pub truncated: bool,
}

impl HotStacks {
    pub fn build(profile: &Profile) -> HotStacks {
        let in_cp = |s: &&ProfileStack| s.in_checkpoint == Some(true);
        let classes = profile
            .classes()
            .into_iter()
            .take(CLASSES)
            .map(|(class, total)| {
                let rows = merged_rows(profile.of_class(&class));
                ClassStacks {
                    in_checkpoint: profile
                        .of_class(&class)
                        .filter(in_cp)
                        .map(|s| s.value)
                        .sum(),
                    stacks: rows.iter().take(PER_CLASS).map(hot).collect(),
                    class,
                    total,
                }
            })
            .collect();
        HotStacks {
            kind: profile.kind,
            freq_hz: profile.freq_hz,
            total: profile.total(),
            truncated: profile
                .stacks
                .iter()
                .filter(|s| s.truncated)
                .map(|s| s.value)
                .sum(),
            in_checkpoint: profile.stacks.iter().filter(in_cp).map(|s| s.value).sum(),
            sampled_one_in: 0,
            classes,
        }
    }

    /// A value as people read it: samples, or time off CPU.
    pub fn amount(&self, v: u64) -> String {
        match self.kind {
            ProfileKind::OnCpu => format!("{v} samples"),
            ProfileKind::OffCpu => ms(v),
        }
    }
}

/// A class's stacks with the same frames (inside and outside checkpoints,
/// of different threads of the class) summed into one row, most first: one
/// hash lookup per stack, so a class of 16384 stacks costs milliseconds.
fn merged_rows<'a>(stacks: impl Iterator<Item = &'a ProfileStack>) -> Vec<ProfileStack> {
    let mut index: HashMap<&'a [Frame], usize> = HashMap::new();
    let mut rows: Vec<ProfileStack> = Vec::new();
    for s in stacks {
        match index.entry(&s.frames) {
            Entry::Occupied(e) => rows[*e.get()].value += s.value,
            Entry::Vacant(e) => {
                e.insert(rows.len());
                rows.push(s.clone());
            }
        }
    }
    rows.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.frames.cmp(&b.frames)));
    rows
}

fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn hot(s: &ProfileStack) -> HotStack {
    let (wait, rest) = match s.frames.first() {
        Some(f) if f.object == WAIT_OBJECT => (Some(f.function.clone()), &s.frames[1..]),
        _ => (None, &s.frames[..]),
    };
    let kernel = rest.iter().rev().take_while(|f| f.kernel()).count();
    let more_kernel_frames = kernel.saturating_sub(SHOWN_KERNEL_FRAMES);
    let frames: Vec<String> = rest
        .iter()
        .rev()
        .enumerate()
        .filter(|&(i, _)| i < SHOWN_KERNEL_FRAMES || i >= kernel)
        .take(SHOWN_FRAMES)
        .map(|(_, f)| {
            if f.kernel() {
                format!("{} [k]", f.function)
            } else {
                f.function.clone()
            }
        })
        .collect();
    HotStack {
        value: s.value,
        wait,
        more_frames: rest.len() - more_kernel_frames - frames.len(),
        more_kernel_frames,
        frames,
        truncated: s.truncated,
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// `[sleeping] c ← b ← a ← … 3 more`, with "(truncated)" when the root was
/// not reached.
pub fn stack_line(s: &HotStack) -> String {
    let mut line = String::new();
    if let Some(w) = &s.wait {
        line.push_str(w);
        line.push(' ');
    }
    let kernel_shown = s.frames.iter().take_while(|f| f.ends_with(" [k]")).count();
    for (i, f) in s.frames.iter().enumerate() {
        if i > 0 {
            line.push_str(" ← ");
        }
        line.push_str(f);
        if i + 1 == kernel_shown && s.more_kernel_frames > 0 {
            let _ = write!(line, " ← … {} more [k]", s.more_kernel_frames);
        }
    }
    if s.more_frames > 0 {
        let _ = write!(line, " ← … {} more", s.more_frames);
    }
    if s.truncated {
        line.push_str(" (truncated)");
    }
    line
}

/// What the numbers are, in one sentence.
fn intro(h: &HotStacks) -> String {
    let mut text = match h.kind {
        ProfileKind::OnCpu => format!(
            "{} on-CPU samples of the target at {} Hz per CPU",
            h.total, h.freq_hz
        ),
        ProfileKind::OffCpu => format!(
            "{} off CPU by the target's threads (sleeping, in D state, or waiting for a CPU), {} of it in waits begun inside a checkpoint",
            ms(h.total),
            ms(h.in_checkpoint)
        ),
    };
    if h.sampled_one_in > 1 {
        let _ = write!(
            text,
            "; each thread's time is exact, its split between stacks estimated from the stacks of one switch-out in up to {} (random: mdiag keeps its stack walks near {} a second)",
            h.sampled_one_in,
            mdiag_common::contention::WAIT_CAPTURES_PER_S
        );
    }
    if h.truncated > 0 {
        let _ = write!(
            text,
            "; {:.0} % in stacks cut short (code without frame pointers, such as glibc's, or deeper than 127 frames): their root frames are missing",
            pct(h.truncated, h.total)
        );
    }
    text
}

fn class_line(h: &HotStacks, c: &ClassStacks) -> String {
    let mut line = format!(
        "{} — {} ({:.0} %)",
        c.class,
        h.amount(c.total),
        pct(c.total, h.total)
    );
    if h.kind == ProfileKind::OffCpu {
        let _ = write!(line, ", {} inside checkpoints", ms(c.in_checkpoint));
    }
    line
}

/// The plain-text section (terminal).
pub fn write_text(out: &mut String, h: &HotStacks, heading: &str) -> std::fmt::Result {
    writeln!(out, "{heading}")?;
    writeln!(out, "  {}", intro(h))?;
    for c in &h.classes {
        writeln!(out, "  {}", class_line(h, c))?;
        for s in &c.stacks {
            writeln!(
                out,
                "    {:5.1} %  {}",
                pct(s.value, c.total),
                stack_line(s)
            )?;
        }
    }
    Ok(())
}

/// The Markdown section.
pub fn write_markdown(out: &mut String, h: &HotStacks) -> std::fmt::Result {
    match h.kind {
        ProfileKind::OnCpu => writeln!(out, "## Hottest stacks (on CPU)")?,
        ProfileKind::OffCpu => writeln!(out, "## Where threads wait (off CPU)")?,
    }
    writeln!(out)?;
    writeln!(out, "{}. Leaf first; `[k]` marks kernel frames.", intro(h))?;
    writeln!(out)?;
    for c in &h.classes {
        writeln!(out, "### {}", class_line(h, c))?;
        writeln!(out)?;
        writeln!(out, "| share of class | stack |")?;
        writeln!(out, "|---:|---|")?;
        for s in &c.stacks {
            writeln!(
                out,
                "| {:.1} % | `{}` |",
                pct(s.value, c.total),
                stack_line(s).replace('`', "'").replace('|', "\\|")
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The most sampled leaf functions of an on-CPU profile, `(function,
/// object, samples)`, most first: where the CPU was, kernel functions named
/// (a sample in kernel mode is its kernel leaf, not one "[kernel]" row).
pub fn leaf_functions(profile: &Profile, n: usize) -> Vec<(String, String, u64)> {
    let mut by: std::collections::HashMap<(&str, &str), u64> = Default::default();
    for s in &profile.stacks {
        if let Some(leaf) = s.frames.last() {
            *by.entry((&leaf.function, &leaf.object)).or_default() += s.value;
        }
    }
    let mut v: Vec<(String, String, u64)> = by
        .into_iter()
        .map(|((f, o), v)| (f.to_owned(), o.to_owned(), v))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// The HTML section: flame graphs of the target's on-CPU stacks (all
/// threads, then the [`CLASSES`] busiest classes) and of its off-CPU stacks
/// (all threads, then the class waiting most), each in its own document
/// (`stacks::flame`), self-contained and searchable.
pub fn flame_graphs(on_cpu: Option<&Profile>, off_cpu: Option<&Profile>) -> String {
    let mut out = String::from(
        "<section class=\"flamegraphs\">\n<h2>Flame graphs</h2>\n<p>The target's stacks, \
         root at the bottom, one box per function, its width its share. Hover a box for its \
         value, click to zoom, Ctrl-F (or \"Search\") to find a function. Kernel frames are \
         orange. Off CPU, the first box above a class says why its threads waited.</p>\n",
    );
    // The whole profiles are borrowed; only the per-class ones are built.
    let mut graphs: Vec<(String, Cow<'_, Profile>)> = Vec::new();
    if let Some(p) = on_cpu {
        graphs.push(("On CPU: all threads".to_owned(), Cow::Borrowed(p)));
        for (class, _) in p.classes().into_iter().take(CLASSES) {
            graphs.push((
                format!("On CPU: {class} threads"),
                Cow::Owned(of_class(p, &class)),
            ));
        }
    }
    if let Some(p) = off_cpu {
        graphs.push(("Off CPU: all threads".to_owned(), Cow::Borrowed(p)));
        if let Some((class, _)) = p.classes().into_iter().next() {
            graphs.push((
                format!("Off CPU: {class} threads"),
                Cow::Owned(of_class(p, &class)),
            ));
        }
    }
    for (name, p) in graphs {
        let total = match p.kind {
            ProfileKind::OnCpu => format!("{} samples", p.total()),
            ProfileKind::OffCpu => ms(p.total()),
        };
        let title = format!("{name} ({total})");
        let lines = crate::stacks::folded::folded_lines(&p);
        match crate::stacks::flame::flame_svg(&title, &lines, p.kind, p.freq_hz) {
            Ok(svg) => out.push_str(&crate::stacks::flame::flame_iframe(&title, &svg, 0)),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "<p>{}: no flame graph ({})</p>",
                    html_escape(&title),
                    html_escape(&e.to_string())
                );
            }
        }
        out.push('\n');
    }
    out.push_str("</section>\n");
    out
}

/// The stacks of one class, as a profile of their own.
fn of_class(p: &Profile, class: &str) -> Profile {
    Profile {
        kind: p.kind,
        freq_hz: p.freq_hz,
        duration_ns: p.duration_ns,
        stacks: p.of_class(class).cloned().collect(),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{Frame, ProfileKind};

    fn f(name: &str, object: &str) -> Frame {
        Frame {
            function: name.into(),
            object: object.into(),
        }
    }

    fn s(class: &str, frames: Vec<Frame>, value: u64, in_checkpoint: Option<bool>) -> ProfileStack {
        ProfileStack {
            class: class.into(),
            frames,
            truncated: false,
            in_checkpoint,
            value,
        }
    }

    fn profile() -> Profile {
        Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 99,
            duration_ns: 1,
            stacks: vec![
                s(
                    "conn",
                    vec![f("start_thread", "libc"), f("a", "w"), f("b", "w")],
                    30,
                    None,
                ),
                s(
                    "conn",
                    vec![
                        f("start_thread", "libc"),
                        f("a", "w"),
                        f("read", "libc"),
                        f("vfs_read", "[kernel]"),
                    ],
                    10,
                    None,
                ),
                s(
                    "ftdc",
                    vec![f("start_thread", "libc"), f("z", "w")],
                    5,
                    None,
                ),
            ],
        }
    }

    #[test]
    fn classes_and_stacks_are_ranked_and_read_leaf_first() {
        let h = HotStacks::build(&profile());
        assert_eq!(h.total, 45);
        assert_eq!(h.classes[0].class, "conn");
        assert_eq!(h.classes[0].total, 40);
        assert_eq!(stack_line(&h.classes[0].stacks[0]), "b ← a ← start_thread");
        assert_eq!(h.classes[0].stacks[1].frames[0], "vfs_read [k]");
        let mut text = String::new();
        write_text(&mut text, &h, "Hottest stacks").unwrap();
        assert!(text.contains("conn — 40 samples (89 %)"), "{text}");
        assert!(text.contains(" 75.0 %  b ← a ← start_thread"), "{text}");
        let mut md = String::new();
        write_markdown(&mut md, &h).unwrap();
        assert!(
            md.contains("| 25.0 % | `vfs_read [k] ← read ← a ← start_thread` |"),
            "{md}"
        );
    }

    #[test]
    fn a_deep_kernel_stack_leaves_room_for_the_programs_frames() {
        let mut frames = vec![f("start_thread", "libc")];
        frames.extend((0..12).map(|i| f(&format!("user{i}"), "w")));
        frames.extend((0..9).map(|i| f(&format!("k{i}"), "[kernel]")));
        let h = hot(&s("conn", frames, 1, None));
        assert_eq!(h.more_kernel_frames, 4);
        // 5 kernel frames and 5 of the 13 user frames are shown.
        assert_eq!(h.more_frames, 8);
        assert_eq!(
            stack_line(&h),
            "k8 [k] ← k7 [k] ← k6 [k] ← k5 [k] ← k4 [k] ← … 4 more [k] ← user11 ← user10 ← user9 ← user8 ← user7 ← … 8 more"
        );
        // Every frame is either shown or counted.
        assert_eq!(h.frames.len() + h.more_frames + h.more_kernel_frames, 22);
        // A shallow kernel stack is shown whole.
        let h = hot(&s(
            "conn",
            vec![f("a", "w"), f("read", "[kernel]")],
            1,
            None,
        ));
        assert_eq!(
            (h.more_kernel_frames, stack_line(&h).as_str()),
            (0, "read [k] ← a")
        );
    }

    #[test]
    fn off_cpu_stacks_say_why_and_how_long_and_split_by_checkpoint() {
        let wait = f("[sleeping]", WAIT_OBJECT);
        let frames = vec![
            wait.clone(),
            f("start_thread", "libc"),
            f("wait_for_work", "w"),
            f("futex_wait", "[kernel]"),
        ];
        let p = Profile {
            kind: ProfileKind::OffCpu,
            freq_hz: 0,
            duration_ns: 1,
            stacks: vec![
                s("conn", frames.clone(), 30_000_000, Some(false)),
                s("conn", frames, 10_000_000, Some(true)),
            ],
        };
        let h = HotStacks::build(&p);
        assert_eq!(h.in_checkpoint, 10_000_000);
        assert_eq!(h.classes[0].stacks.len(), 1, "one row for both windows");
        assert_eq!(h.classes[0].stacks[0].value, 40_000_000);
        let line = stack_line(&h.classes[0].stacks[0]);
        assert_eq!(
            line,
            "[sleeping] futex_wait [k] ← wait_for_work ← start_thread"
        );
        let mut text = String::new();
        write_text(&mut text, &h, "Off CPU").unwrap();
        assert!(
            text.contains("conn — 40.0 ms (100 %), 10.0 ms inside checkpoints"),
            "{text}"
        );
    }

    #[test]
    fn long_stacks_show_their_leaf_end() {
        let frames: Vec<Frame> = (0..30).map(|i| f(&format!("f{i}"), "w")).collect();
        let p = Profile {
            stacks: vec![ProfileStack {
                truncated: true,
                ..s("conn", frames, 1, None)
            }],
            ..profile()
        };
        let h = HotStacks::build(&p);
        let line = stack_line(&h.classes[0].stacks[0]);
        assert!(line.starts_with("f29 ← f28"), "{line}");
        assert!(line.ends_with("← … 20 more (truncated)"), "{line}");
        assert_eq!(h.truncated, 1);
    }

    #[test]
    fn flame_graphs_are_sandboxed_self_contained_documents_per_class_and_kind() {
        let on = profile();
        let off = Profile {
            kind: ProfileKind::OffCpu,
            freq_hz: 0,
            duration_ns: 1,
            stacks: vec![s(
                "conn",
                vec![
                    f("[sleeping]", WAIT_OBJECT),
                    f("start_thread", "libc"),
                    f("futex_wait", "[kernel]"),
                ],
                5_000_000,
                Some(false),
            )],
        };
        let html = flame_graphs(Some(&on), Some(&off));
        // All threads and the two classes on CPU; all threads and conn off CPU.
        assert_eq!(html.matches("<iframe").count(), 5, "{html}");
        assert_eq!(
            html.matches(r#"sandbox="allow-scripts allow-modals""#)
                .count(),
            5
        );
        for title in [
            "On CPU: all threads (45 samples)",
            "On CPU: conn threads (40 samples)",
            "On CPU: ftdc threads (5 samples)",
            "Off CPU: all threads (5.0 ms)",
            "Off CPU: conn threads (5.0 ms)",
        ] {
            assert!(html.contains(title), "{title}");
        }
        for needle in [
            "<link",
            "@import",
            " src=",
            "=\"https://",
            "=&quot;https://",
        ] {
            assert!(!html.contains(needle), "{needle}");
        }
        assert!(flame_graphs(None, None).contains("<h2>Flame graphs</h2>"));
    }
}
