//! Running external commands from the workspace root.
//!
//! Every command inherits stdio unless its output is captured on purpose, and
//! every failure (cannot start, non-zero exit, killed) becomes an error that
//! quotes the command line. Also: where the workspace and its target directory
//! are, whether we are root, and looking programs up in `PATH`.
use std::{
    env,
    ffi::OsStr,
    fmt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output, Stdio},
    sync::OnceLock,
};

use anyhow::{Context, Result, bail};

/// The workspace root: the parent of this crate's manifest directory.
#[allow(
    clippy::expect_used,
    reason = "CARGO_MANIFEST_DIR is fixed at build time, an absolute path one level below the root: it always has a parent"
)]
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
}

/// Cargo's target directory for this workspace (honours `CARGO_TARGET_DIR`
/// and `build.target-dir`), asked from `cargo metadata` once.
pub fn target_dir() -> Result<&'static Path> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    if let Some(dir) = DIR.get() {
        return Ok(dir);
    }
    let mut cmd = Cmd::cargo();
    cmd.args(["metadata", "--format-version", "1", "--no-deps"]);
    let stdout = cmd.stdout()?;
    let metadata: serde_json::Value = serde_json::from_str(&stdout)
        .with_context(|| format!("`{cmd}` printed something that is not JSON"))?;
    let dir = metadata["target_directory"]
        .as_str()
        .with_context(|| format!("`{cmd}` printed no target_directory"))?;
    Ok(DIR.get_or_init(|| PathBuf::from(dir)))
}

/// Whether this process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether doing `what` (which needs root) must go through sudo: `false`
/// when already root, `true` when sudo is there, else an error that says so
/// and what to do instead (`instead`).
pub fn need_sudo(what: &str, instead: &str) -> Result<bool> {
    if is_root() {
        Ok(false)
    } else if find_in_path("sudo").is_some() {
        Ok(true)
    } else {
        bail!("{what} needs root, but this is not root and there is no sudo; {instead}")
    }
}

/// The first executable called `name` in `PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    find_in(name, env::var_os("PATH").as_deref())
}

/// The first executable called `name` in the `PATH`-style list `dirs`.
pub fn find_in(name: &str, dirs: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    env::split_paths(dirs?).map(|dir| dir.join(name)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A command that runs in the workspace root; `Display` shows its command line.
pub struct Cmd {
    inner: Command,
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        let mut inner = Command::new(program);
        inner.current_dir(workspace_root());
        Self { inner }
    }

    /// `cargo`: the rustup proxy from `PATH` when there is one (so that
    /// `rust-toolchain.toml` and `cargo fmt`/`cargo clippy` resolve as they do
    /// in a shell), else the cargo that runs this xtask.
    pub fn cargo() -> Self {
        if find_in_path("cargo").is_some() {
            Self::new("cargo")
        } else {
            Self::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        }
    }

    /// Runs somewhere else than the workspace root.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.inner.current_dir(dir);
        self
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.inner.arg(arg);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.inner.args(args);
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.inner.env(key, value);
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.inner.env_remove(key);
        self
    }

    /// Starts it with stdout and stderr both into `out` (a pipe's writer:
    /// dropped here once the child has it, so the reader sees its end).
    pub fn spawn_with_output(&mut self, out: std::io::PipeWriter) -> Result<Child> {
        let err = out
            .try_clone()
            .with_context(|| format!("a second handle on the pipe for `{self}`"))?;
        self.inner.stdout(out).stderr(err);
        let child = self
            .inner
            .spawn()
            .with_context(|| format!("could not start `{self}`"));
        // The Command keeps its copies of the pipe's writer until replaced:
        // the reader would never see the end of the output.
        self.inner.stdout(Stdio::inherit()).stderr(Stdio::inherit());
        child
    }

    /// Fails unless `status` (of this command) is success, quoting it.
    pub fn check(&self, status: ExitStatus) -> Result<()> {
        check(self, status)
    }

    /// Runs with inherited stdio and fails unless it exits with status 0.
    pub fn run(&mut self) -> Result<()> {
        let status = self.status()?;
        check(self, status)
    }

    /// Runs with inherited stdio and returns its exit status, whatever it is.
    pub fn status(&mut self) -> Result<ExitStatus> {
        self.inner
            .status()
            .with_context(|| format!("could not start `{self}`"))
    }

    /// Runs with stdout and stderr captured, whatever the exit status.
    pub fn output(&mut self) -> Result<Output> {
        self.inner
            .output()
            .with_context(|| format!("could not start `{self}`"))
    }

    /// Runs with stdout captured (stderr inherited) and returns stdout; fails
    /// unless it exits with status 0.
    pub fn stdout(&mut self) -> Result<String> {
        self.inner.stderr(Stdio::inherit());
        let output = self.output()?;
        check(self, output.status)?;
        String::from_utf8(output.stdout).with_context(|| format!("`{self}` printed non-UTF-8"))
    }

    /// Starts it in the background with stdin from /dev/null and stdout and
    /// stderr into `log`; the caller waits for (or kills) the child.
    pub fn spawn_logged(&mut self, log: std::fs::File) -> Result<Child> {
        let stderr = log
            .try_clone()
            .context("duplicating the log file's handle")?;
        self.inner.stdin(Stdio::null()).stdout(log).stderr(stderr);
        self.inner
            .spawn()
            .with_context(|| format!("could not start `{self}`"))
    }

    /// Replaces this process with the command (Unix `exec`); returns only on
    /// failure, so the command's exit status and signals are exactly its own.
    pub fn exec(&mut self) -> anyhow::Error {
        use std::os::unix::process::CommandExt;
        let err = self.inner.exec();
        anyhow::Error::new(err).context(format!("could not start `{self}`"))
    }
}

fn check(cmd: &Cmd, status: ExitStatus) -> Result<()> {
    if status.success() {
        Ok(())
    } else {
        bail!("`{cmd}` failed ({status})")
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (key, value) in self.inner.get_envs() {
            if let Some(value) = value {
                write!(f, "{}={} ", quote(key), quote(value))?;
            }
        }
        write!(f, "{}", quote(self.inner.get_program()))?;
        for arg in self.inner.get_args() {
            write!(f, " {}", quote(arg))?;
        }
        Ok(())
    }
}

/// Shell-quotes `s` when it holds anything but plainly safe characters.
fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::Cmd;

    #[test]
    fn command_lines_are_shell_quoted() {
        let mut cmd = Cmd::new("cargo");
        cmd.env("LLVM_PREFIX", "/usr/lib/llvm-22")
            .args(["--config", "a = ['b']", "it's", ""]);
        assert_eq!(
            cmd.to_string(),
            r#"LLVM_PREFIX=/usr/lib/llvm-22 cargo --config 'a = ['\''b'\'']' 'it'\''s' ''"#
        );
    }
}
