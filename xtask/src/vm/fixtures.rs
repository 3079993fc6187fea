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
    console_with(host_json, spawned_json, "")
}

/// [`console`] with a mongod run (`mongod_console`) before the agent's.
pub(super) fn console_with(host_json: &str, spawned_json: &str, mongod: &str) -> String {
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
         {mongod}{AGENT_OK}\
         MDIAG-VM-END\r\n[   30.1] reboot: Power down\r\n"
    )
}

/// A guest's agent run that passes (the samples as the agent writes them:
/// `{}` after a name without labels, values as floats): 3 windows, two families up, exit 0
/// after SIGTERM (a kernel message in between).
pub(super) const AGENT_OK: &str = "MDIAG-VM-AGENT-BEGIN\r\n\
    MDIAG-VM-AGENT-WAITED 6\r\n\
    MDIAG-VM-AGENT-METRIC 1.0 mdiag_probe_up{target=\"host\",family=\"sched\",reason=\"attached\"} 1.0\r\n\
    [   25.1] random: crng init done\r\n\
    MDIAG-VM-AGENT-METRIC 1.0 mdiag_probe_up{target=\"host\",family=\"perf\",reason=\"attached\"} 1.0\r\n\
    MDIAG-VM-AGENT-METRIC 0.0 mdiag_probe_up{target=\"host\",family=\"alloc\",reason=\"not_applicable\"} 0.0\r\n\
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
            "programs": [
                {"name": "mdiag_fe_futex", "attach_point": "fentry/__x64_sys_futex",
                    "attached": true, "error": null},
                {"name": "mdiag_fx_futex", "attach_point": "fexit/__x64_sys_futex",
                    "attached": true, "error": null}]}),
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

/// A report of the mongod run: every family attached; `checkpoints`
/// WiredTiger checkpoints, two allocator windows that timed `alloc`
/// (symbol, calls), serverStatus samples in 5 of 6 s counting `inserts`.
pub(super) fn mongod_report(checkpoints: u64, alloc: &[(&str, u64)], inserts: u64) -> String {
    let mut probes = probes(None, false);
    for family in ["wiredtiger", "alloc"] {
        probes.push(serde_json::json!({"family": family, "attached": true,
            "programs": [program(&format!("{family}_begin"), None)]}));
    }
    let functions: Vec<Value> = alloc
        .iter()
        .map(|(s, n)| serde_json::json!({"symbol": s, "calls": n}))
        .collect();
    serde_json::json!({
        "report_version": 1,
        "probes": probes,
        "measurements": {
            "wiredtiger": {"checkpoints": checkpoints, "max_ms": 90.2},
            "alloc": {"allocator": "gperftools", "windows": 2, "functions": functions},
            "mongod": {"seconds": 6, "seconds_with_sample": 5,
                "ops": {"insert": inserts, "query": 100, "command": 20}},
        },
    })
    .to_string()
}

/// The recording of the mongod run in base64, with per-thread data for
/// the checkpointer (tid 310) and the threads `tids` (named `conn3` for 330),
/// and a thread of another process.
fn mongod_recording(tids: &[u64]) -> String {
    use base64::Engine as _;
    let mut threads = vec![serde_json::json!({"tid": 310, "tgid": 301, "comm": "Checkpointer"})];
    threads.extend(tids.iter().map(|t| {
        serde_json::json!({"tid": t, "tgid": 301, "comm": if *t == 330 { "conn3" } else { "x" }})
    }));
    let recording = serde_json::json!({"slices": [
        {"start_ms": 0, "duration_ms": 14084, "sched": {"threads": threads},
            "alloc": {"windows": [{"start_ms": 38867, "end_ms": 39159}]}},
        {"start_ms": 14084, "duration_ms": 1000,
            "sched": {"threads": [{"tid": 330, "tgid": 999, "comm": "conn3"}]}},
    ]});
    let z = zstd::encode_all(recording.to_string().as_bytes(), 3).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(z);
    // Lines of 76, as base64(1) writes them.
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    lines.join("\r\n")
}

/// A guest's mongod run: mongod up in 20.75 s, four threads listed at each
/// end (the checkpointer and a new connection ran, the rest idled or
/// exited), `report` as its report, a recording with per-thread data for
/// the checkpointer and `tids`, and the load's total (203 of each kind).
pub(super) fn mongod_console(report: &str, tids: &[u64]) -> String {
    let file = mongod_recording(tids);
    format!(
        "MDIAG-VM-MONGOD-BEGIN\r\n\
         MDIAG-VM-MONGOD-UP 301 20.50 41.25\r\n\
         MDIAG-VM-MONGOD-READY 44.25\r\n\
         MDIAG-VM-MONGOD-THREAD start 301 5 mongod\r\n\
         MDIAG-VM-MONGOD-THREAD start 302 1 signalP\r\n\
         MDIAG-VM-MONGOD-THREAD start 310 40 Checkpointer\r\n\
         MDIAG-VM-MONGOD-THREAD start 311 3 TTLMonitor\r\n\
         [   50.1] random: crng init done\r\n\
         MDIAG-VM-MONGOD-THREAD end 301 5 mongod\r\n\
         MDIAG-VM-MONGOD-THREAD end 302 1 signalP\r\n\
         MDIAG-VM-MONGOD-THREAD end 310 52 Checkpointer\r\n\
         MDIAG-VM-MONGOD-THREAD end 330 12 conn3\r\n\
         MDIAG-VM-RECORD mongod 0\r\n\
         MDIAG-VM-JSON-BEGIN mongod\r\n{report}\r\nMDIAG-VM-JSON-END mongod 0\r\n\
         MDIAG-VM-MONGOD-RECORDED 74.45\r\n\
         MDIAG-VM-MONGOD-LOAD {{\"total\":{{\"insert\":203,\"update\":203,\"find\":203,\"aggregate\":203,\"errors\":0}},\"secs\":9.0,\"ops\":812}}\r\n\
         MDIAG-VM-FILE-BEGIN mongod\r\n{file}\r\n[   60.2] a kernel message\r\nMDIAG-VM-FILE-END mongod\r\n\
         MDIAG-VM-MONGOD-END\r\n"
    )
}
