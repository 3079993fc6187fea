//! The agent's main loop: targets found and re-attached, slices taken,
//! windows evaluated, findings' changes logged, metrics published, flight
//! recordings saved. Runs on one thread (the metrics endpoint has its own).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::outbox::{Outbox, host_facts};
use super::{
    AgentError,
    config::AgentConfig,
    findings::{Findings, log_change, observations},
    flight::{Flight, FlightConfig},
    lifecycle::State,
    notify::Notifier,
    restarts::{Decision, Restarts},
    serve::{self, Published},
    skips::{SkipReason, Skips},
    targets::{self, Found, HOST},
    view,
    watch::{Budgets, Watch},
    web_config::{WebConfig, exposure},
};
use crate::cli::AgentArgs;
use crate::messages;
use crate::mongo::{Connection, MongoPlan};
use crate::probes::alloc::schedule::WindowSchedule;
use crate::rules::RuleSet;

/// How often the process table is scanned for targets (a restarted
/// mongod is re-attached within a scan and an attach).
const SCAN: Duration = Duration::from_secs(1);
/// How long after a failed attach the same target is tried again.
const RETRY: Duration = Duration::from_secs(30);
/// A target attached before it listened is looked at again this often...
const LISTEN_RECHECK: Duration = Duration::from_secs(5);
/// ... for this long after it was attached (a mongod recovering a large
/// journal can take minutes before it opens its port).
const LISTEN_WATCH: Duration = Duration::from_secs(600);
/// Ring buffers are drained this often between slices (an open allocator
/// window asks for its own, closer wake-ups, and so does a held-back
/// restart's scan). 250 ms: the rings hold far more than that of events (rseq's
/// 64 KiB ring holds 900 registrations, a new thread each; checkpoints
/// come minutes apart), and each wake-up costs the agent a context switch
/// and a pass over every probe: at 100 ms the wake-ups were a tenth of its
/// CPU under load.
const POLL: Duration = Duration::from_millis(250);

/// Runs the agent until SIGTERM or SIGINT. Must be called outside any async runtime.
pub fn run(args: &AgentArgs) -> Result<(), AgentError> {
    // Every line on stderr from now on is the agent's (journald keeps them).
    messages::speak_as_agent();
    crate::privileges::check()?;
    for lost in crate::privileges::optional_missing() {
        messages::note(format_args!("running without {lost}"));
    }
    let config_file = super::config_path(args.config.as_deref());
    let mut config =
        AgentConfig::load(config_file.as_deref(), std::path::Path::new("/nonexistent"))?;
    flag_over_file(&mut config, args.web_config_file.as_ref());
    let conn = mongo_conn(args, config_file.as_deref())?;
    let rules = match &args.rules {
        Some(dir) => RuleSet::load_dir(dir)?,
        None => RuleSet::builtin()?,
    };
    std::fs::create_dir_all(&config.state_dir).map_err(|source| AgentError::StateDir {
        path: config.state_dir.clone(),
        source,
    })?;
    let outbox = fleet_outbox(&config, config_file.as_deref(), conn.as_ref())?;
    let web = match &config.web_config_file {
        Some(path) => Some(WebConfig::load(path)?),
        None => None,
    };
    let published = Arc::new(Published::default());
    let addr = serve::start(config.listen, published.clone(), web.as_ref())?;
    let scheme = if web.as_ref().is_some_and(|w| w.tls.is_some()) {
        "https"
    } else {
        "http"
    };
    let auth = web
        .as_ref()
        .filter(|w| w.authenticates())
        .map_or("", |_| " (authenticated)");
    messages::note(format_args!(
        "serving metrics at {scheme}://{addr}/metrics{auth}"
    ));
    if let Some(warning) = exposure(config.listen, web.as_ref()) {
        tracing::warn!("{warning}");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AgentError::Runtime)?;
    let mut agent = Agent::new(config, config_file, conn, rules, published, args);
    agent.outbox = outbox;
    rt.block_on(agent.run());
    Ok(())
}

