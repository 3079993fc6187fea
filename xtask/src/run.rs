//! `cargo xtask build` and `cargo xtask run`: build the `mdiag` binary, and
//! run it as root with the caller's arguments and its own exit status.
use std::{ffi::OsString, path::PathBuf};

use anyhow::Result;

use crate::{
    cmd::{Cmd, need_sudo, target_dir},
    say,
};

/// What the test tiers run, from one debug build.
pub struct TestBuild {
    /// `target/debug/mdiag`.
    pub mdiag: PathBuf,
    /// The root suite's test executable (`tests/root`), run as it is.
    pub root_suite: PathBuf,
}

/// The debug build the test tiers share: every binary and test target of
/// the workspace in one selection. Cargo unifies features over the packages
/// and targets selected, so `-p mdiag`, `-p mdiag-tcmalloc-workload`,
/// `-p mdiag-tests` and even `--workspace --test root` each compiled tens of
/// dependencies again with other features; the root, cross and vm tiers
/// share this one, and the root tier runs the suite's executable from it
/// instead of through `cargo test` (which would select, and build, anew).
/// It still compiles tens of crates after the unit tier's `cargo test
/// --workspace --exclude mdiag-tests` (3 min in CI); making the suite
/// `test = false` so that the unit tier could select every package did not
/// make the two one build (cargo gave the same crates, with the same
/// features, other hashes), so that was left.
pub fn build_for_tests() -> Result<TestBuild> {
    let out = Cmd::cargo()
        .args([
            "build",
            "--workspace",
            "--exclude",
            NOT_FOR_THE_HOST,
            "--bins",
            "--tests",
            "--message-format=json-render-diagnostics",
        ])
        .stdout()?;
    let root_suite = root_suite(&out).ok_or_else(|| {
        anyhow::anyhow!("cargo built no executable for the root suite (tests/root)")
    })?;
    Ok(TestBuild {
        mdiag: target_dir()?.join("debug").join("mdiag"),
        root_suite,
    })
}

/// The workspace member never built for the host by a tier that links:
/// the eBPF crate, whose binary is also called `mdiag` (the object
/// aya-build names after it). Built for the host it is an empty program,
/// and cargo puts it at `target/debug/mdiag` too ("output filename
/// collision"): whichever links last is the `mdiag` the root suite runs,
/// and a change to the eBPF code alone made it the empty one (every test
/// that starts mdiag failed: "exited before logging", status 0).
pub const NOT_FOR_THE_HOST: &str = "mdiag-ebpf";

/// The executable of mdiag-tests' `root` test target, from cargo's JSON
/// messages.
fn root_suite(messages: &str) -> Option<PathBuf> {
    executable(messages, |m| {
        m["target"]["name"] == "root"
            && m["target"]["kind"][0] == "test"
            && m["package_id"]
                .as_str()
                .is_some_and(|p| p.contains("mdiag-tests"))
    })
}

/// The executable of the first artifact in cargo's JSON `messages`
/// (`--message-format=json…`) that `wanted` picks.
pub fn executable(messages: &str, wanted: impl Fn(&serde_json::Value) -> bool) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && wanted(m))
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

/// `cargo build -p mdiag`, optimised when `release`; returns the binary.
pub fn build(release: bool) -> Result<PathBuf> {
    let mut cmd = Cmd::cargo();
    cmd.args(["build", "-p", "mdiag"]);
    if release {
        cmd.arg("--release");
    }
    cmd.run()?;
    let profile = if release { "release" } else { "debug" };
    Ok(target_dir()?.join(profile).join("mdiag"))
}

/// Builds mdiag and replaces this process with it, as root: directly when
/// already root, else through `sudo -E`, in the caller's working directory.
/// Returns only on failure to start.
pub fn run(release: bool, args: &[OsString]) -> Result<()> {
    let sudo = need_sudo(
        "mdiag (it loads eBPF programs)",
        "run this as root, or build with `cargo xtask build` and run mdiag as root",
    )?;
    let bin = build(release)?;
    let mut cmd = if sudo {
        say!("not root: running mdiag through `sudo -E`");
        let mut cmd = Cmd::new("sudo");
        cmd.arg("-E").arg(&bin);
        cmd
    } else {
        Cmd::new(&bin)
    };
    cmd.args(args);
    // Unlike the cargo commands, mdiag runs where `cargo xtask run` was typed,
    // so that relative paths in ARGS (recordings, rules) mean what they say.
    cmd.current_dir(std::env::current_dir()?);
    // exec: mdiag gets the terminal's signals (Ctrl-C) itself and its exit
    // status is the one `cargo xtask run` ends with.
    Err(cmd.exec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_kept_off_the_host_is_the_ebpf_one_whose_binary_shares_mdiags_name() {
        let manifest = |p: &str| {
            std::fs::read_to_string(crate::cmd::workspace_root().join(p))
                .unwrap()
                .parse::<toml::Table>()
                .unwrap()
        };
        let ebpf = manifest("ebpf/mdiag-ebpf/Cargo.toml");
        assert_eq!(ebpf["package"]["name"].as_str(), Some(NOT_FOR_THE_HOST));
        let bin = ebpf["bin"].as_array().unwrap()[0]["name"].as_str();
        assert_eq!(bin, Some("mdiag"), "the reason for the exclusion is gone");
    }

    #[test]
    fn the_root_suite_is_found_among_cargos_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/agent#mdiag@0.1.0","target":{"name":"mdiag","kind":["bin"]},"executable":"/w/target/debug/mdiag"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/agent#mdiag@0.1.0","target":{"name":"root","kind":["test"]},"executable":"/w/target/debug/deps/other-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#mdiag-tests@0.1.0","target":{"name":"root","kind":["test"]},"executable":"/w/target/debug/deps/root-abc"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            root_suite(&messages),
            Some(PathBuf::from("/w/target/debug/deps/root-abc"))
        );
        assert_eq!(
            root_suite(r#"{"reason":"build-finished","success":true}"#),
            None
        );
    }
}
