//! One watched target (a mongod, or the host when there is none): its
//! probes, attached for its pid, its one-second slices, and the window they
//! fill. The slices are taken by the same [`Session`] as `mdiag record`'s,
//! and a full window becomes a [`Recording`] of its slices, so the rules see
//! exactly what `explain` of a recording of those seconds would see.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::duty::{self, Coverage, Duty};
use super::targets::{Found, HOST, TargetId};
use crate::probes::alloc::budget::Spent;
use crate::probes::{LaterPlan, ProbeConfig, ProbeError, Probes, alloc::schedule::WindowSchedule};
use crate::record::run::{RecordingFrame, Session};
use crate::recording::window::Mergeable as _;
use crate::recording::{Recording, Slice, Target};

const SLICE: Duration = Duration::from_secs(1);

/// The shares of the target's CPU the probes may cost.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// The allocator probes' ([`crate::probes::alloc::budget`]).
    pub alloc: f64,
    /// The per-event families' ([`super::duty`]).
    pub probes: f64,
}

/// A target with its probes attached.
pub struct Watch {
    pub id: TargetId,
    pub target: Option<Target>,
    session: Session,
    /// The probes' time zero.
    start: Instant,
    slice_start: Instant,
    next_slice: Instant,
    /// When the current window's first slice started.
    window_started: chrono::DateTime<Utc>,
    /// The allocator probes' cost readings at the last window.
    spent: Spent,
    /// Share of the target's CPU they cost in the last window that had one.
    pub alloc_share: Option<f64>,
    /// The per-event families' duty cycle (`None`: nothing to cycle).
    duty: Option<Duty>,
    /// What the duty cycle covered and spent in the last window.
    pub coverage: Option<Coverage>,
    /// Counters and histograms since the target was first watched.
    pub totals: super::totals::Totals,
    /// The build the target runs (GNU build-id, hex).
    pub build_id: Option<String>,
    /// The host's and every process's CPU time when the window started
    /// (the window's `HostFacts::cpu_usage`).
    cpu_since: Option<crate::host::CpuSnapshot>,
}