/// `--web.config.file` over `[agent] web_config_file`.
fn flag_over_file(config: &mut AgentConfig, flag: Option<&PathBuf>) {
    if let Some(f) = flag {
        config.web_config_file = Some(f.clone());
    }
}

/// The fleet writer when the file has a `[fleet]` table: refused when it
/// names a mongod this agent monitors (unless allowed), else its spool
/// opened and its sender started.
fn fleet_outbox(
    config: &AgentConfig,
    config_file: Option<&std::path::Path>,
    conn: Option<&Connection>,
) -> Result<Option<Outbox>, AgentError> {
    let Some(path) = config_file else {
        return Ok(None);
    };
    let Some(fleet) = crate::fleet::config::FleetConfig::load(path)? else {
        return Ok(None);
    };
    // Only ports of the agent's own network namespace: the store's local
    // address is the agent's (a pod's mongod on the same port is another).
    let ports: Vec<u16> = targets::scan(&config.processes)
        .into_iter()
        .filter(|&pid| crate::mongo::sockdiag::same_net_namespace(pid))
        .flat_map(crate::mongo::port::ports_of)
        .collect();
    fleet.check_not_monitored(path, conn, &ports)?;
    messages::note(format_args!(
        "writing findings to the fleet store {} (database {}, host {}); spool in {}",
        fleet.redacted_uri(),
        fleet.database,
        fleet.host,
        config.state_dir.join("spool").display()
    ));
    let f = crate::fleet::sender::Fleet::start(fleet, &config.state_dir, |line| {
        messages::note(line);
    })?;
    Ok(Some(Outbox::new(f)))
}

fn mongo_conn(
    args: &AgentArgs,
    config_file: Option<&std::path::Path>,
) -> Result<Option<Connection>, AgentError> {
    Ok(crate::mongo::conn::resolve(
        None,
        std::env::var(crate::mongo::conn::ENV_URI).ok(),
        config_file,
        std::path::Path::new(crate::mongo::conn::DEFAULT_CONFIG),
    )
    .map(|c| c.filter(|_| !args.no_mongo))?)
}

struct Agent {
    config: AgentConfig,
    config_file: Option<PathBuf>,
    conn: Option<Connection>,
    rules: RuleSet,
    published: Arc<Published>,
    watches: Vec<Watch>,
    /// Targets that were watched and are gone, with when their last window
    /// would have ended (their findings get a "no data" window each period).
    gone: BTreeMap<String, Instant>,
    /// Targets whose attach failed, and when to try again.
    failed: BTreeMap<String, Instant>,
    /// Targets attached before they listened (by pid): what was found,
    /// when, and when to look at their sockets again.
    unlistened: BTreeMap<u32, (Found, Instant, Instant)>,
    /// Gone targets awaited, and processes held back as their restart.
    restarts: Restarts,
    /// Matching processes not watched, and why.
    skips: Skips,
    /// The host's network namespace (targets outside it are scoped).
    host_ns: Option<u64>,
    /// Targets told they are not polled (once per id).
    unpolled: std::collections::BTreeSet<String>,
    findings: Findings,
    flight: Flight,
    windows: u64,
    last_scan: Option<Instant>,
    last_reports: BTreeMap<String, crate::report::Report>,
    /// Changes of this loop turn, logged once the metrics show them.
    unlogged: Vec<super::findings::Change>,
    /// BPF run-time statistics, on while this is held (closing it turns
    /// them off again: the host is left as found). `None`: refused.
    stats: Option<std::os::fd::OwnedFd>,
    /// BPF run time of the watches already detached.
    bpf_run_done: Duration,
    /// The fleet store's writer, when `[fleet]` is configured.
    outbox: Option<Outbox>,
    /// A window was evaluated in this loop turn (the host doc is sent).
    evaluated: bool,
    /// `--web.config.file`, which SIGHUP keeps over the file's key.
    web_flag: Option<PathBuf>,
}

