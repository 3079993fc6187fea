//! Test support: knowing that the unit tests run under an emulator.
//!
//! The `cross` tier of `cargo xtask test` runs this library's tests built for
//! s390x under qemu-user (`MDIAG_EMULATED=qemu-user`). There, `/proc/self`
//! describes qemu, not the program under test (its maps, its name, its
//! memory layout), children are started through qemu, and
//! `/sys/kernel/btf/vmlinux` is the x86_64 host's kernel. The few tests that
//! read those skip there, loudly: one line on stderr that the test harness
//! does not capture, and the test's name appended to `MDIAG_SKIP_LOG` (if
//! set) so that the tier can list every skip at the end.

use std::io::Write;

/// Set by whoever runs the tests under an emulator (its name).
pub const EMULATED_ENV: &str = "MDIAG_EMULATED";
/// A file to append the names of skipped tests to.
pub const SKIP_LOG_ENV: &str = "MDIAG_SKIP_LOG";

/// True when running under an emulator; then `test` is reported as skipped
/// because of `why`, and the caller returns at once.
pub(crate) fn skip_under_emulation(test: &str, why: &str) -> bool {
    let Some(emulator) = std::env::var_os(EMULATED_ENV).filter(|v| !v.is_empty()) else {
        return false;
    };
    // Straight to the file descriptor: `eprintln!` would be captured by the
    // harness and shown only on failure.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED under {}: {test}: {why}",
        emulator.to_string_lossy()
    );
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV)
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = writeln!(f, "{test}: {why}");
    }
    true
}
