//! Scenarios of the `wiredtiger.*` rules: cache size and limits, eviction
//! threads, data handles, checkpoint lock contention and the configuration
//! fragments their fixes write; each fires with its evidence and has near
//! misses.

use super::{fired, fix_has, num, passed, report, tuning, txt};
use crate::rules::testdata::{
    GIB, baseline, healthy_mongod, set_contention, set_mongod, with_figure,
};

#[test]
fn checkpoint_lock_contention_needs_waits_concentrated_in_checkpoints() {
    // 4 conn threads × 400 ms inside a 500 ms checkpoint per slice: 3200 ms
    // of waiting per second of checkpoint time, vs 4 × 20 ms per 500 ms
    // outside (160 ms/s).
    let mut rec = baseline();
    set_contention(&mut rec, 400, 20, "submit_bio_wait", 5);
    let f = fired(&rec, "wiredtiger.checkpoint_lock_contention");
    assert_eq!(num(&f, "checkpoints seen"), 10.0);
    assert!((num(&f, "inside checkpoints (ms per s)") - 3200.0).abs() < 1e-6);
    assert!((num(&f, "outside checkpoints (ms per s)") - 160.0).abs() < 1e-6);
    assert!((num(&f, "inside / outside") - 20.0).abs() < 1e-6);
    // All waiting inside, none outside: the strongest case still fires.
    set_contention(&mut rec, 400, 0, "submit_bio_wait", 5);
    let f = fired(&rec, "wiredtiger.checkpoint_lock_contention");
    assert_eq!(txt(&f, "inside / outside"), "no waits outside");
    // Near miss: the same waits spread evenly (ratio 1).
    set_contention(&mut rec, 100, 100, "submit_bio_wait", 5);
    passed(&rec, "wiredtiger.checkpoint_lock_contention");
    // Near miss: concentrated but tiny.
    set_contention(&mut rec, 10, 0, "submit_bio_wait", 5);
    passed(&rec, "wiredtiger.checkpoint_lock_contention");
}

#[test]
fn checkpoint_lock_contention_names_the_code_path_connections_wait_in() {
    use crate::stacks::{ProfileKind, ProfileStack, table::Wait, test_profile, test_stack};
    let mut rec = baseline();
    set_contention(&mut rec, 400, 20, "submit_bio_wait", 5);
    let sleep = Wait::Sleep.frame();
    let stack = |f: &str, ns: u64, inside: bool| ProfileStack {
        in_checkpoint: Some(inside),
        ..test_stack(
            "conn",
            &[
                (&sleep.function, "[wait]"),
                ("start_thread", "libc.so.6"),
                ("mongo::ServiceStateMachine::Impl::processMessage", "mongod"),
                (f, "mongod"),
                ("futex_wait", "[kernel]"),
            ],
            false,
            ns,
        )
    };
    rec.offcpu_profile = Some(test_profile(
        ProfileKind::OffCpu,
        vec![
            stack("__wt_session_lock_checkpoint", 900_000_000, true),
            stack("mongo::Lock::GlobalLock::GlobalLock", 100_000_000, true),
            stack("mongo::Lock::GlobalLock::GlobalLock", 5_000_000_000, false),
        ],
    ));
    let f = fired(&rec, "wiredtiger.checkpoint_lock_contention");
    assert_eq!(
        txt(&f, "where connection threads sleep inside checkpoints"),
        "__wt_session_lock_checkpoint ← mongo::ServiceStateMachine::Impl::processMessage (90 % of that sleep)"
    );
    // Near miss: the same stacks, the waits spread evenly: no finding.
    set_contention(&mut rec, 100, 100, "submit_bio_wait", 5);
    passed(&rec, "wiredtiger.checkpoint_lock_contention");
}

