//! The objects a program will map when it starts, read from disk before it
//! runs: its executable (found on `PATH` as `execvp` finds it) and the
//! closure of its `DT_NEEDED` libraries as the dynamic loader would resolve
//! them (`RPATH`/`RUNPATH`, `LD_LIBRARY_PATH`, `ld.so.conf`; the `lddtree`
//! crate, which reads files and runs nothing).
//!
//! Why: `record -- CMD` attaches while the child is held before `exec`, when
//! it maps only mdiag's own code. A uprobe is registered on a file (inode +
//! offset), so attaching it to these files for the child's pid *before* they
//! are mapped makes the kernel install it the moment the loader maps them:
//! the first call is seen, however soon after start it comes. Objects loaded
//! later with `dlopen` are not known in advance (see
//! `probes::wiredtiger`, which looks again when the target's mappings change).

use std::path::{Path, PathBuf};

use super::cache::ObjectCache;
use super::error::SymbolError;
use super::process::ResolvedSymbol;

/// Where `program` (as given to `execvp`) lives: a name with a `/` is a
/// path, anything else is looked up on `PATH`.
pub fn executable_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    which::which(program).ok()
}

/// The executable and every library of its `DT_NEEDED` closure that exists
/// on disk, executable first, each once (by canonical path). Libraries the
/// loader would not find are left out: they cannot be mapped either.
pub fn startup_objects(exe: &Path) -> Vec<PathBuf> {
    let mut out = vec![std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf())];
    match lddtree::DependencyAnalyzer::default().analyze(exe) {
        Ok(tree) => {
            let mut libs: Vec<PathBuf> = tree
                .libraries
                .values()
                .filter_map(|l| l.realpath.clone())
                .collect();
            libs.sort();
            for lib in libs {
                if !out.contains(&lib) {
                    out.push(lib);
                }
            }
        }
        // A static or non-ELF program has no tree: the executable alone.
        Err(e) => tracing::debug!(exe = %exe.display(), "no dependency tree: {e}"),
    }
    out
}

/// `name` in the object file at `path`, not (yet) mapped by any process:
/// the uprobe file offset, no runtime address.
pub fn resolve_in_file(
    path: &Path,
    name: &str,
    cache: &ObjectCache,
) -> Result<ResolvedSymbol, SymbolError> {
    let elf = cache.open(path)?;
    let f = elf
        .function(name)
        .ok_or_else(|| SymbolError::NoSuchSymbol {
            path: path.to_path_buf(),
            symbol: name.to_string(),
        })?;
    let file_offset =
        elf.file_offset_of_vaddr(f.value)
            .ok_or_else(|| SymbolError::NotInSegment {
                path: path.to_path_buf(),
                symbol: f.name.to_string(),
                vaddr: f.value,
            })?;
    Ok(ResolvedSymbol {
        object: path.to_path_buf(),
        attach_path: path.to_path_buf(),
        name: f.name.to_string(),
        vaddr: f.value,
        size: f.size,
        ifunc: f.ifunc,
        file_offset,
        address: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_path_and_a_path_is_taken_as_is() {
        let sh = executable_path("sh").expect("sh on PATH");
        assert!(sh.is_absolute() && sh.is_file(), "{}", sh.display());
        assert_eq!(executable_path("/bin/sh"), Some(PathBuf::from("/bin/sh")));
        assert_eq!(executable_path("./no-such-program-here"), None);
        assert_eq!(executable_path("no-such-program-mdiag"), None);
    }

    #[test]
    fn the_closure_holds_the_libraries_the_loader_maps() {
        if crate::emulation::skip_under_emulation(
            "the_closure_holds_the_libraries_the_loader_maps",
            "the foreign libraries live under qemu-user's -L root, not where the loader of a native program looks",
        ) {
            return;
        }
        // Compare with the loader's own answer for the test binary itself:
        // every library it maps from disk is in the closure.
        let exe = std::env::current_exe().unwrap();
        let objects = startup_objects(&exe);
        assert_eq!(objects[0], std::fs::canonicalize(&exe).unwrap());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapped_libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .map(|p| std::fs::canonicalize(p).unwrap());
        if let Some(libc) = mapped_libc {
            assert!(objects.contains(&libc), "{objects:?} lacks {libc:?}");
        }
        let unique: std::collections::HashSet<_> = objects.iter().collect();
        assert_eq!(unique.len(), objects.len(), "{objects:?}");
    }

    #[test]
    fn a_symbol_is_resolved_in_an_unmapped_file() {
        let exe = std::env::current_exe().unwrap();
        let libc = startup_objects(&exe)
            .into_iter()
            .find(|p| p.to_string_lossy().contains("libc.so"));
        let Some(libc) = libc else {
            eprintln!("SKIPPED: the test binary links no libc.so (static build)");
            return;
        };
        let cache = ObjectCache::new(4);
        let s = resolve_in_file(&libc, "malloc", &cache).expect("malloc in libc");
        assert!(s.file_offset > 0 && s.address.is_none(), "{s:?}");
        assert!(matches!(
            resolve_in_file(&libc, "no_such_function_mdiag", &cache),
            Err(SymbolError::NoSuchSymbol { .. })
        ));
    }
}
