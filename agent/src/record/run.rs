//! Running a [`RecordPlan`]: attach, write the recording's head, take a
//! slice every second until the duration ends, a signal arrives or the
//! target exits, streaming the slices to the file a frame every few seconds
//! (`recording/stream.rs`), then write its end.
//!
//! Memory stays flat whatever the duration: slices leave memory for the file
//! within [`FLUSH_EVERY`]; what crosses slices is bounded (the rseq calls
//! kept for the ownership verdict, the checks), as are the kernel maps
//! (fixed size, exited threads pruned every second). A `kill -9` leaves a
//! file that reads up to its last frame. On every exit path the probes are
//! dropped, which detaches them, and a spawned target is stopped.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use chrono::Utc;
use tokio::signal::unix::{SignalKind, signal};

use super::{PlannedTarget, RecordError, RecordPlan, progress::Progress};
use crate::offload::{Offloaded, Polled};
use crate::symbols::{AllocatorKind, TargetCode};
use crate::{
    host,
    probes::Probes,
    recording::{
        self, Checks, FORMAT_NAME, FORMAT_VERSION, Recording, RseqCall, Slice, SoftirqSlice,
        StreamWriter, Target,
    },
    spawn::SpawnedChild,
    target,
};

/// How long a spawned target gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
const SLICE: Duration = Duration::from_secs(1);
/// How long the end of a recording waits for the target's code to be read.
const CODE_WAIT: Duration = Duration::from_secs(30);
/// How often the target's liveness is checked between slices.
const POLL: Duration = Duration::from_millis(50);
/// How often the slices taken go to the file, as one frame written and
/// synced: what a crash can lose.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// rseq(2) calls kept for the ownership verdict (one or two per thread
/// start; the first ones say who registers).
const RSEQ_CALLS_KEPT: usize = 4096;

/// What `record` produced.
pub struct RecordOutcome {
    pub path: PathBuf,
    pub recording: Recording,
    /// Set when the file could not go to the planned path and went elsewhere.
    pub fallback_reason: Option<String>,
}

/// The probes attached and the target started (or picked), with the
/// recording's clock.
type Attached = (Probes, Option<Target>, Option<SpawnedChild>, Clock);

/// Attaches the probes first, then starts (or picks) the target.
fn attach(plan: &RecordPlan) -> Result<Attached, RecordError> {
    // The recording's clock starts once the probes see the target: at attach, or for a spawned
    // target at its release, so the recording covers its whole life.
    Ok(match &plan.target {
        PlannedTarget::HostWide => {
            let mut probes = Probes::attach(plan.probe_config(None))?;
            probes.attach_later(&plan.later(None));
            let clock = Clock::start(&mut probes, None);
            (probes, None, None, clock)
        }
        PlannedTarget::Existing(t) => {
            let mut probes = Probes::attach(plan.probe_config(Some(t.pid)))?;
            // Symbols read and the allocator probe calibrated before the
            // clock starts: the first slice must not wait for either.
            probes.preload_symbols(t.pid);
            probes.attach_later(&plan.later(Some(t.pid)));
            let clock = Clock::start(&mut probes, Some(t.pid));
            (probes, Some(t.clone()), None, clock)
        }
        PlannedTarget::Spawn(argv) => attach_spawned(argv, plan)?,
    })
}

/// Spawns the target held before exec, attaches the probes to it, then
/// releases it: the recording covers its whole life.
fn attach_spawned(argv: &[String], plan: &RecordPlan) -> Result<Attached, RecordError> {
    let exe = argv
        .first()
        .and_then(|p| crate::symbols::program::executable_path(p));
    let held = crate::spawn::spawn_held(argv)?;
    let pid = held.pid();
    let mut probes = match Probes::attach(plan.probe_config(Some(pid))) {
        Ok(p) => p,
        Err(e) => {
            held.abandon();
            return Err(e.into());
        }
    };
    // Uprobes wait on the files the child maps at start, and the
    // allocator probe is calibrated, before the child runs at all.
    if let Some(exe) = &exe {
        probes.attach_before_exec(pid, exe);
    }
    probes.attach_later(&plan.later(Some(pid)));
    let clock = Clock::start(&mut probes, Some(pid));
    let child = held.release()?;
    let t = target::describe(pid, "spawned").unwrap_or_else(|_| Target {
        pid,
        comm: argv.first().cloned().unwrap_or_default(),
        exe: None,
        cmdline: argv.to_vec(),
        how: "spawned".into(),
        exit_code: None,
    });
    Ok((probes, Some(t), Some(child), clock))
}

