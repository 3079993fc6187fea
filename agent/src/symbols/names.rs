//! The input of the detectors (allocator, WiredTiger): each object's path and
//! function names, in search order. Built from a process, or by hand in tests.

use super::process::ProcessSymbols;

/// One object's function names, as the detectors see them.
#[derive(Debug, Clone)]
pub struct ObjectNames<'a> {
    /// Path as the target sees it.
    pub path: &'a str,
    pub is_main: bool,
    /// Function names, mangled as in the symbol tables (demangled input is
    /// accepted too by the patterns that document it).
    pub names: Vec<&'a str>,
}

impl<'a> ObjectNames<'a> {
    pub fn new(path: &'a str, is_main: bool, names: impl IntoIterator<Item = &'a str>) -> Self {
        ObjectNames {
            path,
            is_main,
            names: names.into_iter().collect(),
        }
    }

    /// The last path component.
    pub fn file_name(&self) -> &'a str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    /// Whether a function is named exactly `name`.
    pub fn has(&self, name: &str) -> bool {
        self.names.contains(&name)
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
                names: o.elf.function_names().collect(),
            })
            .collect()
    }
}
