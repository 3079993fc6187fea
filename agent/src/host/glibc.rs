//! Which glibc a process runs.
//!
//! The library is the `libc.so.6` (or, before glibc 2.34, `libc-X.Y.so`)
//! mapped in /proc/PID/maps. Its version comes from the file name when that
//! carries one, else from the banner every glibc keeps in `.rodata` and
//! prints when run: "GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable
//! release version 2.36." The `GLIBC_2.x` symbol versions are not used: a
//! release that adds no symbol defines no version of its own.
//!
//! The mapped file is opened through /proc/PID/map_files (exactly the mapped
//! file, even deleted or in another mount namespace; needs privileges), else
//! through /proc/PID/root and then by its plain path, each only when its
//! inode is the mapped one.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use object::{Object, ObjectSection};
use procfs::process::{MMapPath, MemoryMaps};

use super::under;

/// Larger files are not read (glibc's libc.so.6 is about 2 MiB).
const MAX_LIBC_BYTES: u64 = 64 << 20;

/// A glibc mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MappedLibc {
    /// As /proc/PID/maps names it (" (deleted)" removed).
    pub path: PathBuf,
    pub start: u64,
    pub end: u64,
    pub inode: u64,
}

/// The first glibc mapping in `maps`.
pub(super) fn find_libc(maps: &MemoryMaps) -> Option<MappedLibc> {
    maps.0.iter().find_map(|m| {
        let MMapPath::Path(p) = &m.pathname else {
            return None;
        };
        let text = p.to_str()?;
        let path = PathBuf::from(text.strip_suffix(" (deleted)").unwrap_or(text));
        is_glibc_name(path.file_name()?.to_str()?).then_some(MappedLibc {
            path,
            start: m.address.0,
            end: m.address.1,
            inode: m.inode,
        })
    })
}

/// Whether a mapping is a glibc dynamic loader (ld-linux-x86-64.so.2,
/// ld-linux-aarch64.so.1, ld64.so.1, ld-2.31.so, ...): such a process gets
/// libc mapped once the loader has run.
pub(super) fn maps_glibc_loader(maps: &MemoryMaps) -> bool {
    maps.0.iter().any(|m| match &m.pathname {
        MMapPath::Path(p) => p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("ld-linux") || n.starts_with("ld64.so") || n.starts_with("ld-2.")
        }),
        _ => false,
    })
}

fn is_glibc_name(name: &str) -> bool {
    name == "libc.so.6" || version_from_name(name).is_some()
}

/// "2.31" of "libc-2.31.so".
fn version_from_name(name: &str) -> Option<String> {
    let v = name.strip_prefix("libc-")?.strip_suffix(".so")?;
    let ok = v.split('.').count() >= 2
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| v.to_owned())
}

/// The version of the glibc `libc` that the process `proc_dir`
/// (ROOT/proc/PID) has mapped; `root` is the tree the plain path is read in.
pub(super) fn mapped_glibc_version(
    root: &Path,
    proc_dir: &Path,
    libc: &MappedLibc,
) -> Option<String> {
    if let Some(v) = libc
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(version_from_name)
    {
        return Some(v);
    }
    let map_file = proc_dir
        .join("map_files")
        .join(format!("{:x}-{:x}", libc.start, libc.end));
    if let Some(v) = read_limited(&map_file).and_then(|d| version_from_elf(&d)) {
        return Some(v);
    }
    [
        under(&proc_dir.join("root"), &libc.path),
        under(root, &libc.path),
    ]
    .into_iter()
    .filter(|p| libc.inode != 0 && std::fs::metadata(p).is_ok_and(|m| m.ino() == libc.inode))
    .find_map(|p| read_limited(&p).and_then(|d| version_from_elf(&d)))
}

/// The glibc version of a libc file ("/usr/lib/x86_64-linux-gnu/libc.so.6"):
/// from its name (libc-X.Y.so), else from its banner.
pub fn glibc_version_of(file: &Path) -> Option<String> {
    file.file_name()
        .and_then(|n| n.to_str())
        .and_then(version_from_name)
        .or_else(|| version_from_elf(&read_limited(file)?))
}

fn read_limited(path: &Path) -> Option<Vec<u8>> {
    let len = std::fs::metadata(path).ok()?.len();
    (len <= MAX_LIBC_BYTES).then(|| std::fs::read(path).ok())?
}

