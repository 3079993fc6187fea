//! Stacks as a recording stores them: each distinct stack written once,
//! under an id ([`StackDef`]), and values counted by id per slice
//! ([`StackCount`] on CPU, [`WaitCount`] off CPU). [`ProfileBuilder`] sums
//! them back into a [`Profile`] as a reader reads the slices.
//!
//! Bound: a writer interns at most [`MAX_DEFS`] stacks per recording and
//! family (past that, new stacks count under one "[other stacks]" stack of
//! their class); a builder keeps the same bound whoever wrote the file, so
//! reading a recording holds at most [`MAX_DEFS`] stacks per profile.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{Frame, Profile, ProfileKind, ProfileStack};

/// Distinct stacks per recording and family.
pub const MAX_DEFS: usize = 16384;

/// The frame of values whose stack id the file never defined (a damaged or
/// partial file, or ids past [`MAX_DEFS`]).
pub const UNDEFINED_STACK: &str = "[stack not in this recording]";

/// A distinct stack, as first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackDef {
    /// Unique within the recording and family.
    pub id: u32,
    /// The thread's class (`conn`, `checkpointer`, …).
    pub class: String,
    /// Root first; user frames, then kernel frames.
    pub frames: Vec<Frame>,
    /// The user stack does not reach the thread's entry point (see
    /// [`ProfileStack::truncated`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// On-CPU samples of one stack in one slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackCount {
    pub id: u32,
    pub samples: u64,
}

/// Why an off-CPU thread was off the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// Interruptible sleep: a futex (mutex, condition variable), poll,
    /// a socket read, a timer.
    Sleep,
    /// Uninterruptible sleep (D state): disk I/O, page faults, kernel locks.
    Disk,
    /// Runnable, waiting for a CPU (preempted, or yielded).
    RunQueue,
}

impl Wait {
    /// The root frame of its stacks in a profile.
    pub fn frame(self) -> Frame {
        Frame {
            function: match self {
                Wait::Sleep => "[sleeping]",
                Wait::Disk => "[uninterruptible (D)]",
                Wait::RunQueue => "[waiting for a CPU]",
            }
            .to_owned(),
            object: "[wait]".to_owned(),
        }
    }
}

/// Off-CPU time of one stack in one slice, by why and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitCount {
    pub id: u32,
    pub wait: Wait,
    /// The wait began inside a checkpoint of the target.
    pub in_checkpoint: bool,
    /// Waits that ended in the slice.
    pub waits: u64,
    /// Their time, ns.
    pub ns: u64,
}

/// Sums a recording's stacks as its slices are read.
#[derive(Debug, Default)]
pub struct ProfileBuilder {
    defs: HashMap<u32, StackDef>,
    values: BTreeMap<(u32, Option<Wait>, Option<bool>), u64>,
    freq_hz: u64,
}

impl ProfileBuilder {
    /// Keeps the definitions (up to [`MAX_DEFS`]).
    pub fn defs(&mut self, defs: Vec<StackDef>) {
        for def in defs {
            if self.defs.len() < MAX_DEFS || self.defs.contains_key(&def.id) {
                self.defs.insert(def.id, def);
            }
        }
    }

    /// On-CPU samples at `freq_hz` per CPU.
    pub fn samples(&mut self, freq_hz: u64, counts: Vec<StackCount>) {
        if freq_hz != 0 {
            self.freq_hz = freq_hz;
        }
        for c in counts {
            *self.values.entry((c.id, None, None)).or_default() += c.samples;
        }
    }

    /// Off-CPU time.
    pub fn waits(&mut self, counts: Vec<WaitCount>) {
        for c in counts {
            *self
                .values
                .entry((c.id, Some(c.wait), Some(c.in_checkpoint)))
                .or_default() += c.ns;
        }
    }

