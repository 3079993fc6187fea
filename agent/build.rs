//! Builds the eBPF object (`ebpf/mdiag-ebpf`) with the pinned nightly through
//! aya-build and embeds it into the `mdiag` binary (`EBPF_OBJECT` in `src/lib.rs`).
//!
//! `MDIAG_EBPF_TOOLCHAIN` overrides the nightly (default below: its LLVM must be
//! one that the installed bpf-linker reads). `AYA_BUILD_SKIP=1` skips the build
//! (for `cargo check` on machines without bpf-linker); the binary then refuses
//! to record and says why.
use std::{env, path::PathBuf};

const DEFAULT_EBPF_TOOLCHAIN: &str = "nightly-2026-08-01";

fn main() -> anyhow::Result<()> {
    println!("cargo::rerun-if-env-changed=MDIAG_EBPF_TOOLCHAIN");
    // Rules are embedded with include_dir!: a new file must trigger a rebuild.
    println!("cargo::rerun-if-changed=../rules");
    let toolchain =
        env::var("MDIAG_EBPF_TOOLCHAIN").unwrap_or_else(|_| DEFAULT_EBPF_TOOLCHAIN.to_owned());
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir.join("..").join("ebpf").join("mdiag-ebpf");
    let ebpf_dir = ebpf_dir.canonicalize()?;
    let root_dir = ebpf_dir
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", ebpf_dir.display()))?;
    // Always leave a file for include_bytes!, even when the build is skipped.
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let object = out_dir.join("mdiag");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip && !object.exists() {
        std::fs::write(&object, [])?;
    }
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "mdiag-ebpf",
            root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    )?;
    println!("cargo::rustc-env=MDIAG_EBPF_TOOLCHAIN_USED={toolchain}");
    Ok(())
}
