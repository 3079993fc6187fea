//! A target's file-backed mappings from `/proc/PID/maps`, grouped per object
//! file, the main executable first.
//!
//! Only objects with at least one executable mapping are kept (code we can
//! probe or symbolize), but every private file-backed mapping of such an
//! object is recorded (read-only, data, RELRO), so data symbols such as
//! glibc's `__rseq_size` can be placed too. Shared mappings (`r--s`) are left
//! out: the dynamic loader never makes them.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use procfs::process::{MMPermissions, MMapPath, MemoryMap, Process};

use super::error::SymbolError;

/// The suffix the kernel appends to the path of an unlinked file.
const DELETED: &str = " (deleted)";

/// Permissions of one mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    pub shared: bool,
}

impl Perms {
    fn from_procfs(p: MMPermissions) -> Self {
        Perms {
            read: p.contains(MMPermissions::READ),
            write: p.contains(MMPermissions::WRITE),
            exec: p.contains(MMPermissions::EXECUTE),
            shared: p.contains(MMPermissions::SHARED),
        }
    }
}

impl std::fmt::Display for Perms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flag = |on: bool, c: char| if on { c } else { '-' };
        write!(
            f,
            "{}{}{}{}",
            flag(self.read, 'r'),
            flag(self.write, 'w'),
            flag(self.exec, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }
}

/// One mapping: `[start, end)` in the process shows the file from `offset` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub perms: Perms,
}

impl Mapping {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// True for an empty range (never produced by the kernel).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the runtime address `addr` lies in this mapping.
    pub fn contains_address(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    /// Whether the file offset `off` is shown by this mapping.
    pub fn contains_file_offset(&self, off: u64) -> bool {
        off >= self.offset && off - self.offset < self.len()
    }

    /// The runtime address of file offset `off`:
    /// `start + (off - offset)`, when this mapping shows it.
    pub fn address_of_file_offset(&self, off: u64) -> Option<u64> {
        self.contains_file_offset(off)
            .then(|| self.start + (off - self.offset))
    }

    /// The file offset shown at runtime address `addr`, when it lies here.
    pub fn file_offset_of_address(&self, addr: u64) -> Option<u64> {
        self.contains_address(addr)
            .then(|| self.offset + (addr - self.start))
    }

    /// The entry name of this mapping in `/proc/PID/map_files/`.
    pub fn map_files_name(&self) -> String {
        format!("{:x}-{:x}", self.start, self.end)
    }
}

/// One object file mapped by the target, with all its file-backed mappings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedObject {
    /// Path as the target sees it (in its mount namespace), without " (deleted)".
    pub path: PathBuf,
    /// The file was unlinked (or replaced) after it was mapped.
    pub deleted: bool,
    /// Device (major, minor) as shown in /proc/PID/maps.
    pub dev: (u32, u32),
    pub inode: u64,
    /// This is the process's main executable (/proc/PID/exe).
    pub is_main: bool,
    /// Mappings in address order.
    pub mappings: Vec<Mapping>,
}

impl MappedObject {
    /// The last path component, e.g. `libc.so.6`.
    pub fn file_name(&self) -> &str {
        self.path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }

    /// The path to open from this (possibly other) mount namespace:
    /// `/proc/PID/root/<path>`, which also works for containers.
    pub fn root_path(&self, pid: u32) -> PathBuf {
        let rel = self.path.strip_prefix("/").unwrap_or(&self.path);
        PathBuf::from(format!("/proc/{pid}/root")).join(rel)
    }

    /// `/proc/PID/map_files/<start>-<end>` of the first mapping: opens the very
    /// file that is mapped even when it was deleted or replaced.
    pub fn map_files_path(&self, pid: u32) -> Option<PathBuf> {
        self.mappings
            .first()
            .map(|m| PathBuf::from(format!("/proc/{pid}/map_files/{}", m.map_files_name())))
    }

    /// Executable mappings only.
    pub fn exec_mappings(&self) -> impl Iterator<Item = &Mapping> {
        self.mappings.iter().filter(|m| m.perms.exec)
    }

    /// The mapping that contains the runtime address `addr`.
    pub fn mapping_at(&self, addr: u64) -> Option<&Mapping> {
        self.mappings.iter().find(|m| m.contains_address(addr))
    }