impl Agent {
    fn new(
        config: AgentConfig,
        config_file: Option<PathBuf>,
        conn: Option<Connection>,
        rules: RuleSet,
        published: Arc<Published>,
        args: &AgentArgs,
    ) -> Self {
        let flight = Flight::new(flight_config(&config));
        Self {
            config,
            config_file,
            conn,
            rules,
            published,
            watches: Vec::new(),
            gone: BTreeMap::new(),
            failed: BTreeMap::new(),
            unlistened: BTreeMap::new(),
            restarts: Restarts::default(),
            skips: Skips::default(),
            host_ns: super::netns::host_net_ns(),
            unpolled: std::collections::BTreeSet::new(),
            findings: Findings::default(),
            flight,
            windows: 0,
            last_scan: None,
            last_reports: BTreeMap::new(),
            unlogged: Vec::new(),
            stats: aya::sys::enable_stats(aya::sys::Stats::RunTime)
                .map_err(|e| tracing::info!("BPF run-time statistics stay off: {e}"))
                .ok(),
            bpf_run_done: Duration::ZERO,
            outbox: None,
            evaluated: false,
            web_flag: args.web_config_file.clone(),
        }
    }

    async fn run(&mut self) {
        let mut stop_int = signal(SignalKind::interrupt()).ok();
        let mut stop_term = signal(SignalKind::terminate()).ok();
        let mut hup = signal(SignalKind::hangup()).ok();
        let mut usr1 = signal(SignalKind::user_defined1()).ok();
        let mut next_publish = Instant::now();
        let mut systemd = Notifier::from_env();
        let why = loop {
            let every = if self.restarts.holding() {
                super::restarts::HELD_SCAN
            } else {
                SCAN
            };
            if self.last_scan.is_none_or(|t| t.elapsed() >= every) {
                self.scan();
            }
            let mut wake = Instant::now() + POLL;
            // A held-back restart is looked at on time (a scan is otherwise
            // at most one POLL late, as /metrics is).
            if let Some(t) = self.last_scan.filter(|_| every < POLL) {
                wake = wake.min(t + every);
            }
            for w in &mut self.watches {
                wake = wake.min(w.next_due());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                Some(_) = recv(&mut stop_int) => break "SIGINT",
                Some(_) = recv(&mut stop_term) => break "SIGTERM",
                Some(_) = recv(&mut hup) => self.reload(),
                Some(_) = recv(&mut usr1) => self.save_all_now(),
            }
            let mut due = Vec::new();
            for (i, w) in self.watches.iter_mut().enumerate() {
                if w.tick(self.config.top_n) && w.pending() >= self.config.window {
                    due.push(i);
                }
                for line in w.take_news() {
                    messages::note(format_args!("{}: {line}", w.id));
                }
            }
            for i in due {
                self.evaluate(i);
            }
            self.windows_of_gone();
            for path in self.flight.poll(false) {
                messages::note(format_args!("flight recording saved: {}", path.display()));
            }
            // A change is on /metrics before the line that announces it.
            if Instant::now() >= next_publish || !self.unlogged.is_empty() {
                self.publish();
                next_publish = Instant::now() + Duration::from_secs(1);
            }
            self.send_to_fleet();
            // Logged once published: what a line announces, /metrics shows.
            for c in self.unlogged.drain(..) {
                let severity = self
                    .rules
                    .rules()
                    .iter()
                    .find(|r| r.id() == c.rule)
                    .map(|r| r.def.severity);
                log_change(&c, severity);
            }
            // The turn ended: the first one says the agent is ready, each
            // feeds the watchdog when due.
            systemd.turn(Instant::now(), || self.status());
        };
        systemd.stopping(why);
        messages::note(format_args!("stopping ({why}): detaching probes"));
        self.watches.clear();
        for path in self.flight.poll(true) {
            messages::note(format_args!("flight recording saved: {}", path.display()));
        }
        self.publish();
        messages::note("stopped");
    }