#[test]
fn cache_size_fires_on_a_full_cache_of_a_read_mostly_server_with_memory_to_spare() {
    // 64 GiB host, 40 GiB available; 24 GiB cache at 97 % and app eviction.
    let mut rec = baseline();
    let full = with_figure(
        with_figure(
            healthy_mongod(),
            "wiredTiger.cache.bytes currently in the cache",
            23_300_000_000,
            0,
        ),
        "wiredTiger.cache.pages evicted by application threads",
        0,
        20,
    );
    set_mongod(&mut rec, &full);
    let f = fired(&rec, "wiredtiger.cache_size");
    // It says first that it goes against the manual's advice.
    assert!(
        f.summary.trim_start().starts_with(
            "MongoDB's manual says: \"Avoid increasing the WiredTiger internal cache size above its default value.\""
        ),
        "{}",
        f.summary
    );
    assert!(num(&f, "cache fill, highest") > 90.0);
    assert!(
        (num(&f, "reads (query + getmore) of all operations") - 1000.0 / 1100.0 * 100.0).abs()
            < 0.01
    );
    // 60 % of this server's 64 GB limit (hostInfo memLimitMB 65536), not a
    // number from another host.
    assert_eq!(num(&f, "suggested cacheSizeGB"), 38.4);
    assert!(fix_has(&f, "cache_size=38.4G"), "{:?}", f.fix.commands);
    let conf = &f.fix.files[0];
    assert_eq!(conf.path, "/etc/mongod.conf");
    assert!(
        conf.content.contains("cacheSizeGB: 38.4"),
        "{}",
        conf.content
    );
    assert!(
        !f.fix.commands.iter().any(|c| c.contains("storage:")),
        "config shown as a command"
    );
    // The revert restores the recorded size (24 GiB in bytes).
    assert!(
        f.fix.revert[0].contains(&format!("cache_size={}", 24 * GIB)),
        "{:?}",
        f.fix.revert
    );
    assert!(
        f.summary.contains("goes against that advice"),
        "{}",
        f.summary
    );
    // In a container with an 8 GB limit the same figures give 4.8 GB, and
    // a 4.8 GB step is not above a 24 GB cache: no finding.
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .host_mem_limit_mb = Some(8192);
    passed(&rec, "wiredtiger.cache_size");
    // Near miss: the same server writing mostly.
    let writes = with_figure(full.clone(), "opcounters.insert", 0, 5000);
    set_mongod(&mut rec, &writes);
    passed(&rec, "wiredtiger.cache_size");
    // Near miss: no room within mongod's own memory limit: 40 GiB resident
    // plus the 14.4 GB step is above 80 % of the 64 GB limit. The host's
    // MemAvailable does not decide (plenty here).
    set_mongod(
        &mut rec,
        &with_figure(full.clone(), "mem.resident", 40 * 1024, 0),
    );
    tuning(&mut rec).mem_available_bytes = Some(60 * GIB);
    passed(&rec, "wiredtiger.cache_size");
    // Low MemAvailable (page cache counted, host-wide) but room within the
    // limit: fires, the guard reads mongod's limit.
    set_mongod(&mut rec, &full);
    tuning(&mut rec).mem_available_bytes = Some(4 * GIB);
    let f = fired(&rec, "wiredtiger.cache_size");
    assert_eq!(num(&f, "resident memory now"), 28.0);
    assert!((num(&f, "resident after the step") - 42.4).abs() < 1e-9);
    // A cgroup limit mdiag read from the target, lower than what an older
    // mongod reports, is the limit: 32 GiB gives 19.2 GB, no step up.
    rec.host.target_process.as_mut().unwrap().cgroup = Some(crate::recording::model::CgroupFacts {
        memory_max: Some((32u64 << 30).to_string()),
        ..Default::default()
    });
    passed(&rec, "wiredtiger.cache_size");
    // Near miss: the healthy baseline (half-full cache).
    passed(&baseline(), "wiredtiger.cache_size");
}