    /// Whether any mapping of this object contains `addr`.
    pub fn contains_address(&self, addr: u64) -> bool {
        self.mapping_at(addr).is_some()
    }
}

/// The file-backed executable objects mapped by a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maps {
    pub pid: u32,
    /// Main executable first (when found), then shared objects in address order.
    pub objects: Vec<MappedObject>,
}

impl Maps {
    /// Reads `/proc/PID/maps` and `/proc/PID/exe`.
    pub fn of(pid: u32) -> Result<Maps, SymbolError> {
        let maps_err = |e: procfs::ProcError| SymbolError::Maps {
            pid,
            reason: e.to_string(),
        };
        let process = Process::new(pid as i32).map_err(maps_err)?;
        let entries = process.maps().map_err(maps_err)?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let exe_inode = std::fs::metadata(format!("/proc/{pid}/exe"))
            .ok()
            .map(|m| m.ino());
        Ok(Self::from_entries(pid, exe.as_deref(), exe_inode, entries))
    }

    /// Groups parsed maps entries. `exe` is the /proc/PID/exe link target (it
    /// may end in " (deleted)"); `exe_inode` its inode, used when no path matches.
    pub fn from_entries(
        pid: u32,
        exe: Option<&Path>,
        exe_inode: Option<u64>,
        entries: impl IntoIterator<Item = MemoryMap>,
    ) -> Maps {
        let mut objects: Vec<MappedObject> = Vec::new();
        for entry in entries {
            let MMapPath::Path(raw) = &entry.pathname else {
                continue;
            };
            // Shared mappings are never the loader's (it maps privately):
            // they are files the process mmaps itself, such as this module's
            // own read-only views of the objects when the target is us.
            if entry.inode == 0 || entry.perms.contains(MMPermissions::SHARED) {
                continue;
            }
            let (path, deleted) = strip_deleted(raw);
            let dev = (entry.dev.0 as u32, entry.dev.1 as u32);
            let mapping = Mapping {
                start: entry.address.0,
                end: entry.address.1,
                offset: entry.offset,
                perms: Perms::from_procfs(entry.perms),
            };
            match objects
                .iter_mut()
                .find(|o| o.inode == entry.inode && o.dev == dev && o.path == path)
            {
                Some(object) => object.mappings.push(mapping),
                None => objects.push(MappedObject {
                    path,
                    deleted,
                    dev,
                    inode: entry.inode,
                    is_main: false,
                    mappings: vec![mapping],
                }),
            }
        }
        objects.retain(|o| o.mappings.iter().any(|m| m.perms.exec));
        for o in &mut objects {
            o.mappings.sort_by_key(|m| m.start);
        }

        let exe_path = exe.map(|p| strip_deleted(p).0);
        let main = exe_path
            .as_ref()
            .and_then(|p| objects.iter().position(|o| &o.path == p))
            .or_else(|| exe_inode.and_then(|ino| objects.iter().position(|o| o.inode == ino)));
        if let Some(i) = main {
            let mut main = objects.remove(i);
            main.is_main = true;
            objects.insert(0, main);
        }
        Maps { pid, objects }
    }

    /// The main executable, when it is file-backed and executable.
    pub fn main(&self) -> Option<&MappedObject> {
        self.objects.first().filter(|o| o.is_main)
    }

    /// The first object whose file name is `name` (e.g. "libc.so.6").
    pub fn by_file_name(&self, name: &str) -> Option<&MappedObject> {
        self.objects.iter().find(|o| o.file_name() == name)
    }

    /// The object and mapping containing the runtime address `addr`.
    pub fn at(&self, addr: u64) -> Option<(&MappedObject, &Mapping)> {
        self.objects
            .iter()
            .find_map(|o| o.mapping_at(addr).map(|m| (o, m)))
    }
}

