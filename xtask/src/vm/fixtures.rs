//! Test fixtures for the kernel matrix: report JSON and serial console logs
//! like a guest's, shared by the tests of `console.rs` and `verdict.rs`.
use serde_json::Value;

fn program(name: &str, error: Option<&str>) -> Value {
    serde_json::json!({
        "name": name,
        "attach_point": format!("tp_btf/{name}"),
        "attached": error.is_none(),
        "error": error,
    })
}

pub(super) fn report(probes: Vec<Value>, switches_per_s: f64) -> String {
    serde_json::json!({
        "report_version": 1,
        "probes": probes,
        "measurements": {
            "sched": {"switches_per_s": switches_per_s, "duration_s": 3.0},
            "perf": {"duration_s": 3.0, "target_samples": 296, "top_symbols": [
                {"symbol": "?", "object": "/bin/busybox", "share": 0.98},
                {"symbol": "?", "object": "[kernel]", "share": 0.02}]},
        },
    })
    .to_string()
}

/// A console log like the guest's: firmware escapes before the first
/// marker, CRLF line ends, a kernel message inside the JSON.
pub(super) fn console(host_json: &str, spawned_json: &str) -> String {
    let host_json = host_json.replacen(',', ",\n[   12.345678] random: crng init done\n", 1);
    format!(
        "SeaBIOS\r\n\x1bc\x1b[?7l\x1b[2JMDIAG-VM-BEGIN 6.1.0-56-cloud-amd64 4.25\r\n\
         MDIAG-VM-CTXT host-wide start 1000 10.50\r\n\
         MDIAG-VM-CTXT host-wide end 1615 13.58\r\n\
         MDIAG-VM-RECORD host-wide 0\r\n\
         MDIAG-VM-JSON-BEGIN host-wide\r\n{host_json}\r\n\
         MDIAG-VM-JSON-END host-wide 0\r\n\
         MDIAG-VM-CTXT spawned start 2000 20.0\r\n\
         MDIAG-VM-CTXT spawned end 2600 24.0\r\n\
         MDIAG-VM-RECORD spawned 0\r\n\
         MDIAG-VM-JSON-BEGIN spawned\r\n{spawned_json}\r\n\
         MDIAG-VM-JSON-END spawned 0\r\n\
         {AGENT_OK}\
         MDIAG-VM-END\r\n[   30.1] reboot: Power down\r\n"
    )
}

/// A guest's agent run that passes (the samples as the agent writes them:
/// `{}` after a name without labels, values as floats): 3 windows, two families up, exit 0
/// after SIGTERM (a kernel message in between).
pub(super) const AGENT_OK: &str = "MDIAG-VM-AGENT-BEGIN\r\n\
    MDIAG-VM-AGENT-WAITED 6\r\n\
    MDIAG-VM-AGENT-METRIC 1.0 mdiag_probe_up{target=\"host\",family=\"sched\",reason=\"\"} 1.0\r\n\
    [   25.1] random: crng init done\r\n\
    MDIAG-VM-AGENT-METRIC 1.0 mdiag_probe_up{target=\"host\",family=\"perf\",reason=\"\"} 1.0\r\n\
    MDIAG-VM-AGENT-METRIC 0.0 mdiag_probe_up{target=\"host\",family=\"alloc\",reason=\"not tried host-wide\"} 0.0\r\n\
    MDIAG-VM-AGENT-METRIC 3.0 mdiag_windows_total{} 3.0\r\n\
    MDIAG-VM-AGENT-LOG mdiag agent: serving metrics at http://127.0.0.1:9219/metrics\r\n\
    MDIAG-VM-AGENT-LOG mdiag agent: stopped\r\n\
    MDIAG-VM-AGENT-EXIT 0\r\n";

pub(super) const SCHED_ERROR: &str = "load: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). \
    Verifier output: 0: R1=ctx() R10=fp0\n\
    516: (0f) r2 += r1\n\
    math between map_value pointer and register with unbounded min value is not allowed\n\
    verification time 32986 usec\n\
    stack depth 240+0\n\
    processed 918 insns (limit 1000000) max_states_per_insn 4";

pub(super) fn probes(sched_error: Option<&str>, spawned: bool) -> Vec<Value> {
    let mut p = vec![
        serde_json::json!({"family": "sched", "attached": sched_error.is_none(),
            "programs": [program("sched_switch", sched_error), program("sched_wakeup", None)]}),
        serde_json::json!({"family": "softirq", "attached": true,
            "programs": [program("softirq_entry", None)]}),
        serde_json::json!({"family": "syscalls", "attached": true,
            "programs": [program("sys_enter", None), program("sys_exit", None)]}),
        serde_json::json!({"family": "perf", "attached": true,
            "programs": [program("perf_cpu_clock", None)]}),
        serde_json::json!({"family": "contention", "attached": false,
            "programs": [program("cont_switch", None),
                program("contention_begin", Some("tracepoint contention_begin: not in this kernel's BTF")),
                program("contention_end", Some("tracepoint contention_end: not in this kernel's BTF"))]}),
    ];
    if spawned {
        let na = "not applicable: no WiredTiger symbols found in pid 7";
        p.push(
            serde_json::json!({"family": "wiredtiger", "attached": false,
            "programs": [program("wt_begin", Some(na)), program("wt_end", Some(na))]}),
        );
    }
    p
}