/// Runs the plan. Must be called outside any async runtime.
pub fn run(plan: &RecordPlan) -> Result<RecordOutcome, RecordError> {
    let (probes, mut target, mut child, clock) = attach(plan)?;
    tracing::info!(target = ?target.as_ref().map(|t| t.pid), "probes attached");
    // Integration tests wait for this line before starting their workload,
    // and the VM matrix reads the kernel's switch count at it: it comes
    // right after the clock starts, before the host facts are read.
    crate::messages::note(format_args!(
        "probes attached, recording {} to {}",
        describe_target(target.as_ref()),
        plan.output.display()
    ));
    if let Some(m) = &plan.mongo {
        crate::messages::note(format_args!(
            "polling mongod at {} every second{}",
            m.conn.redacted(),
            if m.local {
                ""
            } else {
                " (remote: polling only)"
            }
        ));
    }

    // Host facts once the target is known (a spawned one has exec'd by now).
    let mut host = host::collect(target.as_ref().map(|t| t.pid));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RecordError::Runtime)?;
    let mut session = Session::new(probes, target.as_ref().map(|t| t.pid));
    session.mongo_plan = plan.mongo.clone();
    let started_at = clock.utc;
    let head = session.recording(
        Vec::new(),
        RecordingFrame {
            started_at,
            ended_at: started_at,
            requested_duration_ms: plan.duration.as_millis() as u64,
            stop_reason: "recording".into(),
            host: host.clone(),
            target: target.clone(),
            checks: Checks::default(),
            mongod: None,
        },
    );
    let (mut out, fallback_reason) = create_output(&head, &plan.output)?;
    drop(head);
    let outcome = rt.block_on(session.record(plan, &clock, child.as_mut(), &mut out));
    host.cpu_usage = clock
        .cpu
        .as_ref()
        .and_then(|c| c.usage_since(target.as_ref().map(|t| t.pid)));
    session.finish_code();
    let ended_at = Utc::now();
    // A target that was just started opens its data files later: look again
    // while it still runs.
    if let Some(t) = &target
        && host.db_path.as_ref().is_some_and(|d| d.path.is_none())
    {
        host.db_path = Some(host::db_path_facts(t.pid));
    }

    if let Some(child) = child.as_mut() {
        let exited = child.try_exit_code();
        if let Some(t) = target.as_mut() {
            t.exit_code = exited;
        }
        child.stop(STOP_GRACE);
    }
    let mongod = session.mongo.take().map(crate::mongo::MongoSession::finish);
    let checks = std::mem::take(&mut session.checks);
    let end = session.recording(
        Vec::new(),
        RecordingFrame {
            started_at,
            ended_at,
            requested_duration_ms: plan.duration.as_millis() as u64,
            stop_reason: outcome,
            host,
            target,
            checks,
            mongod,
        },
    );
    drop(session); // detach now, before writing
    let path = out.path().to_owned();
    let path = out.finish(&end).map_err(|e| RecordError::Unfinished {
        path,
        why: e.to_string(),
    })?;
    drop(end);
    // The report is made from the file, read as `explain` reads it.
    let recording = recording::read_file(&path)?;
    Ok(RecordOutcome {
        path,
        recording,
        fallback_reason,
    })
}

/// Creates the recording's file at `path` with its head; if the planned
/// place fails, in the temp dir (with why).
fn create_output(
    head: &Recording,
    path: &std::path::Path,
) -> Result<(StreamWriter, Option<String>), RecordError> {
    match StreamWriter::create(path, head) {
        Ok(w) => Ok((w, None)),
        Err(first) => {
            let name = path
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("mdiag-recording.mdiag"));
            let fallback = std::env::temp_dir().join(name);
            let w = StreamWriter::create(&fallback, head)?;
            crate::messages::note(format_args!(
                "recording to {} instead ({first})",
                fallback.display()
            ));
            Ok((w, Some(first.to_string())))
        }
    }
}

/// What a recording holds beside the session's slices and probes.
pub(crate) struct RecordingFrame {
    pub started_at: chrono::DateTime<Utc>,
    pub ended_at: chrono::DateTime<Utc>,
    pub requested_duration_ms: u64,
    pub stop_reason: String,
    pub host: crate::recording::HostFacts,
    pub target: Option<Target>,
    pub checks: Checks,
    pub mongod: Option<crate::recording::mongod::MongodRecording>,
}