    /// The profile over `duration_ns`; `None` when no value was counted.
    pub fn finish(self, kind: ProfileKind, duration_ns: u64) -> Option<Profile> {
        if self.values.is_empty() {
            return None;
        }
        let mut stacks: Vec<ProfileStack> = Vec::with_capacity(self.values.len());
        let mut undefined: BTreeMap<(Option<Wait>, Option<bool>), u64> = BTreeMap::new();
        for ((id, wait, in_checkpoint), value) in self.values {
            let Some(def) = self.defs.get(&id) else {
                *undefined.entry((wait, in_checkpoint)).or_default() += value;
                continue;
            };
            let mut frames = Vec::with_capacity(def.frames.len() + 1);
            frames.extend(wait.map(Wait::frame));
            frames.extend(def.frames.iter().cloned());
            stacks.push(ProfileStack {
                class: def.class.clone(),
                frames,
                truncated: def.truncated,
                in_checkpoint,
                value,
            });
        }
        for ((wait, in_checkpoint), value) in undefined {
            let mut frames: Vec<Frame> = wait.map(Wait::frame).into_iter().collect();
            frames.push(Frame {
                function: UNDEFINED_STACK.to_owned(),
                object: "[unknown]".to_owned(),
            });
            stacks.push(ProfileStack {
                class: "unknown".to_owned(),
                frames,
                truncated: false,
                in_checkpoint,
                value,
            });
        }
        stacks.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.frames.cmp(&b.frames)));
        Some(Profile {
            kind,
            freq_hz: if kind == ProfileKind::OnCpu {
                self.freq_hz
            } else {
                0
            },
            duration_ns,
            stacks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(f: &str) -> Frame {
        Frame {
            function: f.to_owned(),
            object: "w".to_owned(),
        }
    }

    fn def(id: u32, frames: &[&str], truncated: bool) -> StackDef {
        StackDef {
            id,
            class: "conn".into(),
            frames: frames.iter().map(|f| frame(f)).collect(),
            truncated,
        }
    }

    #[test]
    fn samples_sum_over_slices_and_defs_are_read_once() {
        let mut b = ProfileBuilder::default();
        b.defs(vec![def(0, &["a", "b"], false)]);
        b.samples(99, vec![StackCount { id: 0, samples: 3 }]);
        b.defs(vec![def(1, &["a", "c"], true)]);
        b.samples(
            0,
            vec![
                StackCount { id: 0, samples: 2 },
                StackCount { id: 1, samples: 7 },
                StackCount { id: 9, samples: 1 },
            ],
        );
        let p = b.finish(ProfileKind::OnCpu, 2_000_000_000).expect("stacks");
        assert_eq!(p.freq_hz, 99);
        assert_eq!(p.total(), 13, "every sample counted once");
        assert_eq!(p.stacks[0].value, 7);
        assert!(p.stacks[0].truncated);
        assert_eq!(p.stacks[1].value, 5);
        let undefined = p
            .stacks
            .iter()
            .find(|s| s.frames[0].function == UNDEFINED_STACK);
        assert_eq!(undefined.map(|s| s.value), Some(1));
    }

    #[test]
    fn waits_are_split_by_kind_and_window_under_a_root_frame_of_their_kind() {
        let mut b = ProfileBuilder::default();
        b.defs(vec![def(0, &["a", "futex_wait"], false)]);
        let w = |wait, in_checkpoint, ns| WaitCount {
            id: 0,
            wait,
            in_checkpoint,
            waits: 1,
            ns,
        };
        b.waits(vec![w(Wait::Sleep, false, 10), w(Wait::Sleep, true, 5)]);
        b.waits(vec![w(Wait::Sleep, false, 10), w(Wait::RunQueue, false, 1)]);
        let p = b.finish(ProfileKind::OffCpu, 1).expect("stacks");
        assert_eq!(p.total(), 26);
        assert_eq!(p.stacks[0].value, 20);
        assert_eq!(p.stacks[0].in_checkpoint, Some(false));
        assert_eq!(p.stacks[0].frames[0], Wait::Sleep.frame());
        assert_eq!(p.stacks[0].frames[1].function, "a");
        assert!(
            p.stacks
                .iter()
                .any(|s| s.frames[0] == Wait::RunQueue.frame())
        );
        assert_eq!(p.freq_hz, 0);
    }

    #[test]
    fn no_values_no_profile() {
        assert!(
            ProfileBuilder::default()
                .finish(ProfileKind::OnCpu, 1)
                .is_none()
        );
    }

    #[test]
    fn definitions_past_the_bound_are_not_kept() {
        let mut b = ProfileBuilder::default();
        b.defs(
            (0..MAX_DEFS as u32 + 10)
                .map(|i| def(i, &["x"], false))
                .collect(),
        );
        b.samples(
            99,
            vec![StackCount {
                id: MAX_DEFS as u32 + 5,
                samples: 4,
            }],
        );
        let p = b.finish(ProfileKind::OnCpu, 1).expect("stacks");
        assert_eq!(p.stacks[0].frames[0].function, UNDEFINED_STACK);
        assert_eq!(p.total(), 4);
    }
}