#[test]
fn eviction_threads_fire_when_application_threads_evict() {
    let mut rec = baseline();
    // 50 ms of application eviction per second, 300 pages/s.
    let evicting = with_figure(
        with_figure(
            healthy_mongod(),
            "wiredTiger.cache.application thread time evicting (usecs)",
            0,
            50_000,
        ),
        "wiredTiger.cache.pages evicted by application threads",
        0,
        300,
    );
    set_mongod(&mut rec, &evicting);
    let f = fired(&rec, "wiredtiger.eviction_threads");
    assert!((num(&f, "application thread time evicting") - 50.0).abs() < 0.5);
    assert!(fix_has(&f, "eviction=(threads_min=4,threads_max=8)"));
    // Revert to what the server had (mongod's default 4/4 here), not 1/4.
    assert!(
        f.fix.revert[0].contains("eviction=(threads_min=4,threads_max=4)"),
        "{:?}",
        f.fix.revert
    );
    // The configString keeps what the server had and adds the threads.
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .wt_config_string =
        Some("eviction_target=85,eviction=(threads_min=6,threads_max=10)".into());
    let f = fired(&rec, "wiredtiger.eviction_threads");
    assert!(
        f.fix.revert[0].contains("threads_min=6,threads_max=10"),
        "{:?}",
        f.fix.revert
    );
    assert!(
        f.fix.files[0].content.contains(
            "configString: \"eviction_target=85,eviction=(threads_min=6,threads_max=14)\""
        ),
        "{}",
        f.fix.files[0].content
    );
    passed(&baseline(), "wiredtiger.eviction_threads");
}

#[test]
fn two_configstring_changes_become_one_setting() {
    // Application threads evict and 45000 handles are open: both rules add
    // to configString; each shows the same combined line.
    let mut rec = baseline();
    let both = with_figure(
        with_figure(
            healthy_mongod(),
            "wiredTiger.cache.application thread time evicting (usecs)",
            0,
            50_000,
        ),
        "wiredTiger.data-handle.connection data handles currently active",
        45_000,
        0,
    );
    set_mongod(&mut rec, &both);
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .wt_config_string = Some("eviction_target=85".into());
    let r = report(&rec);
    let line = |id: &str| {
        let f = r.fired().find(|f| f.rule_id == id).unwrap();
        f.fix
            .files
            .iter()
            .find(|x| x.content.contains("configString"))
            .unwrap()
            .clone()
    };
    let (a, b) = (
        line("wiredtiger.eviction_threads"),
        line("wiredtiger.data_handles"),
    );
    assert_eq!(a.content, b.content);
    assert!(a.content.contains("eviction_target=85"), "{}", a.content);
    assert!(
        a.content.contains("eviction=(threads_min=4,threads_max=8)"),
        "{}",
        a.content
    );
    assert!(
        a.content.contains("hash=(dhandle_buckets=8192)"),
        "{}",
        a.content
    );
    assert!(a.how.contains("wiredtiger.data_handles"), "{}", a.how);
}

#[test]
fn data_handles_fire_in_the_tens_of_thousands() {
    let mut rec = baseline();
    set_mongod(
        &mut rec,
        &with_figure(
            healthy_mongod(),
            "wiredTiger.data-handle.connection data handles currently active",
            45_000,
            0,
        ),
    );
    let f = fired(&rec, "wiredtiger.data_handles");
    assert_eq!(num(&f, "active data handles"), 45_000.0);
    // mongod's 600 s idle close time is kept (closing a handle drops its
    // pages from the cache, SERVER-17514): no setParameter file at all.
    assert!(
        !f.fix
            .files
            .iter()
            .any(|x| x.content.contains("wiredTigerFileHandleCloseIdleTime")),
        "{:?}",
        f.fix.files
    );
    // Only the data-handle hash tables grow, sized for 45000 handles; the
    // evidence shows their memory per session (16 bytes a bucket).
    assert_eq!(num(&f, "suggested hash buckets"), 8192.0);
    assert_eq!(num(&f, "dhandle hash array"), 128.0);
    assert_eq!(f.fix.files.len(), 1);
    assert!(
        f.fix.files[0]
            .content
            .contains("hash=(dhandle_buckets=8192)")
            && !f.fix.files[0].content.contains("buckets=8192,"),
        "{}",
        f.fix.files[0].content
    );
    assert!(f.fix.risk.contains("1 MiB per session"), "{}", f.fix.risk);
    // 8000 handles with a contended handle lock fire too; without, not.
    let busy = with_figure(
        with_figure(
            healthy_mongod(),
            "wiredTiger.data-handle.connection data handles currently active",
            8000,
            0,
        ),
        "wiredTiger.lock.dhandle lock application thread time waiting (usecs)",
        0,
        100_000,
    );
    set_mongod(&mut rec, &busy);
    fired(&rec, "wiredtiger.data_handles");
    set_mongod(
        &mut rec,
        &with_figure(
            healthy_mongod(),
            "wiredTiger.data-handle.connection data handles currently active",
            8000,
            0,
        ),
    );
    passed(&rec, "wiredtiger.data_handles");
}

