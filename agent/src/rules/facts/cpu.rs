//! The `cpu` fact group: how busy the host's CPUs were over the recording
//! and which processes kept them busy, from `/proc/stat` and every process's
//! `/proc/PID/stat` read at the start and the end ([`HostCpuUsage`]).
//!
//! The scheduler probe sees only the target's threads when there is a
//! target; this group says whether the CPUs were saturated and who else
//! used them, which a CPU-saturation finding names. "Other" is every busy
//! tick that is not the target's: other processes (also those that exited
//! before the end, which the list of processes cannot name) and the
//! kernel's own time (host-wide: all of it).

use super::{FactGroup, float, int, ratio, text};
use crate::recording::model::Recording;
use crate::recording::{HostCpuUsage, ProcessCpu};

/// Why the group is absent.
pub const CPU_UNREADABLE: &str =
    "the host's CPU time was not recorded (older recording, FTDC, or /proc/stat unreadable)";

/// Other processes named in `top_others`.
const NAMED: usize = 3;

/// The `cpu` group, or why it is absent.
pub(super) fn cpu_facts(rec: &Recording) -> Result<FactGroup, String> {
    let u = rec.host.cpu_usage.as_ref().ok_or(CPU_UNREADABLE)?;
    if u.total_ticks == 0 || u.ticks_per_s == 0 {
        return Err(format!(
            "{CPU_UNREADABLE}: no CPU time passed between the two readings"
        ));
    }
    let target = rec.target.as_ref().map(|t| t.pid);
    let secs = u.interval_ms as f64 / 1000.0;
    let cpus = f64::from(u.cpus.max(1));
    // CPUs used on average over the interval by `ticks` of CPU time.
    let cpus_of = |ticks: u64| ratio(ticks as f64 / u.ticks_per_s as f64, secs);
    let share = |ticks: u64| ratio(ticks as f64, u.total_ticks as f64);
    let target_ticks = target
        .and_then(|pid| u.top.iter().find(|p| p.pid == pid))
        .map_or(0, |p| p.ticks);
    let others: Vec<&ProcessCpu> = u.top.iter().filter(|p| Some(p.pid) != target).collect();
    // Every busy tick that is not the target's: other processes, those that
    // exited during the recording and the kernel's own time included.
    let other_ticks = u.busy_ticks.saturating_sub(target_ticks);

    let mut g = FactGroup::new();
    g.insert("duration_s".into(), float(secs));
    g.insert("cpus".into(), int(u64::from(u.cpus)));
    g.insert("busy_share".into(), float(share(u.busy_ticks)));
    g.insert("idle_share".into(), float(share(u.idle_ticks)));
    g.insert("iowait_share".into(), float(share(u.iowait_ticks)));
    g.insert("steal_share".into(), float(share(u.steal_ticks)));
    g.insert("busy_cpus".into(), float(share(u.busy_ticks) * cpus));
    g.insert("target_cpus".into(), float(cpus_of(target_ticks)));
    g.insert("other_cpus".into(), float(cpus_of(other_ticks)));
    g.insert(
        "other_share".into(),
        float(ratio(cpus_of(other_ticks), cpus)),
    );
    let top = others.first();
    g.insert(
        "top_other".into(),
        text(top.map_or(String::new(), |p| p.comm.clone())),
    );
    g.insert(
        "top_other_pid".into(),
        int(top.map_or(0, |p| u64::from(p.pid))),
    );
    g.insert(
        "top_other_cpus".into(),
        float(top.map_or(0.0, |p| cpus_of(p.ticks))),
    );
    g.insert(
        "top_other_nice".into(),
        super::FactValue::Int(top.map_or(0, |p| p.nice)),
    );
    g.insert("top_others".into(), text(describe(&others, &cpus_of)));
    Ok(g)
}

/// "spin (pid 4242, 4 threads): 1.62 CPUs; stress (pid 17): 0.31 CPUs".
fn describe(others: &[&ProcessCpu], cpus_of: &dyn Fn(u64) -> f64) -> String {
    others
        .iter()
        .take(NAMED)
        .map(|p| {
            let threads = if p.threads > 1 {
                format!(", {} threads", p.threads)
            } else {
                String::new()
            };
            format!(
                "{} (pid {}{threads}): {:.2} CPUs",
                p.comm,
                p.pid,
                cpus_of(p.ticks)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A [`HostCpuUsage`] for tests and the example recording: `secs` seconds on
/// `cpus` CPUs, `busy` of them kept busy, and `(pid, comm, CPUs used)` per process.
pub(crate) fn usage(secs: u64, cpus: u32, busy: f64, procs: &[(u32, &str, f64)]) -> HostCpuUsage {
    let hz = 100u64;
    let ticks = |c: f64| (c * (secs * hz) as f64).round() as u64;
    let total = ticks(f64::from(cpus));
    let busy_ticks = ticks(busy).min(total);
    let top: Vec<ProcessCpu> = procs
        .iter()
        .map(|(pid, comm, c)| ProcessCpu {
            pid: *pid,
            comm: (*comm).into(),
            ticks: ticks(*c),
            threads: 1,
            nice: 0,
        })
        .collect();
    HostCpuUsage {
        interval_ms: secs * 1000,
        ticks_per_s: hz,
        cpus,
        total_ticks: total,
        busy_ticks,
        idle_ticks: total - busy_ticks,
        iowait_ticks: 0,
        steal_ticks: 0,
        process_ticks: top.iter().map(|p| p.ticks).sum(),
        top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::{FactValue, Facts};
    use crate::rules::testdata;

    #[test]
    fn others_exclude_the_target_and_are_named_busiest_first() {
        let mut rec = testdata::oversubscribed();
        let pid = rec.target.as_ref().unwrap().pid;
        rec.host.cpu_usage = Some(usage(
            10,
            2,
            1.98,
            &[(900, "spin", 1.2), (pid, "mongod", 0.6), (901, "sshd", 0.1)],
        ));
        let f = Facts::derive(&rec);
        let get = |k: &str| f.get(&format!("cpu.{k}")).cloned().unwrap();
        assert_eq!(get("busy_share"), FactValue::Float(0.99));
        assert_eq!(get("target_cpus"), FactValue::Float(0.6));
        assert_eq!(get("top_other"), FactValue::Text("spin".into()));
        assert_eq!(get("top_other_pid"), FactValue::Int(900));
        assert_eq!(get("top_other_cpus"), FactValue::Float(1.2));
        // The busy time less the target's: 1.98 - 0.6.
        let other = get("other_cpus").as_f64().unwrap();
        assert!((other - 1.38).abs() < 1e-9, "{other}");
        assert_eq!(
            get("top_others"),
            FactValue::Text("spin (pid 900): 1.20 CPUs; sshd (pid 901): 0.10 CPUs".into())
        );
        rec.host.cpu_usage = None;
        let f = Facts::derive(&rec);
        assert_eq!(f.absent_reason("cpu"), Some(CPU_UNREADABLE));
    }
}