    /// Finds targets, re-attaches restarted ones, drops the ones gone, and
    /// keeps one host-wide watch when there is no target.
    fn scan(&mut self) {
        self.last_scan = Some(Instant::now());
        let pids = targets::scan(&self.config.processes);
        // Gone, or restarted (another pid under the same id): detach.
        let mut i = 0;
        while i < self.watches.len() {
            let w = &self.watches[i];
            let still = w.id == HOST || (w.alive() && w.pid().is_some_and(|p| pids.contains(&p)));
            if still {
                i += 1;
                continue;
            }
            let w = self.watches.remove(i);
            self.bpf_run_done += w.probes().run_time();
            if let Some(t) = &w.target {
                self.restarts.went(&w.id, t, Instant::now());
            }
            messages::note(format_args!(
                "{} (pid {}) is gone: its findings go stale until it is back",
                w.id,
                w.pid().unwrap_or(0)
            ));
            self.gone
                .insert(w.id.clone(), Instant::now() + self.config.window);
        }
        self.relisten();
        self.restarts.retain(Instant::now(), &pids);
        let mut held = false;
        for pid in pids {
            if self.watches.iter().any(|w| w.pid() == Some(pid)) {
                continue;
            }
            let Some(found) = targets::describe(pid, self.host_ns) else {
                // Exited meanwhile: nothing to watch. Still there: unreadable.
                if crate::target::exists(pid) {
                    self.skips
                        .skip(pid, &format!("process {pid}"), SkipReason::Unreadable);
                }
                continue;
            };
            let found = match self.restarts.decide(&found, Instant::now()) {
                Decision::Attach => found,
                Decision::Resume(id) => {
                    messages::note(format_args!(
                        "{} (pid {pid}) runs what {id} ran, with the same command line: \
                         watched as {id} while it starts",
                        found.target.comm
                    ));
                    Found { id, ..found }
                }
                Decision::Hold => {
                    held = true;
                    continue;
                }
                Decision::HoldFirst(like) => {
                    held = true;
                    messages::note(format_args!(
                        "{} (pid {pid}) does not listen yet: taken for {like} restarting, \
                         attached once it listens (at most {:?} from now)",
                        found.target.comm,
                        super::restarts::HOLD
                    ));
                    continue;
                }
            };
            if self.watches.iter().any(|w| w.id == found.id) {
                self.skips.skip(pid, &found.id, SkipReason::DuplicateId);
                continue;
            }
            if !self.attach(Some(&found)) {
                self.skips.skip(pid, &found.id, SkipReason::AttachFailed);
            }
        }
        for line in self.skips.end_scan() {
            messages::note(&line);
        }
        // The host is watched on its own only while no target is (a
        // target's probes cover the host-wide families too), nor about to
        // be: attaching it while a restart is held back, or just after a
        // target went, would delay that target's attach by the host's.
        let targets = self.watches.iter().any(|w| w.id != HOST);
        let host = self.watches.iter().position(|w| w.id == HOST);
        match (targets, host) {
            (true, Some(pos)) => {
                let w = self.watches.remove(pos);
                self.bpf_run_done += w.probes().run_time();
            }
            (false, None) if !held && !self.restarts.awaiting(Instant::now()) => {
                self.attach(None);
            }
            _ => {}
        }
    }

