//! Inlined frames from DWARF: at an address of an object whose debug
//! information is there (in the object itself, or in its separate debug
//! file, [`super::debuginfo`] or [`super::debuginfod`]), the chain of
//! functions inlined into one another, outermost first, each with its
//! file:line (gimli-rs's `addr2line`, over the object's mappings).
//!
//! Cost when there is no DWARF (mongod's binary has only `.symtab`): the
//! section headers are read once per object, on its first lookup; the
//! answer "none" is kept with the object ([`super::cache::ObjectCache`]
//! keeps the object), and every later lookup is one uncontended lock.
//!
//! Memory bounds:
//!
//! - an object whose DWARF sections (uncompressed sizes, with a `dwz`
//!   supplementary file) exceed [`MAX_OBJECT_DWARF_BYTES`] (4 MiB) is not
//!   read at all: it has no inlined frames (a mongod with full DWARF has
//!   gigabytes; glibc's from libc6-dbg is about 20 MiB, and parsing it
//!   grew `mdiag record`'s resident set by 29 MiB: inlined frames are for
//!   small objects, memory stays bounded by bytes);
//! - the contexts alive in the process (each built lazily on first use and
//!   kept with its object) are charged their DWARF sections' size, and
//!   beyond [`MAX_LIVE_DWARF_BYTES`] (16 MiB) in all the least recently
//!   used are dropped (rebuilt when asked for again; the newest is kept).
//!   Uncompressed sections are read from the mapped file (page cache, the
//!   pages handed back with the object's); compressed ones
//!   (`SHF_COMPRESSED`, `.zdebug_*`) are inflated on the heap, within the
//!   same charge. `addr2line` parses units, lines and functions lazily,
//!   as addresses ask for them: what it builds stays below the sections it
//!   reads.

use std::fmt;
use std::io::Read as _;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use gimli::{EndianReader, RunTimeEndian, SectionId};
use memmap2::Mmap;
use object::{CompressionFormat, Object as _, ObjectSection as _, SectionKind};

use super::elf::{map_file, peek_build_id, release};

/// Objects whose DWARF sections are larger get no inlined frames.
pub const MAX_OBJECT_DWARF_BYTES: u64 = 4 << 20;
/// DWARF contexts alive in the process, by the sections they read: beyond,
/// the least recently used are dropped.
pub const MAX_LIVE_DWARF_BYTES: u64 = 16 << 20;

/// One function of the chain at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineFrame {
    /// The linkage name (mangled) when DWARF gives one, else its name;
    /// `None` when no function covers the address (line table only).
    pub function: Option<String>,
    /// The source file, as DWARF names it (with the compilation directory).
    pub file: Option<String>,
    /// For the innermost frame, the address's line; for the others, the
    /// line of the call that was inlined into them.
    pub line: Option<u32>,
}

/// Bytes a DWARF reader reads: a shared mapping or an inflated section.
#[derive(Clone)]
pub(super) enum Bytes {
    Map(Arc<Mmap>),
    Heap(Arc<[u8]>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Heap(h) => h,
        }
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({})", self.len())
    }
}

// SAFETY: both variants deref to bytes owned by an `Arc` (a mapping, or a
// heap slice) that never move while any clone is alive, and every clone
// derefs to the very same bytes.
unsafe impl gimli::StableDeref for Bytes {}
// SAFETY: as above; a clone is another `Arc` to the same bytes.
unsafe impl gimli::CloneStableDeref for Bytes {}

type Reader = EndianReader<RunTimeEndian, Bytes>;
type Context = addr2line::Context<Reader>;

/// An object's DWARF, as far as it was looked at.
enum State {
    /// Not looked for yet.
    Untried,
    /// None, too large or unreadable: never looked for again.
    Absent,
    /// Built; `id` names it in the [`Budget`].
    Ready { context: Box<Context>, id: u64 },
    /// Dropped by the [`Budget`]: built again when asked for.
    Dropped,
}

