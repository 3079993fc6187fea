//! Checks that the process may load BPF programs, before anything else runs.

/// Capabilities that replace root for mdiag: loading BPF (`CAP_BPF`) and
/// tracing / perf events (`CAP_PERFMON`).
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;
const CAP_SYS_ADMIN: u32 = 21;

#[derive(Debug, thiserror::Error)]
#[error(
    "mdiag record needs root, or the capabilities CAP_BPF and CAP_PERFMON (missing: {missing}); run it with sudo or grant them: setcap cap_bpf,cap_perfmon+ep $(command -v mdiag)"
)]
pub struct PrivilegeError {
    pub missing: String,
}

/// Ok when root or when the effective capability set has what we need.
pub fn check() -> Result<(), PrivilegeError> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let cap_eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .unwrap_or(0);
    missing(cap_eff).map_or(Ok(()), |missing| Err(PrivilegeError { missing }))
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

fn missing(cap_eff: u64) -> Option<String> {
    let has = |c: u32| cap_eff & (1u64 << c) != 0;
    // CAP_SYS_ADMIN covers both on kernels before 5.8.
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    let names: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|(c, _)| !has(*c))
        .map(|(_, n)| n)
        .collect();
    Some(names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(e.to_string().starts_with("mdiag record needs root"));
    }
}