    /// A target attached before it listened is known by its port once it
    /// listens: re-attached under that id (so that mongod is polled when the
    /// URI names the port), its findings carried over.
    fn relisten(&mut self) {
        let now = Instant::now();
        let watched: Vec<u32> = self.watches.iter().filter_map(Watch::pid).collect();
        self.unlistened
            .retain(|pid, (_, since, _)| watched.contains(pid) && now - *since < LISTEN_WATCH);
        let mut ready = Vec::new();
        for (pid, (found, _, next)) in self.unlistened.iter_mut() {
            if now < *next {
                continue;
            }
            *next = now + LISTEN_RECHECK;
            if let Some(id) = targets::listening_id(found) {
                ready.push((*pid, id));
            }
        }
        for (pid, id) in ready {
            let Some((found, _, _)) = self.unlistened.remove(&pid) else {
                continue;
            };
            if self.watches.iter().any(|w| w.id == id) {
                continue;
            }
            if let Some(pos) = self.watches.iter().position(|w| w.pid() == Some(pid)) {
                let w = self.watches.remove(pos);
                self.bpf_run_done += w.probes().run_time();
            }
            messages::note(format_args!(
                "{} now listens: watched as {id} from here on",
                found.id
            ));
            self.findings.rename_target(&found.id, &id);
            self.last_reports.remove(&found.id);
            self.attach(Some(&Found {
                id,
                listening: true,
                ..found
            }));
        }
    }