/// Where an object's DWARF may be, in the order tried.
pub(super) struct Sources<'a> {
    /// The object, then its separate debug file (with its path).
    pub files: Vec<(&'a Arc<Mmap>, &'a Path)>,
}

/// An object's DWARF context, built on first use (see the module's
/// documentation).
pub(super) struct DwarfSlot {
    state: Arc<Mutex<State>>,
    /// The `dwz` supplementary file mapped for the context, if any.
    sup: Mutex<Option<Arc<Mmap>>>,
}

impl fmt::Debug for DwarfSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match *lock(&self.state) {
            State::Untried => "untried",
            State::Absent => "absent",
            State::Ready { .. } => "ready",
            State::Dropped => "dropped",
        };
        f.debug_struct("DwarfSlot").field("state", &state).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DwarfSlot {
    pub(super) fn new() -> DwarfSlot {
        DwarfSlot {
            state: Arc::new(Mutex::new(State::Untried)),
            sup: Mutex::new(None),
        }
    }

    /// Whether the object was found to have no usable DWARF.
    pub(super) fn is_absent(&self) -> bool {
        matches!(*lock(&self.state), State::Absent)
    }

    /// Hands the supplementary file's pages back (see `elf::release`).
    pub(super) fn release_pages(&self) {
        if let Some(map) = &*lock(&self.sup) {
            release(map);
        }
    }

    /// The chain of functions at `vaddr`, outermost first; `None` without
    /// DWARF or when it covers no function or line at `vaddr`.
    pub(super) fn frames(&self, sources: &Sources<'_>, vaddr: u64) -> Option<Vec<InlineFrame>> {
        let (frames, admitted) = {
            let mut state = lock(&self.state);
            let mut admitted = None;
            if matches!(*state, State::Untried | State::Dropped) {
                match build(sources) {
                    Some((context, charge, sup)) => {
                        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                        *state = State::Ready { context, id };
                        *lock(&self.sup) = sup;
                        admitted = Some((id, charge));
                    }
                    None => *state = State::Absent,
                }
            }
            let State::Ready { context, id } = &*state else {
                return None;
            };
            (lookup(context, vaddr), admitted.ok_or(*id))
        };
        // Outside the slot's lock: the budget may drop other slots.
        match admitted {
            Ok((id, charge)) => {
                let victims = lock(&BUDGET).admit(id, charge, Arc::downgrade(&self.state));
                for (victim, id) in victims {
                    drop_context(&victim, id);
                }
            }
            Err(id) => lock(&BUDGET).touch(id),
        }
        frames
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static BUDGET: LazyLock<Mutex<Budget>> =
    LazyLock::new(|| Mutex::new(Budget::new(MAX_LIVE_DWARF_BYTES)));

/// Drops the context of a slot if it is still the one admitted as `id`.
fn drop_context(slot: &Weak<Mutex<State>>, id: u64) {
    let Some(slot) = slot.upgrade() else {
        return;
    };
    let mut state = lock(&slot);
    if matches!(&*state, State::Ready { id: ready, .. } if *ready == id) {
        *state = State::Dropped;
        tracing::debug!(id, "symbols: DWARF context dropped (budget)");
    }
}

/// The live contexts, least recently used first, and what they are charged.
struct Budget {
    max: u64,
    live: Vec<(u64, u64, Weak<Mutex<State>>)>,
}

impl Budget {
    fn new(max: u64) -> Budget {
        Budget {
            max,
            live: Vec::new(),
        }
    }

    fn touch(&mut self, id: u64) {
        if let Some(i) = self.live.iter().position(|(l, ..)| *l == id) {
            let entry = self.live.remove(i);
            self.live.push(entry);
        }
    }

    /// Adds a context; returns those to drop (the newest is kept).
    fn admit(
        &mut self,
        id: u64,
        charge: u64,
        slot: Weak<Mutex<State>>,
    ) -> Vec<(Weak<Mutex<State>>, u64)> {
        // Objects gone from every cache: their contexts went with them.
        self.live.retain(|(.., s)| s.strong_count() > 0);
        self.live.push((id, charge, slot));
        let mut total: u64 = self.live.iter().map(|(_, c, _)| c).sum();
        let mut victims = Vec::new();
        while self.live.len() > 1 && total > self.max {
            let (id, charge, slot) = self.live.remove(0);
            total -= charge;
            victims.push((slot, id));
        }
        victims
    }
}

/// The frames of a built context at `vaddr`, outermost first.
fn lookup(context: &Context, vaddr: u64) -> Option<Vec<InlineFrame>> {
    let mut iter = context
        .find_frames(vaddr)
        .skip_all_loads()
        .inspect_err(|e| tracing::debug!(vaddr, "symbols: DWARF lookup: {e}"))
        .ok()?;
    let mut frames = Vec::new();
    loop {
        match iter.next() {
            Ok(Some(frame)) => frames.push(InlineFrame {
                function: frame
                    .function
                    .as_ref()
                    .and_then(|f| f.raw_name().ok())
                    .map(|n| n.into_owned()),
                file: frame
                    .location
                    .as_ref()
                    .and_then(|l| l.file)
                    .map(str::to_owned),
                line: frame.location.as_ref().and_then(|l| l.line),
            }),
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(vaddr, "symbols: DWARF frames: {e}");
                break;
            }
        }
    }
    if frames.is_empty() {
        return None;
    }
    frames.reverse();
    Some(frames)
}

/// An object file's DWARF sections, located.
struct Located<'a> {
    file: object::File<'a, &'a [u8]>,
    map: &'a Arc<Mmap>,
    path: &'a Path,
    /// Sum of the DWARF sections' uncompressed sizes.
    bytes: u64,
}

