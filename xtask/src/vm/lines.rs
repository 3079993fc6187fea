//! The kernel lines of the matrix: which Debian package builds each kernel,
//! for which architecture, and where apt finds it.
//!
//! Why these: x86_64 5.10 (Debian 11), 6.1 and 6.12 (Debian 12) in the
//! small `cloud-amd64` flavour, which has BTF; aarch64 6.1 and 6.12 in
//! `cloud-arm64` (Debian 12, BTF too); s390x has no cloud flavour: the 6.12
//! of `bookworm-backports` has BTF (`CONFIG_DEBUG_INFO_BTF=y`), and Debian
//! 12's own s390x kernel (6.1) is built without it, so it shows what mdiag
//! does without BTF: the `tp_btf` families cannot load (each says so), the
//! perf event and uprobe ones still do.
use super::{
    expect::Need,
    guest::{AARCH64, Guest, S390X, X86_64},
};

/// One kernel line: which Debian package builds it and where apt finds it.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    /// What `--kernel` takes, and the log's name.
    pub name: &'static str,
    /// The architecture it boots.
    pub guest: &'static Guest,
    /// Upstream major.minor, for [`EXPECTATIONS`](super::expect::EXPECTATIONS).
    pub version: (u32, u32),
    /// `None`: the host's apt sources have it; else the Debian suite to add
    /// in a private apt state.
    pub suite: Option<&'static str>,
    /// `apt-cache search --names-only` patterns, tried in order until one
    /// matches (the unsigned image first; a signed one boots the same way
    /// under QEMU's `-kernel`).
    pub patterns: &'static [&'static str],
    /// What this kernel build needs of a family whatever the table says
    /// for its version (see [`need_for`](super::expect::need_for)).
    pub expect: &'static [(&'static str, Need)],
    /// The guest also records the real mongod 6.0.5 under a request load
    /// (`vm/mongod.rs`): x86_64 only (no other build of it exists), and on
    /// one kernel, 6.1 (Debian 12's own), to keep the matrix short: the run
    /// takes about 5 min of TCG, and the root tier records the real mongod
    /// on the host's kernel anyway.
    pub mongod: bool,
}

pub const LINES: &[Line] = &[
    Line {
        name: "5.10",
        guest: &X86_64,
        version: (5, 10),
        suite: Some("bullseye"),
        patterns: &[
            r"^linux-image-5\.10\.0-[0-9]+-cloud-amd64-unsigned$",
            r"^linux-image-5\.10\.0-[0-9]+-cloud-amd64$",
        ],
        expect: &[],
        mongod: false,
    },
    Line {
        name: "6.1",
        guest: &X86_64,
        version: (6, 1),
        suite: None,
        patterns: &[r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$"],
        expect: &[],
        mongod: true,
    },
    Line {
        name: "6.12",
        guest: &X86_64,
        version: (6, 12),
        suite: None,
        patterns: &[r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64-unsigned$"],
        expect: &[],
        mongod: false,
    },
    Line {
        name: "aarch64-6.1",
        guest: &AARCH64,
        version: (6, 1),
        suite: None,
        patterns: &[r"^linux-image-6\.1\.0-[0-9]+-cloud-arm64-unsigned$"],
        expect: &[],
        mongod: false,
    },
    Line {
        name: "aarch64-6.12",
        guest: &AARCH64,
        version: (6, 12),
        suite: None,
        patterns: &[r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-arm64-unsigned$"],
        expect: &[],
        mongod: false,
    },
    Line {
        name: "s390x-6.12",
        guest: &S390X,
        version: (6, 12),
        suite: Some("bookworm-backports"),
        patterns: &[r"^linux-image-6\.12\.[0-9]+\+deb12-s390x$"],
        expect: &[],
        mongod: false,
    },
    Line {
        name: "s390x-6.1",
        guest: &S390X,
        version: (6, 1),
        suite: None,
        patterns: &[r"^linux-image-6\.1\.0-[0-9]+-s390x$"],
        // `# CONFIG_DEBUG_INFO_BTF is not set`: no /sys/kernel/btf/vmlinux.
        expect: &[
            ("sched", Need::Fails),
            ("softirq", Need::Fails),
            ("syscalls", Need::Fails),
            ("contention", Need::Fails),
        ],
        mongod: false,
    },
];

pub fn parse_line(s: &str) -> Result<&'static Line, String> {
    LINES.iter().find(|l| l.name == s).ok_or_else(|| {
        let names: Vec<&str> = LINES.iter().map(|l| l.name).collect();
        format!("unknown kernel {s:?}; one of: {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse() {
        for line in LINES {
            assert_eq!(parse_line(line.name), Ok(line));
            // A foreign line's name says its architecture.
            assert_eq!(
                line.guest.name == "x86_64",
                !line.name.contains('-'),
                "{}",
                line.name
            );
        }
        // mongod 6.0.5 exists for x86_64 only; one kernel records it.
        let with: Vec<&str> = LINES.iter().filter(|l| l.mongod).map(|l| l.name).collect();
        assert_eq!(with, ["6.1"]);
        let err = parse_line("4.19").unwrap_err();
        assert!(err.contains("aarch64-6.12, s390x-6.12, s390x-6.1"), "{err}");
    }
}
