//! FTDC: MongoDB's "full-time diagnostic data capture", the files of a
//! `diagnostic.data` directory. mongod samples serverStatus, replSetGetStatus,
//! system metrics and more every second and stores them compactly; this
//! module reads them back so mdiag can put a host's own history beside its
//! recordings (and `mdiag export` can dump it as JSON lines).
//!
//! Layers, one file each:
//! - [`file`]: a file is a sequence of BSON documents `{_id: Date, type, ...}`
//!   (0 = metadata, 1 = metric chunk, 2 = periodic metadata); read one at a
//!   time, each with its byte offset, so memory stays at one chunk.
//! - [`chunk`]: a metric chunk is zlib-compressed: reference document, metric
//!   and sample counts, then the delta stream.
//! - [`varint`]: the delta stream (varints, zero runs, prefix sums): the hot path.
//! - [`metrics`]: which fields of the reference document are metrics, their
//!   dotted paths and int64 values.
//! - [`dir`]: a `diagnostic.data` directory: `metrics.*` files in time order,
//!   `metrics.interim` last.
//!
//! Hostile or damaged input gives an [`FtdcError`] naming the file, the byte
//! offset of the document and the step that failed; never a panic, and no
//! allocation larger than the input justifies. A damaged document whose
//! length is sound costs only that document: reading goes on with the next
//! ([`FtdcError::ends_file`] tells which errors end their file). A zero
//! length is mongod's end-of-file mark, not damage.

pub mod chunk;
pub mod dir;
pub mod file;
pub mod metrics;
pub mod varint;

use std::path::{Path, PathBuf};

pub use chunk::{Chunk, ChunkDecoder, ChunkError, Column};
pub use dir::{DirItem, FtdcDir, list_files};
pub use file::{FtdcDoc, FtdcFile};
pub use metrics::{MetricKind, MetricPaths};

/// An error reading FTDC data: which file, where, and what step failed.
#[derive(Debug, thiserror::Error)]
pub enum FtdcError {
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: document at byte {offset}: {kind}", file.display())]
    Corrupt {
        file: PathBuf,
        /// Byte offset of the BSON document in the file.
        offset: u64,
        kind: Corrupt,
    },
    #[error("{}: no FTDC files (metrics.*) in this directory", dir.display())]
    NoFiles { dir: PathBuf },
    /// Writing decoded data out failed (e.g. a closed pipe during `export`).
    #[error("writing the output: {source}")]
    Output {
        #[source]
        source: std::io::Error,
    },
}

impl FtdcError {
    /// The file (or directory) the error is about (none for output errors).
    pub fn file(&self) -> Option<&Path> {
        match self {
            FtdcError::Io { file, .. } | FtdcError::Corrupt { file, .. } => Some(file),
            FtdcError::NoFiles { dir } => Some(dir),
            FtdcError::Output { .. } => None,
        }
    }

    /// Byte offset of the document that failed, for corrupt input.
    pub fn offset(&self) -> Option<u64> {
        match self {
            FtdcError::Corrupt { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// Whether the error ends the reading of its file. Only a broken frame
    /// does (a length that is invalid or runs past the end of the file, an
    /// I/O error): the next document cannot be found. A document whose
    /// content is damaged (a corrupt chunk, malformed BSON, not an FTDC
    /// document) costs only itself; reading goes on with the next one.
    pub fn ends_file(&self) -> bool {
        match self {
            FtdcError::Corrupt { kind, .. } => {
                matches!(kind, Corrupt::DocLength { .. } | Corrupt::Truncated { .. })
            }
            FtdcError::Io { .. } | FtdcError::NoFiles { .. } | FtdcError::Output { .. } => true,
        }
    }

    /// What reading skipped because of this error, for messages.
    pub fn skipped(&self) -> &'static str {
        if !self.ends_file() {
            "this document only"
        } else if self.offset() == Some(0) {
            "the whole file"
        } else {
            "the rest of the file"
        }
    }
}

/// The step that found the input corrupt, truncated or not FTDC.
#[derive(Debug, thiserror::Error)]
pub enum Corrupt {
    #[error("BSON document length field {declared} is invalid (minimum 5, maximum {max})")]
    DocLength { declared: i32, max: usize },
    #[error("BSON document truncated: declares {declared} bytes, the file has {available} left")]
    Truncated { declared: usize, available: u64 },
    #[error("malformed BSON document: {0}")]
    Bson(String),
    #[error("not an FTDC document: field {field:?} {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
    #[error("metric chunk: {0}")]
    Chunk(#[from] ChunkError),
    #[error("BSON document nests deeper than {0} levels")]
    TooDeep(usize),
}
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_damage;
#[cfg(test)]
mod tests_files;