    /// Attaches the probes for `found` (the host for `None`); false when
    /// they could not be (now, or at a try less than [`RETRY`] ago).
    fn attach(&mut self, found: Option<&Found>) -> bool {
        if let Some(f) = found {
            self.guard_fleet(f);
        }
        let id = found.map_or(HOST, |f| f.id.as_str()).to_owned();
        if self.failed.get(&id).is_some_and(|t| Instant::now() < *t) {
            return false;
        }
        let mongo = self.mongo_plan(found);
        match Watch::attach(
            found,
            self.alloc_schedule(),
            Budgets {
                alloc: self.config.alloc_budget,
                probes: self.config.probe_budget,
            },
            self.config.families(),
            self.config.sample_hz,
            mongo,
        ) {
            Ok(w) => {
                let what = found.map_or_else(
                    || "no target process: watching the host".to_owned(),
                    |f| format!("watching {} (pid {})", f.id, f.target.pid),
                );
                let attached = w
                    .probes()
                    .status()
                    .iter()
                    .filter(|s| s.attached())
                    .map(|s| s.family.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                messages::note(format_args!("{what}; probes attached: {attached}"));
                self.failed.remove(&id);
                self.gone.remove(&id);
                if let Some(f) = found {
                    self.restarts.back(&id, f.target.pid);
                }
                if let Some(f) = found.filter(|f| !f.listening) {
                    let now = Instant::now();
                    self.unlistened
                        .insert(f.target.pid, (f.clone(), now, now + LISTEN_RECHECK));
                }
                self.watches.push(w);
                true
            }
            Err(e) => {
                messages::note(format_args!(
                    "cannot attach to {id}: {e}; trying again in {RETRY:?}"
                ));
                self.failed.insert(id, Instant::now() + RETRY);
                false
            }
        }
    }

    /// The start's check that the fleet store is not a watched mongod,
    /// again for a target found later (a mongod started after the agent,
    /// as at boot): when it listens on the store's port, the writer stops,
    /// its spool kept on disk, and the agent says why and what to change.
    fn guard_fleet(&mut self, found: &Found) {
        // A target not listening yet has no port to compare; it comes back
        // here once it listens (`relisten`).
        let (true, Some(o), Some(path)) = (found.listening, &self.outbox, &self.config_file) else {
            return;
        };
        // In another network namespace its port is not the store's address.
        if !crate::mongo::sockdiag::same_net_namespace(found.target.pid) {
            return;
        }
        let ports = crate::mongo::port::ports_of(found.target.pid);
        if let Err(e) = o.config().check_not_monitored(path, None, &ports) {
            messages::note(format_args!(
                "{e}; {} (pid {}) was found after the check at start: the fleet writer stops, \
                 its spool kept in {} for the next start",
                found.id,
                found.target.pid,
                self.config.state_dir.join("spool").display()
            ));
            // What this turn collected goes to the spool first.
            if let Some(mut o) = self.outbox.take()
                && let Some(why) = o.flush()
            {
                messages::note(&why);
            }
        }
    }

    /// The mongod to poll for a target: the configured URI, when it names
    /// this target's port in the agent's own network namespace (or, for a
    /// remote server, the host watch). A target listening on that port in
    /// another namespace (a pod's, while the agent has its own or the
    /// host's) is not polled: the URI's address is the agent's loopback,
    /// not the target's; the log says so once per target.
    fn mongo_plan(&mut self, found: Option<&Found>) -> Option<MongoPlan> {
        let conn = self.conn.as_ref()?;
        let hosts = conn.hosts().unwrap_or_default();
        let local_port = match hosts.as_slice() {
            [(h, p)] if crate::mongo::port::is_local_host(h) => Some(*p),
            _ => None,
        };
        let ours = match (found, local_port) {
            (Some(f), Some(port)) if targets::id_port(f) == Some(port) => {
                let reachable = crate::mongo::sockdiag::same_net_namespace(f.target.pid);
                if !reachable && self.unpolled.insert(f.id.clone()) {
                    messages::note(format_args!(
                        "{} listens on port {port} in another network namespace than the \
                         agent's: mongod is not polled (the URI's address is the agent's own; \
                         the probes watch it all the same)",
                        f.id
                    ));
                }
                reachable
            }
            (None, None) => true,
            _ => false,
        };
        ours.then(|| MongoPlan {
            conn: conn.clone(),
            local: local_port.is_some(),
        })
    }

    /// Allocator windows of `alloc_window`, never closer than the worst
    /// case allows (every nanosecond of the target's CPU in a window spent
    /// in the probes: the window's share of the time is the budget); the
    /// budget's throttle paces them from there (see [`crate::probes::alloc::budget`]).
    fn alloc_schedule(&self) -> WindowSchedule {
        let window = self.config.alloc_window;
        if self.config.alloc_budget <= 0.0 {
            return WindowSchedule {
                window,
                every: Duration::ZERO,
            };
        }
        let every = window.div_f64(self.config.alloc_budget.max(1e-6));
        WindowSchedule::new(window, every).unwrap_or_default()
    }

    /// Evaluates the window that watch `i` just filled.
    fn evaluate(&mut self, i: usize) {
        let Some(w) = self.watches.get_mut(i) else {
            return;
        };
        let id = w.id.clone();
        let recording = w.take_window(self.config.window);
        self.windows += 1;
        self.flight.keep(&id, &recording);
        let report = match crate::explain::explain(&recording, &self.rules, None, None) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("window of {id} not evaluated: {e}");
                return;
            }
        };
        let now = Utc::now();
        if let Some(o) = &mut self.outbox
            && let Some(why) = o.window(&id, &report, self.config.window.as_secs_f64(), now)
        {
            messages::note(&why);
        }
        self.evaluated = true;
        let changes = self
            .findings
            .observe(&id, &observations(&report), &self.config, now);
        for c in changes {
            if c.transition.to == State::Firing && c.transition.from != State::Flapping {
                self.flight.trigger(&c.target, &c.rule, c.at);
            }
            self.unlogged.push(c);
        }
        self.last_reports.insert(id, report);
    }

    /// Targets that are gone get a "no data" window each period.
    fn windows_of_gone(&mut self) {
        let now = Instant::now();
        let window = self.config.window;
        let mut changes = Vec::new();
        for (id, due) in self.gone.iter_mut() {
            if now >= *due {
                *due = now + window;
                changes.extend(self.findings.target_missing(id, Utc::now()));
            }
        }
        self.unlogged.extend(changes);
        // A target gone with nothing tracked any more is forgotten.
        let tracked = self.findings.targets();
        self.gone.retain(|id, _| tracked.contains(id));
        self.last_reports
            .retain(|id, _| self.watches.iter().any(|w| &w.id == id));
    }

    fn reload(&mut self) {
        let Some(path) = self.config_file.clone() else {
            messages::note("SIGHUP: no config file to read; keeping the settings");
            return;
        };
        match AgentConfig::load(Some(&path), &path) {
            Ok(mut c) => {
                flag_over_file(&mut c, self.web_flag.as_ref());
                if c.listen != self.config.listen {
                    messages::note("SIGHUP: a new listen address takes effect at the next start");
                }
                if c.web_config_file != self.config.web_config_file {
                    messages::note("SIGHUP: a new web_config_file takes effect at the next start");
                }
                // The fleet writer owns the spool while it runs: a changed
                // [fleet] table waits for a restart (docs/fleet.md), and says so.
                let fleet = crate::fleet::config::FleetConfig::load(&path)
                    .ok()
                    .flatten();
                let running = self.outbox.as_ref().map(|o| o.config());
                if fleet.as_ref() != running {
                    messages::note(
                        "SIGHUP: a changed [fleet] table takes effect at the next start",
                    );
                }
                self.flight.set_config(flight_config(&c));
                self.config = c;
                messages::note(format_args!(
                    "SIGHUP: settings read again from {}",
                    path.display()
                ));
            }
            Err(e) => messages::note(format_args!("SIGHUP: {e}; keeping the current settings")),
        }
    }

    fn save_all_now(&mut self) {
        let ids: Vec<String> = self.watches.iter().map(|w| w.id.clone()).collect();
        for id in ids {
            match self.flight.save_now(&id) {
                Some(p) => messages::note(format_args!("flight recording saved: {}", p.display())),
                None => messages::note(format_args!("SIGUSR1: no window of {id} kept yet")),
            }
        }
    }

    /// This turn's changes (and, after a window, the host) to the fleet
    /// spool, in one append.
    fn send_to_fleet(&mut self) {
        let Some(o) = &mut self.outbox else {
            return;
        };
        let info = |target: &str| {
            self.watches
                .iter()
                .find(|w| w.id == target)
                .and_then(|w| w.mongod_info())
                .or_else(|| self.watches.iter().find_map(|w| w.mongod_info()))
        };
        for c in &self.unlogged {
            o.change(c, host_facts(info(&c.target)));
        }
        if std::mem::take(&mut self.evaluated) {
            let targets = self.watches.iter().map(|w| w.id.clone()).collect();
            o.host_seen(host_facts(info("")), targets);
        }
        if let Some(why) = o.flush() {
            messages::note(&why);
        }
    }

    /// systemd's `STATUS=` line.
    fn status(&self) -> String {
        let watched: Vec<&str> = self.watches.iter().map(|w| w.id.as_str()).collect();
        let firing = self
            .findings
            .iter()
            .filter(|(_, t)| t.lifecycle.state() == State::Firing)
            .count();
        super::notify::status(&watched, firing, self.windows)
    }

    fn publish(&mut self) {
        let bpf_run = self.stats.as_ref().map(|_| {
            let live: Duration = self.watches.iter().map(|w| w.probes().run_time()).sum();
            (self.bpf_run_done + live).as_secs_f64()
        });
        let mut v = view::build(
            &self.watches,
            &self.last_reports,
            &self.flight,
            self.windows,
            &self.config,
            &self.published,
        );
        v.findings = view::findings(&self.findings, &self.rules);
        v.agent.bpf_run_seconds = bpf_run;
        v.agent.fleet = self.outbox.as_ref().map(Outbox::stats);
        v.agent.skipped = self.skips.counts();
        self.published.set(super::metrics::render(&v));
    }
}

fn flight_config(c: &AgentConfig) -> FlightConfig {
    FlightConfig {
        ring_dir: c.state_dir.join("ring"),
        out_dir: c.state_dir.join("flight"),
        before: c.flight_before,
        after: c.flight_after,
        max_files: c.flight_max_files,
        max_bytes: c.flight_max_bytes,
    }
}

async fn recv(s: &mut Option<Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
