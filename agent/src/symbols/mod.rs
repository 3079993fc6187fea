//! Symbols of every object a target process maps: the foundation of the
//! allocator, rseq and WiredTiger probes.
//!
//! - [`maps`]: `/proc/PID/maps` grouped per object file, main executable first;
//! - [`elf`]: one object over mmap: function index, build-id, segments, type;
//! - [`debuginfo`]: a stripped object's separate debug file (gdb's search);
//! - [`debuginfod`]: that file from debuginfod servers, when configured;
//! - [`dwarf`]: inlined frames (function, file:line) where DWARF is there;
//! - [`cache`]: parsed objects kept per build-id (LRU, hit counter);
//! - [`address`]: st_value ↔ uprobe file offset ↔ runtime address;
//! - [`process`]: a process's loaded objects, resolve and symbolize;
//! - [`program`]: the objects a program will map at start, before it runs;
//! - [`names`], [`allocator`], [`wiredtiger`], [`rseq`]: what the code is;
//! - [`detected`]: those detectors' answers, once per set of objects;
//! - [`demangle`]: C++ and Rust names as people read them, for reports;
//! - [`summary`]: [`TargetCode`], the serializable account for the recording.
//!
//! ```no_run
//! use mdiag::symbols::{ObjectCache, ProcessSymbols, TargetCode};
//! let process = ProcessSymbols::load(1234, ObjectCache::global())?;
//! let malloc = process.require("libc.so.6")?.resolve("malloc")?;
//! // aya 0.16: uprobe.attach([malloc.uprobe_location()], &malloc.attach_path, scope)
//! let code = TargetCode::from_process(&process);
//! println!("{:?}", code.allocator.kind);
//! # Ok::<(), mdiag::symbols::SymbolError>(())
//! ```

pub mod address;
pub mod allocator;
pub mod cache;
pub mod debuginfo;
pub mod debuginfod;
pub mod demangle;
pub mod detected;
pub mod dwarf;
pub mod elf;
pub mod error;
mod index;
pub mod maps;
pub mod names;
pub mod process;
pub mod program;
pub mod rseq;
pub mod summary;
mod tables;
pub mod wiredtiger;

#[cfg(test)]
mod tests;

pub use allocator::{AllocatorKind, AllocatorReport, EntryRole, classify_allocator};
pub use cache::{CacheStats, ObjectCache};
pub use dwarf::InlineFrame;
pub use elf::{ElfObject, ElfType, Function};
pub use error::SymbolError;
pub use maps::{MappedObject, Mapping, Maps};
pub use names::ObjectNames;
pub use process::{LoadedObject, ProcessSymbols, ResolvedSymbol, Symbolized};
pub use rseq::{RseqSymbols, find_rseq_symbols};
pub use summary::TargetCode;
pub use wiredtiger::{WiredTigerReport, detect_wiredtiger};
