//! Separate debug files: a stripped object's `.symtab`, kept elsewhere, as
//! gdb, perf and the OpenTelemetry eBPF profiler find it (gdb's manual,
//! "Debugging Information in Separate Files"). For an object
//! `/usr/lib/x86_64-linux-gnu/libc.so.6` with build-id `abcdef…` and a
//! `.gnu_debuglink` naming `libc.debug`, in this order, under each global
//! debug directory (`/usr/lib/debug` by default):
//!
//! 1. `/usr/lib/debug/.build-id/ab/cdef….debug` (its build-id must match);
//! 2. `/usr/lib/x86_64-linux-gnu/libc.debug`;
//! 3. `/usr/lib/x86_64-linux-gnu/.debug/libc.debug`;
//! 4. `/usr/lib/debug/usr/lib/x86_64-linux-gnu/libc.debug`;
//!
//! (2 to 4: the CRC-32 the debug link holds must be the file's). Each path
//! is tried under the target's root (`/proc/PID/root`, its mount namespace)
//! first, then on the host. Local files only: [`super::debuginfod`] asks
//! servers, when configured, for what is not found here.
//!
//! The file found is mapped, never read into memory (libc6-dbg's is 5 MB of
//! symbols, a mongod's can be gigabytes of DWARF): only its `.symtab` is
//! indexed, with the object's own symbols ([`super::elf::ElfObject`]).

use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;
use object::read::elf::{FileHeader, SectionHeader as _};
use object::{Endian as _, Endianness, FileKind, elf};

use super::elf::{hex, map_file, peek_build_id};

/// The global debug directory of Debian, Ubuntu, Fedora and RHEL (gdb's
/// default `debug-file-directory`).
pub const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// The `.gnu_debuglink` of an object: the debug file's name (no directory)
/// and the CRC-32 of its whole contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugLink {
    pub name: String,
    pub crc: u32,
}

/// A separate debug file found for an object, mapped.
#[derive(Debug)]
pub struct DebugFile {
    /// The path it was read from (under the target's root, or the host's).
    pub path: PathBuf,
    pub(super) map: Arc<Mmap>,
}

/// Where an object is, for the search of its debug file.
#[derive(Debug, Clone)]
pub struct Lookup<'a> {
    /// The object's path as the target sees it (its directory is searched).
    pub object: &'a Path,
    /// The target's root directory (`/proc/PID/root`), searched before the
    /// host's; `None`: the host's only.
    pub root: Option<PathBuf>,
    /// Device and inode of the object file: never its own debug file.
    pub file: (u64, u64),
}

/// What a candidate must match.
enum Check<'a> {
    BuildId(&'a [u8]),
    Crc(u32),
}

/// The `.gnu_debuglink` of ELF bytes, when present and well formed (a bare
/// file name, NUL, padding to 4 bytes, the CRC-32 in the file's byte order).
pub fn peek_debug_link(data: &[u8]) -> Option<DebugLink> {
    match FileKind::parse(data).ok()? {
        FileKind::Elf32 => debug_link::<elf::FileHeader32<Endianness>>(data),
        FileKind::Elf64 => debug_link::<elf::FileHeader64<Endianness>>(data),
        _ => None,
    }
}

fn debug_link<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Option<DebugLink> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let (_, section) = sections.section_by_name(endian, b".gnu_debuglink")?;
    let bytes = section.data(endian, data).ok()?;
    let nul = bytes.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&bytes[..nul]).ok()?;
    let at = (nul + 1).next_multiple_of(4);
    let crc: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    // A bare file name: nothing that leaves the directories searched.
    let mut parts = Path::new(name).components();
    if !matches!(
        (parts.next(), parts.next()),
        (Some(Component::Normal(_)), None)
    ) {
        return None;
    }
    Some(DebugLink {
        name: name.to_string(),
        crc: endian.read_u32(crc),
    })
}

/// `path` (absolute) as seen under `root`, or on the host.
fn under(root: Option<&Path>, path: &Path) -> PathBuf {
    match root {
        Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_path_buf(),
    }
}

/// The candidates in gdb's order, as absolute paths in the target's view.
fn candidates<'a>(
    dirs: &[PathBuf],
    object: &Path,
    build_id: Option<&'a [u8]>,
    link: Option<&DebugLink>,
) -> Vec<(PathBuf, Check<'a>)> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let (first, rest) = id.split_at(1);
        for dir in dirs {
            let file = format!("{}/{}.debug", hex(first), hex(rest));
            out.push((dir.join(".build-id").join(file), Check::BuildId(id)));
        }
    }
    let Some(link) = link else {
        return out;
    };
    let Some(object_dir) = object.parent().filter(|d| d.is_absolute()) else {
        return out;
    };
    out.push((object_dir.join(&link.name), Check::Crc(link.crc)));
    out.push((
        object_dir.join(".debug").join(&link.name),
        Check::Crc(link.crc),
    ));
    for dir in dirs {
        let relative = object_dir.strip_prefix("/").unwrap_or(object_dir);
        out.push((dir.join(relative).join(&link.name), Check::Crc(link.crc)));
    }
    out
}

/// The roots to search: the target's, then the host's unless it is the same
/// directory (the target shares our mount namespace).
fn roots(root: Option<&Path>) -> Vec<Option<&Path>> {
    let Some(root) = root else {
        return vec![None];
    };
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    match (id(root), id(Path::new("/"))) {
        (Some(a), Some(b)) if a == b => vec![None],
        _ => vec![Some(root), None],
    }
}

/// The CRC-32 of a whole file, read in chunks (through the page cache, not
/// resident in mdiag).
fn file_crc(file: &mut File) -> std::io::Result<u32> {
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(hasher.finalize()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Opens and checks one candidate; `None` when absent, unreadable, the
/// object itself, or not matching.
fn try_candidate(path: &Path, check: &Check<'_>, object_file: (u64, u64)) -> Option<DebugFile> {
    let mut file = File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || (meta.dev(), meta.ino()) == object_file {
        return None;
    }
    if let Check::Crc(crc) = check {
        let actual = file_crc(&mut file)
            .inspect_err(|e| tracing::debug!(path = %path.display(), "symbols: {e}"))
            .ok()?;
        if actual != *crc {
            tracing::debug!(
                path = %path.display(),
                "symbols: debug link CRC {actual:#010x}, expected {crc:#010x}: ignored"
            );
            return None;
        }
    }
    let map = map_file(path, &file).ok()?;
    if let Check::BuildId(id) = check
        && peek_build_id(&map).as_deref() != Some(*id)
    {
        tracing::debug!(path = %path.display(), "symbols: other build-id: ignored");
        return None;
    }
    Some(DebugFile {
        path: path.to_path_buf(),
        map: Arc::new(map),
    })
}

/// The separate debug file of an object, searched in gdb's order (see the
/// module's documentation) under the global debug directories `dirs`.
pub fn find_debug_file(
    dirs: &[PathBuf],
    lookup: &Lookup<'_>,
    build_id: Option<&[u8]>,
    link: Option<&DebugLink>,
) -> Option<DebugFile> {
    let roots = roots(lookup.root.as_deref());
    for (path, check) in candidates(dirs, lookup.object, build_id, link) {
        for &root in &roots {
            if let Some(found) = try_candidate(&under(root, &path), &check, lookup.file) {
                tracing::debug!(
                    object = %lookup.object.display(),
                    debug = %found.path.display(),
                    "symbols: separate debug file"
                );
                return Some(found);
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "debuginfo_tests.rs"]
mod tests;