/// The first of `sources` with a `.debug_info`, its sections' size read
/// from the headers.
fn locate<'a>(sources: &Sources<'a>) -> Option<Located<'a>> {
    sources.files.iter().find_map(|&(map, path)| {
        let file = object::File::parse(&map[..]).ok()?;
        let info = file.section_by_name(".debug_info")?;
        if info.kind() == SectionKind::UninitializedData || info.file_range().is_none() {
            return None;
        }
        let bytes = dwarf_bytes(&file);
        Some(Located {
            file,
            map,
            path,
            bytes,
        })
    })
}

fn dwarf_bytes<'a>(file: &object::File<'a, &'a [u8]>) -> u64 {
    let mut bytes = 0u64;
    for id in ALL_SECTIONS {
        if let Some(s) = file.section_by_name(id.name())
            && let Ok(range) = s.compressed_file_range()
        {
            bytes = bytes.saturating_add(range.uncompressed_size);
        }
    }
    bytes
}

/// The sections `gimli::Dwarf::load` asks for (DWARF 2 to 5, not split).
const ALL_SECTIONS: [SectionId; 14] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugLoc,
    SectionId::DebugLocLists,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugTypes,
    SectionId::DebugMacinfo,
];

/// Builds the context: `None` without DWARF, over the bound, or unreadable.
/// Returns the charge and the supplementary file mapped.
fn build(sources: &Sources<'_>) -> Option<(Box<Context>, u64, Option<Arc<Mmap>>)> {
    let located = locate(sources)?;
    let sup = supplementary(&located);
    let charge = located.bytes + sup.as_ref().map_or(0, |s| s.1);
    if charge > MAX_OBJECT_DWARF_BYTES {
        tracing::debug!(
            path = %located.path.display(),
            bytes = charge,
            "symbols: DWARF over {MAX_OBJECT_DWARF_BYTES} bytes: no inlined frames"
        );
        return None;
    }
    let started = std::time::Instant::now();
    let mut dwarf = load(&located.file, located.map)
        .inspect_err(|e| tracing::debug!(path = %located.path.display(), "symbols: DWARF: {e}"))
        .ok()?;
    let sup_map = match sup {
        Some((map, _)) => {
            let file = object::File::parse(&map[..]).ok()?;
            let sup_dwarf = load(&file, &map).ok()?;
            dwarf.set_sup(sup_dwarf);
            Some(map)
        }
        None => None,
    };
    let context = Context::from_dwarf(dwarf)
        .inspect_err(|e| tracing::debug!(path = %located.path.display(), "symbols: DWARF: {e}"))
        .ok()?;
    tracing::debug!(
        path = %located.path.display(),
        bytes = charge,
        ms = started.elapsed().as_millis() as u64,
        "symbols: DWARF context built"
    );
    Some((Box::new(context), charge, sup_map))
}

