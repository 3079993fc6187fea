//! Stacks from the kernel's stack-trace maps, made readable: the probe
//! kit's part that the perf family (on-CPU samples) and the contention
//! family (off-CPU waits) share.
//!
//! [`Symbolizer`] turns a user stack (instruction pointers, leaf first, as
//! `bpf_get_stackid` stores them) and a kernel stack into frames, root
//! first: user frames with the target's [`ProcessSymbols`] (demangled),
//! kernel frames with /proc/kallsyms; it names the thread's class from its
//! current name. [`Interner`] gives each distinct (class, frames) an id, so a
//! recording stores a stack once ([`StackDef`]) and counts by id after.
//!
//! Memory is bounded: symbol and name caches are emptied when full, the
//! interner holds at most [`MAX_DEFS`] stacks (then new stacks count under
//! one "[other stacks]" stack of their class).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use aya::maps::{HashMap as BpfHashMap, MapData, StackTraceMap};
use mdiag_common::stack::{NO_STACK, UNSAMPLED_STACK};

use crate::kit::fact::thread_class;
use crate::kstack::KernelSymbols;
use crate::stacks::table::{MAX_DEFS, StackDef};
use crate::stacks::{Frame, KERNEL_OBJECT};
use crate::symbols::ProcessSymbols;
use crate::symbols::demangle::readable;

/// Symbolized addresses remembered (user and kernel each).
const FRAME_CACHE: usize = 16384;
/// Raw stacks (addresses) remembered with their interned id.
const RAW_CACHE: usize = 65536;
/// Thread names remembered.
const NAME_CACHE: usize = 8192;
/// The kernel's unwinding limit (`PERF_MAX_STACK_DEPTH`, the default of
/// sysctl `kernel.perf_event_max_stack`): a user stack this deep was cut.
pub const MAX_DEPTH: usize = 127;
/// Objects where a thread's user stack ends when the frame-pointer chain is
/// whole: glibc's `start_thread` / `__libc_start_call_main` (libc has no
/// frame pointers of its own, so the walk ends in it), musl's, the dynamic
/// loader's.
const ROOT_OBJECTS: [&str; 3] = ["libc.so", "ld-linux", "ld-musl"];
/// Functions where a user stack ends when the chain is whole.
const ROOT_FUNCTIONS: [&str; 7] = [
    "clone",
    "clone3",
    "__clone",
    "start_thread",
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
];

/// The frame of a stack the kernel could not store (its hash bucket taken
/// by another stack, or the walk failed) or that was emptied before read.
pub const LOST_STACK: &str = "[stack lost]";
/// The frame of off-CPU time whose stacks were not sampled, shown only when
/// a thread had no sampled wait of that kind in the slice to spread it over.
pub const UNSAMPLED: &str = "[not sampled]";
/// The stack that stands for every new stack once [`MAX_DEFS`] are interned.
pub const OTHER_STACKS: &str = "[other stacks]";

/// Stacks read from a stack-trace map: id → addresses, leaf first.
pub type StackIps = HashMap<u32, Vec<u64>>;

/// Reads and deletes every entry of a counter map (an entry added between
/// its read and the delete of its key loses that addition).
pub fn drain_counts<K, V>(map: &mut BpfHashMap<MapData, K, V>) -> Vec<(K, V)>
where
    K: aya::Pod,
    V: aya::Pod,
{
    let keys: Vec<K> = map.keys().flatten().collect();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        if let Ok(v) = map.get(&key, 0) {
            out.push((key, v));
        }
        let _ = map.remove(&key);
    }
    out
}

/// Reads every stack of a stack-trace map, deleting those `keep` does not
/// name (so the map holds one slice's stacks, and those still needed).
pub fn drain_stacks(map: &mut StackTraceMap<MapData>, keep: impl Fn(u32) -> bool) -> StackIps {
    let ids: Vec<u32> = map.stack_ids().flatten().collect();
    let mut stacks = HashMap::with_capacity(ids.len());
    for id in ids {
        if let Ok(trace) = map.get(&id, 0) {
            stacks.insert(id, trace.frames().iter().map(|f| f.ip).collect());
        }
        if !keep(id) {
            let _ = map.remove(&id);
        }
    }
    stacks
}

/// A stack id as the kernel left it: not taken, lost, or its addresses.
pub fn ips(id: u32, stacks: &StackIps) -> Ips<'_> {
    match stacks.get(&id) {
        Some(ips) => Ips::Leaf(ips),
        None if id == NO_STACK => Ips::None,
        None if id == UNSAMPLED_STACK => Ips::Unsampled,
        None => Ips::Lost,
    }
}

