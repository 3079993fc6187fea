//! Perf family, user side: the call stacks of the target's samples.
//!
//! The kernel counts samples per (tgid, tid, user stack id, kernel stack id)
//! and keeps each distinct stack once in a stack-trace map. Each slice this
//! drains both maps (reads then deletes every counter and every stack, so
//! they only ever hold one slice), makes each stack readable
//! ([`Symbolizer`]: the target's symbols, kallsyms, the thread's class) and
//! interns it ([`Interner`]): a slice carries the stacks first seen in it
//! ([`StackDef`]) and samples per stack id ([`StackCount`]).

use std::collections::HashMap;

use aya::maps::{HashMap as BpfHashMap, MapData, StackTraceMap};
use mdiag_common::perf::StackKey;

use crate::kit::stacks::{StackIps, StackNames, drain_counts, drain_stacks, ips};
use crate::stacks::table::{StackCount, StackDef};
use crate::symbols::ProcessSymbols;

/// Drains and symbolizes the kernel's stack counters.
pub struct StackDrain {
    counts: BpfHashMap<MapData, StackKey, u64>,
    stacks: StackTraceMap<MapData>,
    names: StackNames,
}

impl StackDrain {
    pub fn new(
        counts: BpfHashMap<MapData, StackKey, u64>,
        stacks: StackTraceMap<MapData>,
    ) -> Self {
        Self {
            counts,
            stacks,
            names: StackNames::default(),
        }
    }

    /// Reads and deletes every counter and every stored stack. A sample that
    /// lands between a read and a delete is lost (microseconds), or counted
    /// with a stack already deleted (then under "[stack lost]").
    pub fn drain_raw(&mut self) -> (Vec<(StackKey, u64)>, StackIps) {
        (drain_counts(&mut self.counts), drain_stacks(&mut self.stacks, |_| false))
    }

    /// The target symbols changed: addresses are looked up again.
    pub fn symbols_changed(&mut self) {
        self.names.symbols_changed();
    }

    /// One slice: the target's stacks first seen now, and samples per stack.
    /// `symbols` are the target's (None: frames shown as addresses).
    pub fn next(
        &mut self,
        target: u32,
        symbols: Option<&ProcessSymbols>,
    ) -> (Vec<StackDef>, Vec<StackCount>) {
        let (counts, stacks) = self.drain_raw();
        self.names.new_slice();
        let mut defs = Vec::new();
        let mut by_id: HashMap<u32, u64> = HashMap::new();
        for (key, n) in counts {
            if key.tgid != target {
                continue;
            }
            let id = self.names.id(
                (target, key.tid),
                (ips(key.user_stack, &stacks), ips(key.kernel_stack, &stacks)),
                symbols,
                |_| {},
                &mut defs,
            );
            *by_id.entry(id).or_default() += n;
        }
        let mut counts: Vec<StackCount> = by_id
            .into_iter()
            .map(|(id, samples)| StackCount { id, samples })
            .collect();
        counts.sort_by_key(|c| c.id);
        (defs, counts)
    }
}
