//! Shell completions (`mdiag completions bash|zsh|fish`) and man pages
//! (`mdiag man --out DIR`), generated from the clap definition in `cli.rs`
//! by clap's own generators, so they name every subcommand and option the
//! binary parses and cannot drift from it. Packages run these at build time.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::{Cli, Shell};

/// Why the man pages could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct ManError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mdiag", &mut out);
    out
}

/// Every man page: `mdiag.1` and one `mdiag-<command>.1` per subcommand,
/// as (file name, roff text).
pub fn man_pages() -> Result<Vec<(String, Vec<u8>)>, std::io::Error> {
    let cmd = Cli::command();
    let mut pages = Vec::new();
    let mut render = |name: String, c: clap::Command| -> Result<(), std::io::Error> {
        let mut text = Vec::new();
        clap_mangen::Man::new(c).render(&mut text)?;
        pages.push((format!("{name}.1"), text));
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("mdiag-{}", sub.get_name());
        // The page's title and synopsis name the command as typed.
        let sub = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("mdiag {}", sub.get_name()));
        render(name, sub)?;
    }
    render("mdiag".into(), cmd)?;
    pages.sort();
    Ok(pages)
}

/// Writes [`man_pages`] into `dir` (created if missing); returns the paths.
pub fn write_man(dir: &Path) -> Result<Vec<PathBuf>, ManError> {
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| ManError { path, source }
    };
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    let pages = man_pages().map_err(err(dir))?;
    let mut written = Vec::with_capacity(pages.len());
    for (name, text) in pages {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(err(&path))?;
        written.push(path);
    }
    Ok(written)
}

/// The subcommands users type (clap's `help` aside).
pub fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .filter(|n| n != "help")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_completion_script_names_every_subcommand_and_option() {
        let subs = subcommands();
        assert!(subs.len() >= 9, "{subs:?}");
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(completions(shell)).unwrap();
            for s in &subs {
                assert!(text.contains(s.as_str()), "{shell:?} lacks {s}");
            }
            for option in ["--alloc-window", "--silent-after", "--keep-going"] {
                assert!(
                    text.contains(option) || text.contains(option.trim_start_matches('-')),
                    "{shell:?} lacks {option}"
                );
            }
        }
    }

    /// Each script is valid in its shell: `bash -n`, `zsh -n`, `fish -n`
    /// parse it without running it (`cargo xtask setup` installs zsh and
    /// fish).
    #[test]
    fn completion_scripts_parse_in_their_shells() {
        let dir = tempfile::tempdir().unwrap();
        for (shell, bin) in [
            (Shell::Bash, "bash"),
            (Shell::Zsh, "zsh"),
            (Shell::Fish, "fish"),
        ] {
            let path = which::which(bin)
                .unwrap_or_else(|e| panic!("{bin}: {e} (cargo xtask setup installs it)"));
            let file = dir.path().join(bin);
            std::fs::write(&file, completions(shell)).unwrap();
            let out = std::process::Command::new(path)
                .arg("-n")
                .arg(&file)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{bin} -n: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn man_pages_cover_every_subcommand() {
        let pages = man_pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"mdiag.1"), "{names:?}");
        for s in subcommands() {
            let file = format!("mdiag-{s}.1");
            let (_, text) = pages
                .iter()
                .find(|(n, _)| *n == file)
                .unwrap_or_else(|| panic!("no {file} in {names:?}"));
            let text = String::from_utf8_lossy(text);
            assert!(
                text.starts_with(".ie") || text.contains(".TH"),
                "{file}: {text}"
            );
            let roff_name = format!("mdiag\\-{}", s.replace('-', "\\-"));
            assert!(text.contains(&roff_name), "{file}: {text}");
        }
        let (_, main) = pages.iter().find(|(n, _)| n == "mdiag.1").unwrap();
        let main = String::from_utf8_lossy(main);
        for s in subcommands() {
            assert!(main.contains(&s.replace('-', "\\-")), "mdiag.1 lacks {s}");
        }
        assert_eq!(pages.len(), subcommands().len() + 1);
    }

    /// `man` renders a page without a warning (groff's -ww: every warning).
    #[test]
    fn man_renders_the_pages_cleanly() {
        let man = which::which("man")
            .unwrap_or_else(|e| panic!("man: {e} (cargo xtask setup installs man-db)"));
        let dir = tempfile::tempdir().unwrap();
        let written = write_man(dir.path()).unwrap();
        let agent = written
            .iter()
            .find(|p| p.ends_with("mdiag-agent.1"))
            .unwrap();
        let out = std::process::Command::new(man)
            .args(["--warnings", "-l"])
            .arg(agent)
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "0")
            .output()
            .unwrap();
        // Bold and underline come as overstrikes (c BS c) on a pipe.
        let mut text = String::new();
        for c in String::from_utf8_lossy(&out.stdout).chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.trim().is_empty(), "{err}");
        assert!(text.contains("mdiag agent [--config]"), "{text}");
        assert!(text.contains("--no-mongo"), "{text}");
    }
}