/// The key of a raw stack for [`Interner::known`]: its class and both
/// sides as the kernel left them.
pub fn raw_key(class: &str, user: Ips<'_>, kernel: Ips<'_>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    class.hash(&mut h);
    for side in [user, kernel] {
        match side {
            Ips::None => 0u8.hash(&mut h),
            Ips::Lost => 1u8.hash(&mut h),
            Ips::Unsampled => 3u8.hash(&mut h),
            Ips::Leaf(ips) => {
                2u8.hash(&mut h);
                ips.hash(&mut h);
            }
        }
    }
    h.finish()
}

/// One side of a sample's stacks, as the kernel left it.
#[derive(Debug, Clone, Copy)]
pub enum Ips<'a> {
    /// Not taken (the kernel stack of a user-mode sample; the user stack of
    /// a kernel thread).
    None,
    /// Taken, but not stored or no longer in the map.
    Lost,
    /// Not taken: an off-CPU wait outside the sample.
    Unsampled,
    /// Leaf first.
    Leaf(&'a [u64]),
}

/// Frames from addresses, with caches.
pub struct Symbolizer {
    ksyms: Option<Arc<KernelSymbols>>,
    /// By address: the function there, with the functions inlined into it
    /// at that address after it (outermost first) where DWARF says so.
    user_frames: HashMap<u64, Vec<Frame>>,
    kernel_frames: HashMap<u64, Frame>,
    names: HashMap<u32, String>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    pub fn new() -> Self {
        Self {
            ksyms: KernelSymbols::shared(),
            user_frames: HashMap::new(),
            kernel_frames: HashMap::new(),
            names: HashMap::new(),
        }
    }

    /// Call at each slice: thread names are read again (a thread names
    /// itself after it starts), and a process's new mappings are seen by
    /// the user-frame cache's owner reloading its symbols.
    pub fn new_slice(&mut self) {
        self.names.clear();
    }

    /// Forgets symbolized user addresses (the target's symbols changed).
    pub fn forget_user(&mut self) {
        self.user_frames.clear();
    }

    /// The frames of a stack pair, root first (user, then kernel), and
    /// whether the user stack was cut short of the thread's entry point.
    pub fn frames(
        &mut self,
        user: Ips<'_>,
        kernel: Ips<'_>,
        symbols: Option<&ProcessSymbols>,
    ) -> (Vec<Frame>, bool) {
        let mut frames = Vec::new();
        let mut truncated = false;
        match user {
            Ips::Leaf(ips) => {
                for (depth, &ip) in ips.iter().enumerate().rev() {
                    frames.extend(self.user_frames(ip, depth > 0, symbols));
                }
                truncated = ips.len() >= MAX_DEPTH || frames.first().is_some_and(|f| !is_root(f));
            }
            Ips::Lost => frames.push(lost("[unknown]")),
            Ips::Unsampled => frames.push(Frame {
                function: UNSAMPLED.to_owned(),
                object: "[unknown]".to_owned(),
            }),
            Ips::None => {}
        }
        match kernel {
            Ips::Leaf(ips) => {
                for (depth, &ip) in ips.iter().enumerate().rev() {
                    frames.push(self.kernel_frame(ip, depth > 0));
                }
            }
            Ips::Lost => frames.push(lost(KERNEL_OBJECT)),
            Ips::None | Ips::Unsampled => {}
        }
        (frames, truncated)
    }

    /// The frames of a user address: its function, then the functions
    /// inlined there (outermost first) when the object's DWARF is at hand.
    /// A return address (not the leaf) is looked up one byte back, inside
    /// the call that pushed it.
    fn user_frames(
        &mut self,
        ip: u64,
        return_address: bool,
        symbols: Option<&ProcessSymbols>,
    ) -> Vec<Frame> {
        let at = if return_address {
            ip.saturating_sub(1)
        } else {
            ip
        };
        if self.user_frames.len() >= FRAME_CACHE {
            self.user_frames.clear();
        }
        self.user_frames
            .entry(at)
            .or_insert_with(|| with_inlined(user_symbol(at, symbols), at, symbols))
            .clone()
    }

    fn kernel_frame(&mut self, ip: u64, return_address: bool) -> Frame {
        let at = if return_address {
            ip.saturating_sub(1)
        } else {
            ip
        };
        if self.kernel_frames.len() >= FRAME_CACHE {
            self.kernel_frames.clear();
        }
        let ksyms = self.ksyms.as_deref();
        self.kernel_frames
            .entry(at)
            .or_insert_with(|| Frame {
                function: match ksyms.and_then(|k| k.lookup(at)) {
                    Some((name, _)) => name.to_owned(),
                    None => format!("{at:#x}"),
                },
                object: KERNEL_OBJECT.to_owned(),
            })
            .clone()
    }