/// The banner's version, searched in `.rodata` (the whole file when the
/// section headers are gone). `None` for a file that is not ELF.
fn version_from_elf(data: &[u8]) -> Option<String> {
    let elf = object::File::parse(data).ok()?;
    match elf.section_by_name(".rodata").and_then(|s| s.data().ok()) {
        Some(rodata) => version_from_banner(rodata),
        None => version_from_banner(data),
    }
}

/// "2.36" of "GNU C Library (Debian GLIBC 2.36-9) stable release version 2.36."
/// (also "development release version 2.40.9000").
fn version_from_banner(data: &[u8]) -> Option<String> {
    const LIBRARY: &[u8] = b"GNU C Library";
    const VERSION: &[u8] = b"release version ";
    let mut rest = data;
    while let Some(at) = find(rest, LIBRARY) {
        rest = &rest[at + LIBRARY.len()..];
        // The banner's first line ends before the version's end at most.
        let line = &rest[..rest
            .iter()
            .position(|&b| b == b'\n' || b == 0)
            .unwrap_or(rest.len())];
        if let Some(v) = find(line, VERSION) {
            let v = &line[v + VERSION.len()..];
            let len = v
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .count();
            let version = std::str::from_utf8(&v[..len]).ok()?.trim_end_matches('.');
            if version.contains('.') {
                return Some(version.to_owned());
            }
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_names() {
        assert_eq!(version_from_name("libc-2.31.so").as_deref(), Some("2.31"));
        assert_eq!(version_from_name("libc-2.17.so").as_deref(), Some("2.17"));
        assert_eq!(version_from_name("libc.so.6"), None);
        assert_eq!(version_from_name("libc-x.so"), None);
        assert!(is_glibc_name("libc.so.6") && is_glibc_name("libc-2.28.so"));
        assert!(!is_glibc_name("libc.musl-x86_64.so.1") && !is_glibc_name("libcrypto.so.3"));
    }

    #[test]
    fn versions_from_banners() {
        let banner = |s: &str| version_from_banner(s.as_bytes());
        assert_eq!(
            banner(
                "\0x\0GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright"
            ),
            Some("2.36".into())
        );
        assert_eq!(
            banner("GNU C Library (GNU libc) development release version 2.40.9000.\n"),
            Some("2.40.9000".into())
        );
        assert_eq!(
            banner("GNU C Library\0 and later: release version 2.1\n"),
            None,
            "the version must be on the banner's line"
        );
        assert_eq!(banner("GNU C Library (x) stable release version \n"), None);
        assert_eq!(
            banner(
                "GNU C Library manual\0GNU C Library (Ubuntu GLIBC 2.35-0ubuntu3.8) stable release version 2.35.\n"
            ),
            Some("2.35".into())
        );
        assert_eq!(
            version_from_elf(b"GNU C Library stable release version 2.36.\n"),
            None,
            "not ELF"
        );
    }

    #[test]
    fn libc_in_maps() {
        let maps: MemoryMaps = procfs::FromRead::from_read(
            "55bdb22f4000-55bdb22f6000 r--p 00000000 fe:00 100 /usr/bin/mongod
7f18000000-7f18001000 r--p 00000000 fe:00 200 /usr/lib/x86_64-linux-gnu/libcrypto.so.3
7f187e3bd000-7f187e3e3000 r--p 00000000 fe:00 326269 /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)
7f187e3e3000-7f187e539000 r-xp 00026000 fe:00 326269 /usr/lib/x86_64-linux-gnu/libc.so.6
"
            .as_bytes(),
        )
        .unwrap();
        let libc = find_libc(&maps).unwrap();
        assert_eq!(
            libc,
            MappedLibc {
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                start: 0x7f187e3bd000,
                end: 0x7f187e3e3000,
                inode: 326269,
            }
        );
        assert!(!maps_glibc_loader(&maps));
        let loader: MemoryMaps = procfs::FromRead::from_read(
            "7f0000000000-7f0000001000 r--p 00000000 fe:00 7 /lib64/ld-linux-x86-64.so.2\n"
                .as_bytes(),
        )
        .unwrap();
        assert!(maps_glibc_loader(&loader) && find_libc(&loader).is_none());
    }

    #[test]
    fn version_of_this_host_libc() {
        let maps = procfs::process::Process::myself().unwrap().maps().unwrap();
        let libc = find_libc(&maps).unwrap();
        assert_eq!(
            glibc_version_of(&libc.path).unwrap(),
            crate::host::ldd_version()
        );
        let own = mapped_glibc_version(Path::new("/"), Path::new("/proc/self"), &libc);
        assert_eq!(own.unwrap(), crate::host::ldd_version());
    }
}