#[test]
fn data_handles_fire_on_cpu_time_in_the_handle_lookup() {
    use crate::stacks::{ProfileKind, test_profile, test_stack};
    let mut rec = baseline();
    set_mongod(
        &mut rec,
        &with_figure(
            healthy_mongod(),
            "wiredTiger.data-handle.connection data handles currently active",
            8000,
            0,
        ),
    );
    let profile = |in_lookup: u64, samples: u64| {
        test_profile(
            ProfileKind::OnCpu,
            vec![
                test_stack(
                    "conn",
                    &[
                        ("mongo::CollectionImpl::find", "mongod"),
                        ("__wt_session_get_dhandle", "mongod"),
                    ],
                    false,
                    in_lookup,
                ),
                test_stack(
                    "conn",
                    &[("mongo::Find", "mongod")],
                    false,
                    samples - in_lookup,
                ),
            ],
        )
    };
    // 8000 handles, no lock wait reported, 12 % of mongod's CPU in the lookup.
    rec.cpu_profile = Some(profile(120, 1000));
    let f = fired(&rec, "wiredtiger.data_handles");
    assert!((num(&f, "data-handle lookup") - 12.0).abs() < 1e-9);
    // Near miss: 3 % in the lookup.
    rec.cpu_profile = Some(profile(30, 1000));
    passed(&rec, "wiredtiger.data_handles");
    // Near miss: 12 % of too few samples to tell.
    rec.cpu_profile = Some(profile(12, 100));
    passed(&rec, "wiredtiger.data_handles");
}

#[test]
fn cache_above_the_memory_limit_is_found_from_mongods_own_limit() {
    // A 24 GiB cache in a container limited to 16 GB.
    let mut rec = baseline();
    set_mongod(&mut rec, &healthy_mongod());
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .host_mem_limit_mb = Some(16_384);
    let f = fired(&rec, "wiredtiger.cache_above_memory_limit");
    assert_eq!(num(&f, "cache as % of the limit"), 150.0);
    // mongod's own default for 16 GB: 50 % of (16 - 1) = 7.5 GB.
    assert!(fix_has(&f, "cache_size=7.5G"), "{:?}", f.fix.commands);
    assert!(f.fix.files[0].content.contains("cacheSizeGB: 7.5"));
    // Near miss: the same cache with the host's 64 GB (37.5 %).
    passed(&baseline(), "wiredtiger.cache_above_memory_limit");
    let mut host = baseline();
    set_mongod(&mut host, &healthy_mongod());
    passed(&host, "wiredtiger.cache_above_memory_limit");
}

#[test]
fn config_fragments_render_as_file_content_in_every_format() {
    let mut rec = baseline();
    set_mongod(&mut rec, &healthy_mongod());
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .host_mem_limit_mb = Some(16_384);
    let r = report(&rec);
    let yaml = "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 7.5";
    // Terminal: flush left after a line naming the file, never as `$ `.
    let t = crate::report::terminal::render(&r, false);
    assert!(
        t.contains("In /etc/mongod.conf (set under the existing storage: section"),
        "{t}"
    );
    assert!(t.contains(yaml), "{t}");
    assert!(!t.contains("$ storage:"), "{t}");
    // Markdown and HTML: a yaml code block after the file's name.
    let m = crate::report::markdown::render(&r);
    assert!(m.contains(&format!("```yaml\n{yaml}\n```")), "{m}");
    assert!(m.contains("In `/etc/mongod.conf`"), "{m}");
    let h = crate::report::html::render(&r);
    assert!(h.contains("cacheSizeGB: 7.5"), "{h}");
    // JSON: fix.files with path, how, content, language.
    let j: serde_json::Value =
        serde_json::from_str(&crate::report::json::render(&r).unwrap()).unwrap();
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule_id"] == "wiredtiger.cache_above_memory_limit")
        .unwrap();
    assert_eq!(f["fix"]["files"][0]["path"], "/etc/mongod.conf");
    assert_eq!(f["fix"]["files"][0]["language"], "yaml");
    assert_eq!(f["fix"]["files"][0]["content"], yaml);
}