    /// The class of a thread from its current name, read once per slice;
    /// "unknown" once it has exited.
    pub fn class(&mut self, tgid: u32, tid: u32) -> String {
        if self.names.len() >= NAME_CACHE {
            self.names.clear();
        }
        let name = self.names.entry(tid).or_insert_with(|| {
            std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm"))
                .map(|s| s.trim_end().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned())
        });
        thread_class(name)
    }
}

/// `frame` (the symbol table's function at `at`), followed by the functions
/// inlined into it at `at`, outermost first, from the object's DWARF. The
/// chain's outermost entry is the symbol's function itself, so it is only
/// used when it has more than one entry.
fn with_inlined(frame: Frame, at: u64, symbols: Option<&ProcessSymbols>) -> Vec<Frame> {
    let chain = symbols.and_then(|p| p.inlined(at)).unwrap_or_default();
    if chain.len() < 2 {
        return vec![frame];
    }
    let mut frames = vec![frame];
    for inlined in &chain[1..] {
        if let Some(name) = &inlined.function {
            frames.push(Frame {
                function: format!("{} (inlined)", readable(name)),
                object: frames[0].object.clone(),
            });
        }
    }
    frames
}

/// Whether a stack's root frame is where threads begin: a known entry
/// function, or an unnamed address in libc or the loader (glibc's
/// `start_thread` is not exported: without libc's debug symbols it has no
/// name). A named libc function as the root means the walk stopped inside
/// libc's code, built without frame pointers: the callers are missing.
fn is_root(f: &Frame) -> bool {
    ROOT_FUNCTIONS.contains(&f.function.as_str())
        || (ROOT_OBJECTS.iter().any(|o| f.object.starts_with(o))
            && f.function.starts_with(&format!("{}+0x", f.object)))
}

fn lost(object: &str) -> Frame {
    Frame {
        function: LOST_STACK.to_owned(),
        object: object.to_owned(),
    }
}

/// A user address as (demangled function, object file name); an address no
/// symbol covers as `object+0xoffset` (the file offset), as perf shows it.
fn user_symbol(ip: u64, symbols: Option<&ProcessSymbols>) -> Frame {
    let unknown = || Frame {
        function: format!("{ip:#x}"),
        object: "[unknown]".to_owned(),
    };
    let Some(process) = symbols else {
        return unknown();
    };
    if let Some(s) = process.symbolize(ip) {
        return Frame {
            function: readable(s.name).into_owned(),
            object: file_name(s.object),
        };
    }
    match process
        .objects
        .iter()
        .find(|o| o.mapped.contains_address(ip))
    {
        Some(o) => {
            let name = file_name(&o.mapped.path);
            let offset = o
                .mapped
                .mapping_at(ip)
                .and_then(|m| m.file_offset_of_address(ip));
            Frame {
                function: match offset {
                    Some(off) => format!("{name}+{off:#x}"),
                    None => format!("{ip:#x}"),
                },
                object: name,
            }
        }
        None => unknown(),
    }
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Ids for distinct (class, frames, truncated), up to [`MAX_DEFS`].
#[derive(Debug, Default)]
pub struct Interner {
    ids: HashMap<u64, u32>,
    /// (class, raw addresses) → id: a stack seen before is not symbolized
    /// again (the same stacks come back slice after slice; symbolizing and
    /// demangling them every time cost a busy mongod's recorder seconds of
    /// CPU per slice). Emptied when full.
    raw: HashMap<u64, u32>,
}

impl Interner {
    /// The id of a raw stack seen before (its class and both sides'
    /// addresses, or how they were lost).
    pub fn known(&self, raw: u64) -> Option<u32> {
        self.raw.get(&raw).copied()
    }

    /// Forgets the raw stacks (the addresses now mean other functions).
    pub fn forget_raw(&mut self) {
        self.raw.clear();
    }

    /// Remembers the id of a raw stack.
    pub fn remember(&mut self, raw: u64, id: u32) {
        if self.raw.len() >= RAW_CACHE {
            self.raw.clear();
        }
        self.raw.insert(raw, id);
    }

    /// The id of (class, frames, truncated); a stack seen for the first
    /// time goes to `defs`. Past [`MAX_DEFS`], the class's
    /// [`OTHER_STACKS`] stack.
    pub fn id(
        &mut self,
        class: String,
        frames: Vec<Frame>,
        truncated: bool,
        defs: &mut Vec<StackDef>,
    ) -> u32 {
        let (frames, truncated) = if self.ids.len() >= MAX_DEFS {
            (
                vec![Frame {
                    function: OTHER_STACKS.to_owned(),
                    object: "[unknown]".to_owned(),
                }],
                false,
            )
        } else {
            (frames, truncated)
        };
        // SipHash with fixed keys: the same stack gets the same hash in
        // every slice (64 bits: a collision is not a practical concern).
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&class, &frames, truncated).hash(&mut h);
        let hash = h.finish();
        if let Some(&id) = self.ids.get(&hash) {
            return id;
        }
        let id = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        self.ids.insert(hash, id);
        defs.push(StackDef {
            id,
            class,
            frames,
            truncated,
        });
        id
    }
}