/// When the recording starts, on both clocks, with the kernel's own
/// switch counters at that moment (the ground truth `checks` compares with).
struct Clock {
    start: Instant,
    utc: chrono::DateTime<Utc>,
    proc_stat_ctxt: Option<u64>,
    target_ctxt: Option<(u64, u64)>,
    /// The host's and every process's CPU time (`HostFacts::cpu_usage`).
    cpu: Option<host::CpuSnapshot>,
}

impl Clock {
    /// Starts the recording now: every family's slices and the kernel's own
    /// counters (`checks`) from this instant.
    fn start(probes: &mut Probes, target: Option<u32>) -> Self {
        let start = probes.start_clock();
        // The same instant on the wall clock.
        let utc = Utc::now()
            - chrono::Duration::from_std(start.elapsed())
                .unwrap_or_else(|_| chrono::Duration::zero());
        Self {
            start,
            utc,
            proc_stat_ctxt: host::proc_stat_ctxt(),
            target_ctxt: target.and_then(target::ctxt_switches),
            cpu: host::CpuSnapshot::take(),
        }
    }
}

fn describe_target(t: Option<&Target>) -> String {
    match t {
        Some(t) => format!("pid {} ({})", t.pid, t.comm),
        None => "host-wide (no target process)".into(),
    }
}

pub(crate) struct Session {
    pub(crate) probes: Probes,
    target_pid: Option<u32>,
    pub(crate) slices: Vec<Slice>,
    checks: Checks,
    /// rseq(2) calls of the slices taken (at most [`RSEQ_CALLS_KEPT`]).
    rseq_calls: Vec<RseqCall>,
    /// Per-thread time read past a slice's cut, for the next slice.
    carry: super::fit::Carry,
    /// The target's code and glibc's `__rseq_size`, read once while it runs.
    target_code: Option<(TargetCode, Option<u32>)>,
    /// When the target's code was last tried (at most once a second).
    code_tried: Option<Instant>,
    /// The target's code being read, off the loop's thread.
    code_job: Option<Offloaded<CodeRead>>,
    /// The mongod to poll, and the polling once started.
    pub(crate) mongo_plan: Option<crate::mongo::MongoPlan>,
    pub(crate) mongo: Option<crate::mongo::MongoSession>,
}

impl Session {
    pub(crate) fn new(probes: Probes, target_pid: Option<u32>) -> Self {
        Self {
            probes,
            target_pid,
            slices: Vec::new(),
            checks: Checks::default(),
            rseq_calls: Vec::new(),
            carry: super::fit::Carry::default(),
            target_code: None,
            code_tried: None,
            code_job: None,
            mongo_plan: None,
            mongo: None,
        }
    }

    /// What mongod's polling had to say since the last call (it started
    /// or stopped answering).
    pub(crate) fn take_mongo_news(&mut self) -> Vec<String> {
        self.mongo
            .as_mut()
            .map(crate::mongo::MongoSession::take_news)
            .unwrap_or_default()
    }

    /// What runs between slices (every 50 ms): drains the ring buffers
    /// (rseq registrations, checkpoints) while their callers still exist,
    /// opens or closes an allocator window when due, retries WiredTiger when
    /// the target's mappings changed, and reads the target's code once.
    /// `start` is the recording's time zero.
    pub(crate) fn poll(&mut self, start: Instant) {
        self.probes.poll(Instant::now(), start, self.target_pid);
        self.analyse_target();
    }

    /// A recording of `slices` (taken by this session) with what the probes
    /// know beside them: every family's status, the target's code and rseq
    /// ownership seen in the slices taken so far, the allocator record,
    /// kernel stacks.
    pub(crate) fn recording(&mut self, slices: Vec<Slice>, frame: RecordingFrame) -> Recording {
        let rseq = self
            .target_code
            .as_ref()
            .map(|(code, size)| crate::rseq::ownership_with(code, *size, &self.rseq_calls));
        let mut recording = Recording {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            mdiag_version: env!("CARGO_PKG_VERSION").into(),
            started_at: frame.started_at,
            ended_at: frame.ended_at,
            requested_duration_ms: frame.requested_duration_ms,
            stop_reason: frame.stop_reason,
            host: frame.host,
            target: frame.target,
            probes: self.probes.status().to_vec(),
            slices,
            checks: frame.checks,
            target_code: self.target_code.as_ref().map(|(code, _)| code.clone()),
            rseq,
            alloc: None,
            kernel_stacks: Vec::new(),
            cpu_profile: None,
            offcpu_profile: None,
            offcpu_sampled_one_in: 0,
            mongod: frame.mongod,
        };
        self.probes.fill_recording(&mut recording);
        recording
    }

