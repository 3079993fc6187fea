//! Checks that the process may load BPF programs, before anything else runs,
//! and says what an unprivileged run with capabilities (the systemd unit's
//! `AmbientCapabilities=`) cannot see. Root is not required: the effective
//! capability set is what the kernel checks, so it is what is read here.

/// Capabilities that replace root for mdiag: loading BPF (`CAP_BPF`) and
/// tracing / perf events (`CAP_PERFMON`).
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYSLOG: u32 = 34;

/// Capabilities mdiag runs without, each with what is lost: a target owned
/// by another user (mongod runs as `mongodb`) is only partly readable, and
/// kernel stacks stay unsymbolized. Found by running the agent without each
/// (`packaging/systemd/mdiag-agent.service` lists the evidence).
const OPTIONAL: [(u32, &str, &str); 3] = [
    (
        CAP_SYS_PTRACE,
        "CAP_SYS_PTRACE",
        "another user's /proc/PID/{maps,exe,root} are unreadable: its executable, allocator and symbols stay unknown",
    ),
    (
        CAP_DAC_READ_SEARCH,
        "CAP_DAC_READ_SEARCH",
        "another user's /proc/PID/{mem,environ,fd} are unreadable: no rseq state, allocator environment or data files",
    ),
    (
        CAP_SYSLOG,
        "CAP_SYSLOG",
        "/proc/kallsyms shows no addresses: kernel stacks stay unsymbolized",
    ),
];

#[derive(Debug, thiserror::Error)]
#[error(
    "mdiag needs root, or the capabilities CAP_BPF and CAP_PERFMON (missing: {missing}); run it with sudo or grant them: setcap cap_bpf,cap_perfmon+ep $(command -v mdiag) (the agent's systemd unit grants them with AmbientCapabilities=)"
)]
pub struct PrivilegeError {
    pub missing: String,
}

/// Ok when root or when the effective capability set has what we need.
pub fn check() -> Result<(), PrivilegeError> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    missing(cap_eff()).map_or(Ok(()), |missing| Err(PrivilegeError { missing }))
}

/// The capabilities that help but are not required and that this process
/// lacks, each with what is lost ("CAP_SYSLOG: /proc/kallsyms ...").
pub fn optional_missing() -> Vec<String> {
    optional_lacking(cap_eff())
}

fn cap_eff() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .unwrap_or(0)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

fn has(cap_eff: u64, cap: u32) -> bool {
    cap_eff & (1u64 << cap) != 0
}

fn missing(cap_eff: u64) -> Option<String> {
    // CAP_SYS_ADMIN covers both on kernels before 5.8.
    if has(cap_eff, CAP_SYS_ADMIN) || (has(cap_eff, CAP_BPF) && has(cap_eff, CAP_PERFMON)) {
        return None;
    }
    let names: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|(c, _)| !has(cap_eff, *c))
        .map(|(_, n)| n)
        .collect();
    Some(names.join(", "))
}

fn optional_lacking(cap_eff: u64) -> Vec<String> {
    OPTIONAL
        .iter()
        .filter(|(c, _, _)| !has(cap_eff, *c))
        .map(|(_, name, lost)| format!("{name}: {lost}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The systemd unit's set (no uid 0): enough to start, nothing lost.
    const UNIT: u64 = (1 << CAP_BPF)
        | (1 << CAP_PERFMON)
        | (1 << CAP_SYS_PTRACE)
        | (1 << CAP_DAC_READ_SEARCH)
        | (1 << CAP_SYSLOG);

    #[test]
    fn capability_sets() {
        assert_eq!(
            parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ff_ffff_ffff)
        );
        assert_eq!(missing(0x1ff_ffff_ffff), None);
        assert_eq!(missing(0).as_deref(), Some("CAP_BPF, CAP_PERFMON"));
        assert_eq!(missing(1 << CAP_BPF).as_deref(), Some("CAP_PERFMON"));
        assert_eq!(missing((1 << CAP_BPF) | (1 << CAP_PERFMON)), None);
        assert_eq!(missing(1 << CAP_SYS_ADMIN), None);
        let e = PrivilegeError {
            missing: "CAP_BPF".into(),
        };
        assert!(e.to_string().starts_with("mdiag needs root"));
    }

    #[test]
    fn the_units_capability_set_is_enough_and_loses_nothing() {
        // As /proc/self/status shows it under setpriv with exactly this set.
        let status = format!("Name:\tmdiag\nCapInh:\t{UNIT:016x}\nCapEff:\t{UNIT:016x}\n");
        let eff = parse_cap_eff(&status).unwrap();
        assert_eq!(eff, 0x0000_00c4_0008_0004);
        assert_eq!(missing(eff), None);
        assert!(optional_lacking(eff).is_empty());
        // Root's full set loses nothing either.
        assert!(optional_lacking(0x1ff_ffff_ffff).is_empty());
    }

    #[test]
    fn each_optional_capability_says_what_is_lost() {
        let bare = (1 << CAP_BPF) | (1 << CAP_PERFMON);
        assert_eq!(missing(bare), None);
        let lost = optional_lacking(bare);
        assert_eq!(lost.len(), 3, "{lost:?}");
        assert!(lost[0].starts_with("CAP_SYS_PTRACE: "), "{lost:?}");
        let without_syslog = optional_lacking(UNIT & !(1 << CAP_SYSLOG));
        assert_eq!(without_syslog.len(), 1);
        assert!(without_syslog[0].contains("kallsyms"), "{without_syslog:?}");
    }
}