/// A [`Symbolizer`] and an [`Interner`] together: what both families do to
/// each counter's pair of stacks ("seen before: its id; else name the
/// frames, let the family adjust them, intern").
#[derive(Default)]
pub struct StackNames {
    symbolizer: Symbolizer,
    interner: Interner,
}

impl StackNames {
    /// Call at each slice ([`Symbolizer::new_slice`]).
    pub fn new_slice(&mut self) {
        self.symbolizer.new_slice();
    }

    /// The target's symbols changed: addresses are looked up again.
    pub fn symbols_changed(&mut self) {
        self.symbolizer.forget_user();
        self.interner.forget_raw();
    }

    /// The id of thread `tid`'s stacks `user` and `kernel` in `target`; a
    /// stack seen for the first time is named with `symbols`, passed to
    /// `adjust` (e.g. to cut the capture's own frames) and goes to `defs`.
    pub fn id(
        &mut self,
        (target, tid): (u32, u32),
        (user, kernel): (Ips<'_>, Ips<'_>),
        symbols: Option<&ProcessSymbols>,
        adjust: impl FnOnce(&mut Vec<Frame>),
        defs: &mut Vec<StackDef>,
    ) -> u32 {
        let class = self.symbolizer.class(target, tid);
        let raw = raw_key(&class, user, kernel);
        if let Some(id) = self.interner.known(raw) {
            return id;
        }
        let (mut frames, truncated) = self.symbolizer.frames(user, kernel, symbols);
        adjust(&mut frames);
        let id = self.interner.id(class, frames, truncated, defs);
        self.interner.remember(raw, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(f: &str, o: &str) -> Frame {
        Frame {
            function: f.into(),
            object: o.into(),
        }
    }

    #[test]
    fn the_same_stack_gets_one_id_and_one_definition() {
        let mut i = Interner::default();
        let mut defs = Vec::new();
        let a = i.id("conn".into(), vec![frame("a", "x")], false, &mut defs);
        let b = i.id("conn".into(), vec![frame("b", "x")], false, &mut defs);
        let a2 = i.id("conn".into(), vec![frame("a", "x")], false, &mut defs);
        let other_class = i.id("ftdc".into(), vec![frame("a", "x")], false, &mut defs);
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_ne!(a, other_class);
        assert_eq!(defs.len(), 3);
    }

    #[test]
    fn past_the_bound_new_stacks_share_one_per_class() {
        let mut i = Interner::default();
        let mut defs = Vec::new();
        for n in 0..MAX_DEFS {
            i.id(
                "conn".into(),
                vec![frame(&n.to_string(), "x")],
                false,
                &mut defs,
            );
        }
        let x = i.id("conn".into(), vec![frame("new", "x")], false, &mut defs);
        let y = i.id("conn".into(), vec![frame("newer", "x")], true, &mut defs);
        assert_eq!(x, y);
        assert_eq!(defs.len(), MAX_DEFS + 1);
        assert_eq!(defs[MAX_DEFS].frames[0].function, OTHER_STACKS);
    }

    #[test]
    fn stacks_read_root_first_and_are_truncated_unless_they_reach_an_entry() {
        let mut s = Symbolizer {
            ksyms: None,
            user_frames: HashMap::new(),
            kernel_frames: HashMap::new(),
            names: HashMap::new(),
        };
        let (frames, truncated) = s.frames(Ips::Leaf(&[0x10, 0x20]), Ips::Leaf(&[0xff00]), None);
        assert_eq!(
            frames[0].function, "0x1f",
            "the root, a return address, one byte back"
        );
        assert_eq!(frames[1].function, "0x10", "the leaf as sampled");
        assert_eq!(frames[2].object, KERNEL_OBJECT);
        assert!(truncated, "an unknown root is not a thread's entry");
        let (frames, truncated) = s.frames(Ips::Lost, Ips::None, None);
        assert_eq!(frames[0].function, LOST_STACK);
        assert!(!truncated);
        assert!(is_root(&frame("libc.so.6+0x881f4", "libc.so.6")));
        assert!(
            !is_root(&frame("__futex_abstimed_wait_common", "libc.so.6")),
            "a named libc function: the walk stopped in libc"
        );
        assert!(is_root(&frame("_start", "mongod")));
        assert!(!is_root(&frame("mongo::run", "mongod")));
    }
}
