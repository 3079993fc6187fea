//! Errors of symbol resolution: each names the pid or the file and what failed.

use std::path::PathBuf;

/// What went wrong while reading a target's mappings or an object file.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    /// `/proc/PID/maps` (or the process itself) could not be read.
    #[error("pid {pid}: cannot read the memory mappings (/proc/{pid}/maps): {reason}")]
    Maps { pid: u32, reason: String },
    /// An object file could not be opened or stat'ed.
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An object file could not be mapped into memory.
    #[error("cannot mmap {path}: {source}")]
    Mmap {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ELF file we can read (truncated, corrupt, other format).
    #[error("{path}: not a readable ELF file: {reason}")]
    Elf { path: PathBuf, reason: String },
    /// No object of that name is mapped executable by the process.
    #[error("pid {pid}: no executable mapping of an object named {name:?}")]
    NoSuchObject { pid: u32, name: String },
    /// The object has no function symbol of that name.
    #[error("{path}: no function symbol {symbol:?} in .symtab or .dynsym")]
    NoSuchSymbol { path: PathBuf, symbol: String },
    /// The symbol's address lies in no PT_LOAD segment with file contents.
    #[error("{path}: address {vaddr:#x} of {symbol:?} is in no file-backed PT_LOAD segment")]
    NotInSegment {
        path: PathBuf,
        symbol: String,
        vaddr: u64,
    },
}
