//! What `packaging/kubernetes/Dockerfile` copies into the image, read from
//! the file itself (no container engine runs here): the `COPY` sources with
//! `${TARGETARCH}` expanded for each architecture, so the package tier can
//! check they are the files `cargo xtask package` writes (the release
//! binary, per architecture), and that its `.dockerignore` lets them through.
use anyhow::{Result, bail};

pub const DOCKERFILE: &str = "packaging/kubernetes/Dockerfile";
/// BuildKit's per-Dockerfile ignore file (`<Dockerfile>.dockerignore`).
pub const DOCKERIGNORE: &str = "packaging/kubernetes/Dockerfile.dockerignore";

/// The `COPY` sources of `dockerfile` with `${TARGETARCH}` / `$TARGETARCH`
/// replaced by `docker_arch`; fails when a `COPY` uses the variable without
/// an `ARG TARGETARCH` before it, or uses another variable.
pub fn copy_sources(dockerfile: &str, docker_arch: &str) -> Result<Vec<String>> {
    let mut declared = false;
    let mut out = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match words.next().map(str::to_ascii_uppercase).as_deref() {
            Some("FROM") => declared = false,
            Some("ARG") => declared |= words.next() == Some("TARGETARCH"),
            Some("COPY") => {
                let args: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
                let Some((_dest, sources)) = args.split_last() else {
                    bail!("COPY without arguments: {line}");
                };
                for s in sources {
                    let expanded = s
                        .replace("${TARGETARCH}", docker_arch)
                        .replace("$TARGETARCH", docker_arch);
                    if expanded != *s && !declared {
                        bail!("{line}: TARGETARCH is used before `ARG TARGETARCH` in its stage");
                    }
                    if expanded.contains('$') {
                        bail!("{line}: a variable other than TARGETARCH");
                    }
                    out.push(expanded);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether the `.dockerignore` text `ignore` leaves `path` in the build
/// context: the last pattern that matches decides (`!` re-includes); `*`
/// matches within one path segment.
pub fn in_context(ignore: &str, path: &str) -> bool {
    let mut included = true;
    for pat in ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (negated, pat) = pat.strip_prefix('!').map_or((false, pat), |p| (true, p));
        if glob(pat.trim_start_matches('/'), path) {
            included = negated;
        }
    }
    included
}

/// `pat` matches `path` segment by segment, or matches a parent of it.
fn glob(pat: &str, path: &str) -> bool {
    let pats: Vec<&str> = pat.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    pats.len() <= segs.len() && pats.iter().zip(&segs).all(|(p, s)| segment(p, s))
}

fn segment(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            s.len() >= head.len()
                && s.starts_with(head)
                && (0..=s.len() - head.len()).any(|i| {
                    s.is_char_boundary(head.len() + i) && segment(tail, &s[head.len() + i..])
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{arch::ARCHES, cmd::workspace_root, package};

    fn read(rel: &str) -> String {
        std::fs::read_to_string(workspace_root().join(rel)).unwrap()
    }

    #[test]
    fn the_image_copies_the_packaged_release_binary_of_its_architecture() {
        let dockerfile = read(DOCKERFILE);
        let ignore = read(DOCKERIGNORE);
        for arch in ARCHES {
            let docker_arch = package::deb_arch(arch).unwrap();
            let sources = copy_sources(&dockerfile, docker_arch).unwrap();
            let bin = package::docker_binary(arch).unwrap();
            let bin = bin.strip_prefix(workspace_root()).unwrap();
            assert!(
                sources.iter().any(|s| std::path::Path::new(s) == bin),
                "{arch:?}: {sources:?} lacks {}",
                bin.display()
            );
            for s in &sources {
                assert!(in_context(&ignore, s), "{s} is ignored by {DOCKERIGNORE}");
                // Everything else it copies is a file of the repository.
                if std::path::Path::new(s) != bin {
                    assert!(workspace_root().join(s).is_file(), "{s}");
                }
            }
        }
    }

    #[test]
    fn dockerfile_reading_fails_where_docker_would() {
        let ok = "FROM x\nARG TARGETARCH\nCOPY --chmod=755 a/${TARGETARCH}/m b/$TARGETARCH/n /d\n";
        assert_eq!(
            copy_sources(ok, "arm64").unwrap(),
            ["a/arm64/m", "b/arm64/n"]
        );
        // ARG is per stage: a second FROM forgets it.
        assert!(
            copy_sources(
                "FROM x\nARG TARGETARCH\nFROM y\nCOPY ${TARGETARCH} /d\n",
                "amd64"
            )
            .is_err()
        );
        assert!(copy_sources("FROM x\nCOPY target/${ARCH}/m /d\n", "amd64").is_err());
        let ignore = "*\n!target/package/*/mdiag\n";
        assert!(in_context(ignore, "target/package/s390x/mdiag"));
        assert!(!in_context(ignore, "target/release/mdiag"));
        assert!(!in_context(ignore, "target/package/s390x/mdiag.deb"));
        assert!(in_context("", "anything"));
    }
}