impl Watch {
    /// Attaches the `families` chosen for `found` (host-wide for `None`), with
    /// allocator windows of `alloc.window`, paced to `alloc_budget` of the
    /// target's CPU and never closer than `alloc.every` (see
    /// [`crate::probes::alloc::budget`]), the per-event families attached for the seconds
    /// `budgets.probes` pays for ([`super::duty`]), and, when `mongo` is
    /// given, mongod polled
    /// through the driver.
    pub fn attach(
        found: Option<&Found>,
        alloc: WindowSchedule,
        budgets: Budgets,
        families: crate::kit::family::Selection,
        sample_hz: u64,
        mongo: Option<crate::mongo::MongoPlan>,
    ) -> Result<Self, ProbeError> {
        let pid = found.map(|f| f.target.pid);
        let mut probes = Probes::attach(ProbeConfig {
            target_tgid: pid,
            families,
            // No stacks: the agent's windows keep none, and taking them
            // would cost the target (docs/agent.md).
            stacks: false,
            sample_hz,
        })?;
        if let Some(pid) = pid {
            probes.preload_symbols(pid);
        }
        // Calibrated before the clock starts: the first slice must not wait.
        probes.attach_later(&LaterPlan {
            target: pid,
            alloc,
            alloc_budget: Some(budgets.alloc),
        });
        let duty = probes.events_cyclable().then(|| Duty::new(budgets.probes));
        let start = probes.start_clock();
        let mut session = Session::new(probes, pid);
        session.mongo = mongo
            .as_ref()
            .map(|p| crate::mongo::MongoSession::start(p, start));
        Ok(Self {
            id: found.map_or_else(|| HOST.to_owned(), |f| f.id.clone()),
            target: found.map(|f| f.target.clone()),
            session,
            start,
            slice_start: start,
            next_slice: start + SLICE,
            window_started: Utc::now(),
            spent: Spent::default(),
            alloc_share: None,
            duty,
            coverage: None,
            totals: super::totals::Totals::default(),
            build_id: pid.and_then(super::targets::build_id),
            cpu_since: crate::host::CpuSnapshot::take(),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.target.as_ref().map(|t| t.pid)
    }

    /// Whether the target still runs (the host always does). Asked twice a
    /// second (the scan, /metrics): one `stat`.
    pub fn alive(&self) -> bool {
        self.pid().is_none_or(crate::target::exists)
    }

    /// The probes (status, drops, readers), for metrics.
    pub fn probes(&self) -> &Probes {
        &self.session.probes
    }

    /// When this watch next needs [`Self::tick`] (a slice or an allocator window).
    pub fn next_due(&mut self) -> Instant {
        let family = self.session.probes.next_due();
        family.map_or(self.next_slice, |a| a.min(self.next_slice))
    }

    /// Drains ring buffers, runs allocator windows, and takes the slice
    /// that is due, bounded to `top_n` rows per map; returns true when a
    /// slice was taken.
    pub fn tick(&mut self, top_n: usize) -> bool {
        self.session.poll(self.start);
        let now = Instant::now();
        if now < self.next_slice {
            return false;
        }
        if self.session.slices.is_empty() {
            self.window_started = Utc::now()
                - chrono::Duration::from_std(now - self.slice_start)
                    .unwrap_or_else(|_| chrono::Duration::zero());
        }
        self.session
            .take_slice(self.start, self.slice_start, now, false);
        if let Some(slice) = self.session.slices.last_mut() {
            slice.bound(top_n);
            self.totals.add(slice);
        }
        self.cycle_events(now - self.slice_start);
        self.slice_start = now;
        // A late tick (a slow attach elsewhere) skips ahead instead of
        // taking a burst of short slices.
        self.next_slice = (self.next_slice + SLICE).max(now + SLICE / 2);
        true
    }

    /// What the polled mongod said of itself, once read.
    pub fn mongod_info(&self) -> Option<&crate::recording::mongod::MongodInfo> {
        self.session.mongo.as_ref().and_then(|m| m.info())
    }

    /// The polled mongod's replica-set member state (`myState`: 1 primary,
    /// 2 secondary, ...), when it is a member and said: the number, as
    /// mongodb_exporter's `rs_state` label holds it, so the two join.
    pub fn rs_state(&self) -> Option<i64> {
        self.session.mongo.as_ref()?.repl_state()
    }

    /// The polled mongod's cluster id (`cl_id`), once read.
    pub fn cl_id(&self) -> Option<&str> {
        self.session.mongo.as_ref()?.cluster_id()
    }

    /// After a slice of length `len`: attaches or detaches the per-event
    /// families for the next one, as the duty cycle says.
    fn cycle_events(&mut self, len: Duration) {
        let Some(duty) = self.duty.as_mut() else {
            return;
        };
        let probes = &mut self.session.probes;
        let run_ns = crate::probes::cycle::cycled_families()
            .map(|f| probes.family_run_time(f).as_nanos() as u64)
            .sum();
        let pid = self.target.as_ref().map(|t| t.pid);
        let target_cpu_ns = match pid {
            Some(pid) => crate::target::cpu_ns(pid),
            None => crate::target::busy_cpu_ns(),
        };
        let Some(target_cpu_ns) = target_cpu_ns else {
            return;
        };
        let on = duty.after_slice(
            len,
            duty::Reading {
                target_cpu_ns,
                run_ns,
            },
        );
        if on {
            probes.resume_events();
        } else {
            probes.pause_events();
        }
    }

    /// Whether the per-event families' cost could be measured (BPF
    /// statistics on); `None` when there is no duty cycle.
    pub fn duty_measured(&self) -> Option<bool> {
        self.duty.as_ref().map(Duty::measured)
    }

    /// What mongod's polling had to say since the last call.
    pub fn take_news(&mut self) -> Vec<String> {
        self.session.take_mongo_news()
    }

    /// The seconds covered by the slices not yet in a window.
    pub fn pending(&self) -> Duration {
        Duration::from_millis(self.session.slices.iter().map(|s| s.duration_ms).sum())
    }

    /// The period between full allocator windows the budget allows now
    /// (`None`: the family is off).
    pub fn alloc_every(&self) -> Option<Duration> {
        self.session.probes.alloc_every()
    }

    /// Measures what the allocator probes cost since the last window, for
    /// `/metrics` (the windows are paced before they spend: see
    /// [`crate::probes::alloc::budget`]).
    fn measure_spent(&mut self, recording: &Recording) {
        let Some(o) = recording.alloc.as_ref().and_then(|a| a.overhead.as_ref()) else {
            return;
        };
        let now = Spent {
            probe_hits: o.probe_hits,
            pair_cost_ns: o.pair_cost_ns,
            target_cpu_ns: o.target_cpu_ns,
        };
        if let Some(share) = self.spent.share_until(&now) {
            self.alloc_share = Some(share);
        }
        self.spent = now;
    }

    /// The slices of the window that just ended, as a recording (host facts
    /// read now, the host's CPU time since the last window); the next window
    /// starts empty. What the allocator probes
    /// cost in it is kept for `/metrics`.
    pub fn take_window(&mut self, requested: Duration) -> Recording {
        let slices: Vec<Slice> = std::mem::take(&mut self.session.slices);
        let mongod = self
            .session
            .mongo
            .as_mut()
            .map(crate::mongo::MongoSession::take_window);
        let mut host = crate::host::collect(self.pid());
        host.cpu_usage = self
            .cpu_since
            .as_ref()
            .and_then(|c| c.usage_since(self.pid()));
        self.cpu_since = crate::host::CpuSnapshot::take();
        let recording = self.session.recording(
            slices,
            RecordingFrame {
                started_at: self.window_started,
                ended_at: Utc::now(),
                requested_duration_ms: requested.as_millis() as u64,
                stop_reason: "window".into(),
                host,
                target: self.target.clone(),
                checks: crate::recording::Checks::default(),
                mongod,
            },
        );
        self.measure_spent(&recording);
        if let Some(d) = self.duty.as_mut() {
            self.coverage = Some(d.take_window());
        }
        recording
    }
}