/// Splits the kernel's " (deleted)" suffix off a mapped path.
fn strip_deleted(raw: &Path) -> (PathBuf, bool) {
    match raw.to_str().and_then(|s| s.strip_suffix(DELETED)) {
        Some(stripped) => (PathBuf::from(stripped), true),
        None => (raw.to_path_buf(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(line: &str) -> MemoryMap {
        // procfs parses the same text format the kernel writes.
        use procfs::FromBufRead as _;
        let maps = procfs::process::MemoryMaps::from_buf_read(line.as_bytes()).unwrap();
        maps.into_iter().next().unwrap()
    }

    #[test]
    fn groups_per_object_keeps_exec_objects_and_puts_main_first() {
        let lines = [
            "7f0000000000-7f0000001000 r--p 00000000 08:01 100 /usr/lib/libfoo.so",
            "7f0000001000-7f0000003000 r-xp 00001000 08:01 100 /usr/lib/libfoo.so",
            "7f0000003000-7f0000004000 rw-p 00003000 08:01 100 /usr/lib/libfoo.so",
            "7f0000100000-7f0000200000 r--s 00000000 08:01 100 /usr/lib/libfoo.so",
            "7f1000000000-7f1000001000 r--p 00000000 08:01 200 /usr/share/data.bin",
            "7f2000000000-7f2000001000 rw-p 00000000 00:00 0 ",
            "555500000000-555500001000 r--p 00000000 08:01 300 /usr/bin/mongod (deleted)",
            "555500001000-555500009000 r-xp 00001000 08:01 300 /usr/bin/mongod (deleted)",
        ];
        let maps = Maps::from_entries(
            42,
            Some(Path::new("/usr/bin/mongod (deleted)")),
            None,
            lines.iter().map(|l| entry(l)),
        );
        assert_eq!(maps.objects.len(), 2, "data.bin has no exec mapping");
        let main = maps.main().unwrap();
        assert_eq!(main.path, Path::new("/usr/bin/mongod"));
        assert!(main.deleted);
        assert_eq!(main.mappings.len(), 2);
        assert_eq!(
            main.map_files_path(42).unwrap(),
            Path::new("/proc/42/map_files/555500000000-555500001000")
        );
        let foo = maps.by_file_name("libfoo.so").unwrap();
        assert!(!foo.is_main && !foo.deleted);
        assert_eq!(foo.mappings.len(), 3);
        assert_eq!(foo.dev, (8, 1));
        assert_eq!(
            foo.root_path(42),
            Path::new("/proc/42/root/usr/lib/libfoo.so")
        );
        assert_eq!(foo.exec_mappings().count(), 1);
        let (o, m) = maps.at(0x7f0000002abc).unwrap();
        assert_eq!(o.file_name(), "libfoo.so");
        assert_eq!(m.file_offset_of_address(0x7f0000002abc), Some(0x2abc));
        assert_eq!(m.address_of_file_offset(0x2abc), Some(0x7f0000002abc));
        assert_eq!(m.address_of_file_offset(0x3000), None);
        assert_eq!(m.perms.to_string(), "r-xp");
    }

    #[test]
    fn main_found_by_inode_when_paths_differ() {
        let lines = ["555500001000-555500009000 r-xp 00001000 08:01 300 /old/name"];
        let maps = Maps::from_entries(1, Some(Path::new("/new/name")), Some(300), lines.map(entry));
        assert!(
            maps.main()
                .is_some_and(|m| m.path == Path::new("/old/name"))
        );
    }

    #[test]
    fn own_process_main_first_and_libc_found() {
        if crate::emulation::skip_under_emulation(
            "own_process_main_first_and_libc_found",
            "/proc/self/maps under qemu-user are the emulator's mappings",
        ) {
            return;
        }
        let maps = Maps::of(std::process::id()).unwrap();
        let main = maps.main().expect("main executable mapped");
        assert!(main.is_main);
        assert_eq!(
            main.path,
            std::env::current_exe().unwrap(),
            "first object is the test binary"
        );
        assert!(maps.objects[1..].iter().all(|o| !o.is_main));
        let libc = maps.by_file_name("libc.so.6").expect("libc.so.6 mapped");
        assert!(libc.exec_mappings().count() >= 1);
        assert!(libc.mappings.len() >= 3, "text, rodata and data: {libc:?}");
        // Our own code (this function) lies in the main executable's mappings.
        let here = own_process_main_first_and_libc_found as *const () as u64;
        assert!(main.contains_address(here));
        assert!(matches!(maps.at(here), Some((o, m)) if o.is_main && m.perms.exec));
    }

    #[test]
    fn missing_process_is_an_error_naming_the_pid() {
        let err = Maps::of(u32::MAX - 7).unwrap_err();
        assert!(
            err.to_string().contains(&format!("pid {}", u32::MAX - 7)),
            "{err}"
        );
    }
}