#[test]
fn cache_pressure_fires_at_either_eviction_trigger_read_from_config_string() {
    let mut rec = baseline();
    // 23 of 24 GiB filled (95.8 %): at the default eviction_trigger of 95.
    let full = with_figure(
        healthy_mongod(),
        "wiredTiger.cache.bytes currently in the cache",
        23 * GIB as i64,
        0,
    );
    set_mongod(&mut rec, &full);
    let f = fired(&rec, "wiredtiger.cache_pressure");
    assert_eq!(num(&f, "eviction_trigger"), 95.0);
    assert_eq!(num(&f, "eviction_dirty_trigger"), 20.0);
    // A configString that raises the trigger to 97: not reached.
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .wt_config_string = Some("eviction_trigger=97,eviction_target=90".into());
    passed(&rec, "wiredtiger.cache_pressure");
    // Dirty data at 21 % of the cache (the default dirty trigger is 20 %).
    let mut dirty = baseline();
    let figures = with_figure(
        healthy_mongod(),
        "wiredTiger.cache.tracked dirty bytes in the cache",
        (24 * GIB as i64) * 21 / 100,
        0,
    );
    set_mongod(&mut dirty, &figures);
    fired(&dirty, "wiredtiger.cache_pressure");
    // Balanced: a busy cache at 80 % (eviction_target), 8 % dirty.
    let mut balanced = baseline();
    let figures = with_figure(
        with_figure(
            healthy_mongod(),
            "wiredTiger.cache.bytes currently in the cache",
            (24 * GIB as i64) * 8 / 10,
            0,
        ),
        "wiredTiger.cache.tracked dirty bytes in the cache",
        (24 * GIB as i64) * 8 / 100,
        0,
    );
    set_mongod(&mut balanced, &figures);
    passed(&balanced, "wiredtiger.cache_pressure");
}

#[test]
fn checkpoint_duration_is_held_against_the_recorded_interval() {
    // 40 s checkpoints at mongod's default 60 s interval.
    let mut rec = baseline();
    let long = with_figure(
        healthy_mongod(),
        "wiredTiger.checkpoint.most recent time (msecs)",
        40_000,
        0,
    );
    set_mongod(&mut rec, &long);
    let f = fired(&rec, "wiredtiger.checkpoint_duration");
    assert_eq!(num(&f, "newest checkpoint"), 40_000.0);
    assert_eq!(num(&f, "checkpoint interval"), 60.0);
    // The same checkpoints with --syncdelay 120: a third of the interval.
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .sync_period_secs = Some(120.0);
    passed(&rec, "wiredtiger.checkpoint_duration");
    // Mean of the checkpoints completed during the recording: 5 of 3.5 s
    // each at a 5 s interval (the newest one was short).
    let mut mean = baseline();
    let figures = with_figure(
        with_figure(
            with_figure(
                healthy_mongod(),
                "wiredTiger.checkpoint.most recent time (msecs)",
                100,
                0,
            ),
            "wiredTiger.transaction.transaction checkpoints",
            0,
            1,
        ),
        "wiredTiger.transaction.transaction checkpoint total time (msecs)",
        0,
        3_500,
    );
    set_mongod(&mut mean, &figures);
    mean.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .sync_period_secs = Some(5.0);
    let f = fired(&mean, "wiredtiger.checkpoint_duration");
    assert_eq!(txt(&f, "mean checkpoint during the recording"), "3500");
    // Idle: short checkpoints.
    let mut idle = baseline();
    let figures = with_figure(
        healthy_mongod(),
        "wiredTiger.checkpoint.most recent time (msecs)",
        800,
        0,
    );
    set_mongod(&mut idle, &figures);
    passed(&idle, "wiredtiger.checkpoint_duration");
}
