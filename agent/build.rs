//! Builds the eBPF object (`ebpf/mdiag-ebpf`) with the pinned nightly through
//! aya-build and embeds it into the `mdiag` binary (`EBPF_OBJECT` in `src/lib.rs`).
//!
//! `MDIAG_EBPF_TOOLCHAIN` overrides the nightly (default below: its LLVM must be
//! one that the installed bpf-linker reads). `AYA_BUILD_SKIP=1` skips the build
//! (for `cargo check` on machines without bpf-linker); the binary then refuses
//! to record and says why.
//!
//! One eBPF build per target directory, toolchain and BPF target: aya-build
//! builds in a cargo target directory under `OUT_DIR`, which differs for
//! every profile and feature set of this crate (clippy, the tests, the debug
//! and the release binary), and each of those rebuilt the same object from
//! scratch, `core` included (half a minute of CPU each, five times in a CI
//! run). The object depends only on the eBPF sources, the toolchain and the
//! BPF target (endianness and `bpf_target_arch`), so aya-build is pointed at
//! a directory keyed by those (`<target>/ebpf/<toolchain>/<bpf>-<arch>`), its
//! cargo rebuilds what changed there, and the object is copied into this
//! build's `OUT_DIR`. A lock file serialises builds that share it (the head
//! start of `./x test` builds the release binary beside the test tiers).
use std::{
    env,
    fs::{self, File},
    path::{Path, PathBuf},
};

use anyhow::{Context, anyhow};

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
        .ok_or_else(|| anyhow!("non-UTF-8 path {}", ebpf_dir.display()))?;
    // Always leave a file for include_bytes!, even when the build is skipped.
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let object = out_dir.join("mdiag");
    println!("cargo::rustc-env=MDIAG_EBPF_TOOLCHAIN_USED={toolchain}");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        if !object.exists() {
            fs::write(&object, [])?;
        }
        // aya-build says that it skips, in a cargo warning.
        return build(root_dir, &toolchain);
    }
    let shared = shared_dir(&out_dir, &toolchain)?;
    fs::create_dir_all(&shared).with_context(|| format!("creating {}", shared.display()))?;
    let lock = File::create(shared.join(".lock"))?;
    lock.lock()
        .with_context(|| format!("locking {}", shared.display()))?;
    // SAFETY: set_var is sound while no other thread reads the environment:
    // this build script has started none yet (aya-build starts its own only
    // after reading OUT_DIR, its one use of the variable).
    unsafe { env::set_var("OUT_DIR", &shared) };
    build(root_dir, &toolchain)?;
    fs::copy(shared.join("mdiag"), &object)
        .with_context(|| format!("copying the eBPF object to {}", object.display()))?;
    Ok(())
}

fn build(root_dir: &str, toolchain: &str) -> anyhow::Result<()> {
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "mdiag-ebpf",
            root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(toolchain),
    )
}

/// `<target>/ebpf/<toolchain>/<bpfel|bpfeb>-<arch>`: the cargo target
/// directory is the nearest ancestor of `out_dir` that cargo tagged with
/// `CACHEDIR.TAG`, or its parent when that ancestor is the directory of a
/// `--target` build (`<target>/<triple>`, which cargo tags too), so that
/// the release binary's build shares the host's.
fn shared_dir(out_dir: &Path, toolchain: &str) -> anyhow::Result<PathBuf> {
    let tagged = |d: &Path| d.join("CACHEDIR.TAG").is_file();
    let mut target = out_dir
        .ancestors()
        .find(|d| tagged(d))
        .ok_or_else(|| anyhow!("no cargo target directory above {}", out_dir.display()))?;
    let triple = env::var("TARGET")?;
    if target.file_name().is_some_and(|n| *n == *triple)
        && let Some(parent) = target.parent().filter(|p| tagged(p))
    {
        target = parent;
    }
    let endian = env::var("CARGO_CFG_TARGET_ENDIAN")?;
    let arch = env::var("CARGO_CFG_TARGET_ARCH")?;
    let bpf = if endian == "big" { "bpfeb" } else { "bpfel" };
    Ok(target
        .join("ebpf")
        .join(toolchain)
        .join(format!("{bpf}-{arch}")))
}