    /// Reads the target's code once it is running (a spawned target maps its
    /// libraries only after exec), on a thread of its own ([`Offloaded`]:
    /// mongod's symbol table would hold the loop for seconds); retried at
    /// most once a second until it is recognisable.
    fn analyse_target(&mut self) {
        let Some(pid) = self.target_pid else { return };
        if self.target_code.is_some() {
            return;
        }
        if let Some(job) = &self.code_job {
            match job.poll() {
                Polled::Pending => return,
                Polled::Ready(Ok(found)) => self.target_code = Some(found),
                Polled::Ready(Err(why)) => tracing::debug!(pid, "target code: {why}"),
                Polled::Lost => tracing::debug!(pid, "target code: the reading thread ended"),
            }
            self.code_job = None;
            return;
        }
        if self.code_tried.is_some_and(|t| t.elapsed() < SLICE) {
            return;
        }
        self.code_tried = Some(Instant::now());
        match Offloaded::start("mdiag-symbols", move || read_code(pid)) {
            Ok(job) => self.code_job = Some(job),
            Err(e) => tracing::debug!(pid, "cannot start a thread to read the target's code: {e}"),
        }
    }

    /// Takes the target's code from a reading still under way when the
    /// recording ended (a short one), waiting for it at most [`CODE_WAIT`].
    pub(crate) fn finish_code(&mut self) {
        if let Some(job) = self.code_job.take()
            && let Polled::Ready(Ok(found)) = job.wait(CODE_WAIT)
        {
            self.target_code = Some(found);
        }
    }

