//! A `diagnostic.data` directory: mongod writes `metrics.<UTC time>-<n>`
//! archive files (names sort in time order) and keeps the chunk it is filling
//! in `metrics.interim`, which is therefore the newest data.
//! `metrics.interim.temp` is a half-written interim file and is skipped.
//!
//! [`FtdcDir`] reads the files one after the other, one document at a time,
//! so a 200 MB directory never has more than one chunk decoded in memory.

use std::path::{Path, PathBuf};

use super::FtdcError;
use super::chunk::Chunk;
use super::file::{FtdcDoc, FtdcFile};

const INTERIM: &str = "metrics.interim";

/// The FTDC files of `path` in time order: `path` itself if it is a file,
/// else its `metrics.*` files (archives sorted by name, `metrics.interim` last).
pub fn list_files(path: &Path) -> Result<Vec<PathBuf>, FtdcError> {
    let io = |source| FtdcError::Io {
        file: path.to_owned(),
        source,
    };
    if !path.metadata().map_err(io)?.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut archives = Vec::new();
    let mut interim = None;
    for entry in std::fs::read_dir(path).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("metrics.") || name == "metrics.interim.temp" {
            continue;
        }
        if !entry.path().metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        if name == INTERIM {
            interim = Some(entry.path());
        } else {
            archives.push(entry.path());
        }
    }
    archives.sort();
    archives.extend(interim);
    if archives.is_empty() {
        return Err(FtdcError::NoFiles {
            dir: path.to_owned(),
        });
    }
    Ok(archives)
}

/// A document of a directory, with the index (in [`FtdcDir::files`]) of the
/// file it came from.
#[derive(Debug, Clone)]
pub struct DirItem {
    pub file: usize,
    pub doc: FtdcDoc,
}

/// Reads every document of a directory (or a single file) in time order.
/// A damaged document is returned as an error and iterating goes on with the
/// next document of the same file; an error that ends its file
/// ([`FtdcError::ends_file`]) is followed by the next file. So a caller may
/// stop at the first error or skip what is damaged and read the rest.
pub struct FtdcDir {
    files: Vec<PathBuf>,
    next_file: usize,
    current: Option<(usize, FtdcFile)>,
}

impl FtdcDir {
    /// Lists the files of `path` (a directory or one file); opens none yet.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FtdcError> {
        Ok(Self {
            files: list_files(path.as_ref())?,
            next_file: 0,
            current: None,
        })
    }

    /// The files, in reading order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Total size of the files in bytes (files that vanished count 0).
    pub fn total_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// Stops reading the current file; the next item comes from the next one.
    pub fn skip_file(&mut self) {
        self.current = None;
    }

    /// Hands a finished chunk back so its buffer is reused.
    pub fn recycle(&mut self, chunk: Chunk) {
        if let Some((_, f)) = &mut self.current {
            f.recycle(chunk);
        }
    }
}

impl Iterator for FtdcDir {
    type Item = Result<DirItem, FtdcError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((index, file)) = &mut self.current {
                match file.next_doc() {
                    Some(Ok(doc)) => return Some(Ok(DirItem { file: *index, doc })),
                    Some(Err(e)) => {
                        if file.is_finished() {
                            self.current = None;
                        }
                        return Some(Err(e));
                    }
                    None => self.current = None,
                }
            }
            let index = self.next_file;
            let path = self.files.get(index)?;
            self.next_file += 1;
            match FtdcFile::open(path) {
                Ok(f) => self.current = Some((index, f)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