/// The `gimli::Dwarf` of one file, reading its mapping (inflating
/// compressed sections).
fn load<'a>(
    file: &object::File<'a, &'a [u8]>,
    map: &Arc<Mmap>,
) -> Result<gimli::Dwarf<Reader>, String> {
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let empty = || Reader::new(Bytes::Heap(Arc::from(&[][..])), endian);
    gimli::Dwarf::load(|id: SectionId| -> Result<Reader, String> {
        let Some(section) = file.section_by_name(id.name()) else {
            return Ok(empty());
        };
        if section.kind() == SectionKind::UninitializedData {
            return Ok(empty());
        }
        let range = section
            .compressed_file_range()
            .map_err(|e| format!("{}: {e}", id.name()))?;
        let start = usize::try_from(range.offset).map_err(|e| e.to_string())?;
        let size = usize::try_from(range.compressed_size).map_err(|e| e.to_string())?;
        let end = start.checked_add(size).filter(|&e| e <= map.len());
        let Some(end) = end else {
            return Err(format!("{}: out of the file", id.name()));
        };
        if range.format == CompressionFormat::None {
            return Ok(Reader::new(Bytes::Map(map.clone()), endian).range(start..end));
        }
        let bytes = inflate(range.format, &map[start..end], range.uncompressed_size)
            .map_err(|e| format!("{}: {e}", id.name()))?;
        Ok(Reader::new(Bytes::Heap(bytes.into()), endian))
    })
}

/// A compressed section's bytes, exactly `size` of them.
fn inflate(format: CompressionFormat, data: &[u8], size: u64) -> Result<Vec<u8>, String> {
    let size = usize::try_from(size).map_err(|e| e.to_string())?;
    let out = match format {
        CompressionFormat::Zlib => {
            let mut out = Vec::with_capacity(size);
            flate2::read::ZlibDecoder::new(data)
                .take(size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
        CompressionFormat::Zstandard => {
            zstd::bulk::decompress(data, size).map_err(|e| e.to_string())?
        }
        other => return Err(format!("compression {other:?}")),
    };
    if out.len() != size {
        return Err(format!("inflated to {} bytes, not {size}", out.len()));
    }
    Ok(out)
}

/// The `dwz` supplementary file `.gnu_debugaltlink` names (Debian's and
/// Fedora's debug packages), mapped, with its DWARF's size; checked by
/// build-id. Its path is absolute, or relative to the debug file.
fn supplementary(located: &Located<'_>) -> Option<(Arc<Mmap>, u64)> {
    let link = located.file.section_by_name(".gnu_debugaltlink")?;
    let bytes = link.data().ok()?;
    let nul = bytes.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&bytes[..nul]).ok()?;
    let id = &bytes[nul + 1..];
    if id.is_empty() {
        return None;
    }
    let path: PathBuf = match located.path.parent() {
        Some(dir) if Path::new(name).is_relative() => dir.join(name),
        _ => PathBuf::from(name),
    };
    let file = std::fs::File::open(&path).ok()?;
    let map = map_file(&path, &file).ok()?;
    if peek_build_id(&map).as_deref() != Some(id) {
        tracing::debug!(path = %path.display(), "symbols: dwz file of another build-id");
        return None;
    }
    let bytes = dwarf_bytes(&object::File::parse(&map[..]).ok()?);
    Some((Arc::new(map), bytes))
}

#[cfg(test)]
#[path = "dwarf_tests.rs"]
mod tests;
