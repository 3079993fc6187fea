//! The input of the detectors (allocator, WiredTiger): each object's path and
//! function names, in search order. Built from a process, or by hand in tests.
//!
//! A process's names are read from its objects as the detectors go, not
//! collected: a walk over all of an object's names releases the pages of
//! its string tables every few thousand names (mongod 6.0's are 48 MB), and
//! [`ObjectNames::has`] asks the object's name index instead of comparing
//! every name.

use super::elf::ElfObject;
use super::process::ProcessSymbols;

/// Where an object's names come from.
#[derive(Debug, Clone)]
pub(super) enum Names<'a> {
    /// Given by hand.
    List(Vec<&'a str>),
    /// Read from the object's index when asked.
    Object(&'a ElfObject),
}

/// One object's function names, as the detectors see them.
#[derive(Debug, Clone)]
pub struct ObjectNames<'a> {
    /// Path as the target sees it.
    pub path: &'a str,
    pub is_main: bool,
    /// Function names, mangled as in the symbol tables (demangled input is
    /// accepted too by the patterns that document it).
    pub(super) source: Names<'a>,
}

impl<'a> ObjectNames<'a> {
    pub fn new(path: &'a str, is_main: bool, names: impl IntoIterator<Item = &'a str>) -> Self {
        ObjectNames {
            path,
            is_main,
            source: Names::List(names.into_iter().collect()),
        }
    }

    /// Every function name (one per distinct symbol).
    pub fn names(&self) -> Box<dyn Iterator<Item = &'a str> + '_> {
        match &self.source {
            Names::List(v) => Box::new(v.iter().copied()),
            Names::Object(o) => Box::new(o.function_names()),
        }
    }

    /// The last path component.
    pub fn file_name(&self) -> &'a str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    /// Whether a function is named exactly `name`.
    pub fn has(&self, name: &str) -> bool {
        match &self.source {
            Names::List(v) => v.contains(&name),
            Names::Object(o) => o.function(name).is_some(),
        }
    }

    /// Whether this is glibc's C library (`libc.so.6`, `libc-2.31.so`).
    pub fn is_libc(&self) -> bool {
        let f = self.file_name();
        f.starts_with("libc.so") || (f.starts_with("libc-") && f.ends_with(".so"))
    }

    /// Every object of a process, main executable first, paths lossily UTF-8.
    pub fn of_process(process: &'a ProcessSymbols) -> Vec<ObjectNames<'a>> {
        process
            .objects
            .iter()
            .map(|o| ObjectNames {
                path: o.mapped.path.to_str().unwrap_or("<non-UTF-8 path>"),
                is_main: o.mapped.is_main,
                source: Names::Object(&o.elf),
            })
            .collect()
    }
}