    /// The recording loop; returns the stop reason.
    async fn record(
        &mut self,
        plan: &RecordPlan,
        clock: &Clock,
        mut child: Option<&mut SpawnedChild>,
        out: &mut StreamWriter,
    ) -> String {
        let start = clock.start;
        let ctxt_start = clock.proc_stat_ctxt;
        let target_start = clock.target_ctxt;
        let progress = Progress::new(
            plan.duration,
            plan.progress,
            &describe_target_short(self.target_pid),
        );
        let (mut sigint, mut sigterm) = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(i), Ok(t)) => (Some(i), Some(t)),
            _ => (None, None),
        };
        self.mongo = self
            .mongo_plan
            .as_ref()
            .map(|p| crate::mongo::MongoSession::start(p, start));
        let deadline = start + plan.duration;
        let mut next_slice = start + SLICE;
        let mut slice_start = start;
        let mut events = 0u64;
        let mut target_end = target_start;
        let mut flushed = start;
        let mut write_failed = false;
        let reason = loop {
            let mut wake = next_slice.min(deadline).min(Instant::now() + POLL);
            if let Some(due) = self.probes.next_due() {
                wake = wake.min(due.max(Instant::now()));
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                Some(_) = recv(&mut sigint) => break "interrupted (SIGINT)".to_owned(),
                Some(_) = recv(&mut sigterm) => break "interrupted (SIGTERM)".to_owned(),
            }
            self.poll(start);
            let now = Instant::now();
            if let Some(code) = child.as_deref_mut().and_then(SpawnedChild::try_exit_code) {
                break format!("target exited (code {code})");
            }
            if let Some(pid) = self.target_pid {
                match target::ctxt_switches(pid) {
                    Some(c) => target_end = Some(c),
                    None => break "target exited".to_owned(),
                }
            }
            if now >= deadline {
                break "duration".to_owned();
            }
            if now >= next_slice {
                // The slice ends where the families are read: right now.
                let cut = Instant::now();
                events += self.take_slice(start, slice_start, cut, false);
                slice_start = cut;
                next_slice += SLICE;
                let last = self.slices.last().and_then(|s| s.sched.as_ref());
                progress.update(cut - start, last, events);
                for line in self.take_mongo_news() {
                    progress.note(&line);
                }
                let due = cut.duration_since(flushed) >= FLUSH_EVERY;
                if let Err(e) = self.stream_out(out, due) {
                    write_failed = true;
                    break format!("stopped: {e}");
                }
                if due {
                    flushed = cut;
                }
            }
        };
        self.probes.finish(start);
        let now = Instant::now();
        if now > slice_start || (self.slices.is_empty() && out.slices_written() == 0) {
            self.take_slice(start, slice_start, now, true);
        }
        if !write_failed && let Err(e) = self.stream_out(out, true) {
            progress.note(&format!("the last slices are lost: {e}"));
        }
        for line in self.take_mongo_news() {
            progress.note(&line);
        }
        progress.finish();
        self.checks.proc_stat_ctxt = ctxt_start
            .zip(host::proc_stat_ctxt())
            .map(|(a, b)| b.saturating_sub(a));
        if let (Some((v0, i0)), Some((v1, i1))) = (target_start, target_end) {
            self.checks.target_voluntary_ctxt_switches = Some(v1.saturating_sub(v0));
            self.checks.target_nonvoluntary_ctxt_switches = Some(i1.saturating_sub(i0));
        }
        reason
    }

    /// Moves the slices taken (and mongod's TCMalloc detail) to the file's
    /// next frame, and writes that frame when `flush`.
    fn stream_out(
        &mut self,
        out: &mut StreamWriter,
        flush: bool,
    ) -> Result<(), recording::RecordingError> {
        for slice in std::mem::take(&mut self.slices) {
            out.push_slice(&slice)?;
        }
        if let Some(m) = self.mongo.as_mut() {
            for d in m.take_details() {
                out.push_detail(&d)?;
            }
        }
        if flush {
            out.flush()?;
        }
        Ok(())
    }

    /// Appends the slice [from, to); returns the number of events in it.
    /// The `last` slice also lists the checkpoints still running, and ends
    /// once its families are read, not at `to`: what they count up to their
    /// read (an off-CPU wait that ends then, one still open counted up to
    /// then) is then inside the recording, so no thread's time exceeds it.
    /// Both ends are whole milliseconds from `start`, so the slices'
    /// durations add up to the recording's length with no loss per slice.
    pub(crate) fn take_slice(
        &mut self,
        start: Instant,
        from: Instant,
        to: Instant,
        last: bool,
    ) -> u64 {
        // The families first (in the order of `Probes::readers`), then mongod.
        let mut slice = self.probes.take_slice(last);
        let to = if last { to.max(Instant::now()) } else { to };
        slice.start_ms = (from - start).as_millis() as u64;
        slice.duration_ms = ((to - start).as_millis() as u64).saturating_sub(slice.start_ms);
        // Time the families read past the cut goes to the next slice.
        self.carry.fit(&mut slice, last);
        slice.mongod = self.mongo.as_mut().map(|m| m.slice(to));
        let events = slice
            .sched
            .as_ref()
            .map_or(0, |s| s.switches_total + s.wakeups)
            + slice.softirq.as_ref().map_or(0, SoftirqSlice::events)
            + slice
                .syscalls
                .as_ref()
                .map_or(0, |s| s.calls.iter().map(|c| c.count).sum::<u64>());
        let room = RSEQ_CALLS_KEPT.saturating_sub(self.rseq_calls.len());
        if let Some(sys) = &slice.syscalls {
            self.rseq_calls.extend(sys.rseq.iter().take(room).cloned());
        }
        self.slices.push(slice);
        // The symbol pages the families' lookups read leave the resident set.
        crate::symbols::ObjectCache::global().release_pages();
        events
    }
}

/// The target's code and glibc's `__rseq_size`, or why not (yet).
type CodeRead = Result<(TargetCode, Option<u32>), String>;

/// Reads the code of `pid` (see [`Session::analyse_target`]).
fn read_code(pid: u32) -> CodeRead {
    match TargetCode::of(pid) {
        Ok(code)
            if code.allocator.kind != AllocatorKind::Unknown || code.rseq.rseq_size.is_some() =>
        {
            let size = crate::rseq::glibc_rseq_size(pid, &code);
            Ok((code, size))
        }
        Ok(_) => Err("not recognisable yet".into()),
        Err(e) => Err(format!("not readable yet: {e}")),
    }
}

fn describe_target_short(pid: Option<u32>) -> String {
    pid.map_or_else(|| "host-wide".to_owned(), |p| format!("pid {p}"))
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
