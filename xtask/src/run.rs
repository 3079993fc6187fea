//! `cargo xtask build` and `cargo xtask run`: build the `mdiag` binary, and
//! run it as root with the caller's arguments and its own exit status.
use std::{ffi::OsString, path::PathBuf};

use anyhow::Result;

use crate::{
    cmd::{Cmd, need_sudo, target_dir},
    say,
};

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
