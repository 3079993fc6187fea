//! Perf family, user side: the CPU-time share of allocator code, by sampling.
//!
//! The kernel side counts samples (software cpu-clock, 99 Hz by default, on every CPU)
//! per (tgid, user instruction pointer). Each slice this reader drains that
//! map (reads then deletes every key, so the map only ever holds one slice's
//! distinct addresses), symbolizes the target's addresses with
//! [`ProcessSymbols`] (cached per pid, reloaded when an address falls outside
//! every mapped object, at most every [`RELOAD_EVERY`]) and classifies each
//! one as allocator code or not, and as an allocator slow path or not.
//!
//! What counts as allocator code, and which allocator code is a slow path,
//! is decided in [`super::attribution`]; the per-slice sums and the top
//! symbols in [`super::summary`].
//!
//! With a target, the samples' call stacks are drained and symbolized too
//! ([`super::stacks`]). Host-wide (no target), samples are counted but not
//! symbolized, and stacks are emptied unread.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, StackTraceMap},
    programs::perf_event::{
        PerfEvent, PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent,
    },
};
use mdiag_common::perf::{
    KERNEL_IP, MAP_CPU, MAP_SAMPLES, MAP_STACK_COUNTS, MAP_STACKS, MAP_STACKS_ON, PROG_PERF_SAMPLE, STACKS_KERNEL, STACKS_USER,
    PerfCpu,
    SampleKey,
};

use super::attribution::{TargetSymbols, classify};
use super::section::PerfSlice;
use super::stacks::StackDrain;
use super::summary::summarize;
use crate::kit::probe::{
    AttachContext, FamilyReader, PerCpuSum, ProbeStatus, ProgramStatus, ReadError, SectionReader,
    error_chain, read_summed, reader_or_warn, take_map,
};
use crate::symbols::{ObjectCache, ProcessSymbols};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Perf.name();
/// Entries kept in `by_symbol`.
pub const TOP_SYMBOLS: usize = 20;
/// Least time between two reloads of the target's symbols.
pub const RELOAD_EVERY: Duration = Duration::from_secs(30);

/// Loads the sampling program and opens one cpu-clock event per online CPU
/// (perf_event_open may be refused). Never fails as a whole: the status says
/// what went wrong; the reader is built only when every online CPU is
/// sampled (a partial set would bias the counts).
pub fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (ProbeStatus, Option<PerfReader>) {
    let hz = cx.sample_hz;
    let attach_point = format!("perf_event/cpu-clock@{hz}Hz");
    let result = kernel_allows(hz, max_sample_rate()).and_then(|()| attach_program(ebpf, hz));
    if let Err(e) = &result {
        tracing::warn!(family = FAMILY, "not attached: {e}");
    }
    let status = ProbeStatus {
        family: FAMILY.to_owned(),
        programs: vec![ProgramStatus {
            name: PROG_PERF_SAMPLE.to_owned(),
            attach_point,
            error: result.err(),
        }],
        left_out: None,
    };
    let reader = if status.attached() {
        reader_or_warn(FAMILY, || {
            PerfReader::new(ebpf, cx.target_tgid, cx.stacks, hz)
        })
    } else {
        None
    };
    (status, reader)
}

/// The kernel's ceiling on sampling rates (`kernel.perf_event_max_sample_rate`,
/// which the kernel also lowers by itself when sampling interrupts take too
/// long), or `None` when it cannot be read.
fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string(MAX_SAMPLE_RATE_FILE)
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

const MAX_SAMPLE_RATE_FILE: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

/// `hz` within the kernel's ceiling `max` (perf_event_open would refuse it
/// with a bare EINVAL): else a line naming the setting and what to do.
fn kernel_allows(hz: u64, max: Option<u64>) -> Result<(), String> {
    match max {
        Some(max) if hz > max => Err(format!(
            "sampling at {hz} Hz: this kernel allows at most {max} Hz \
             (kernel.perf_event_max_sample_rate, lowered by the kernel itself when \
             sampling interrupts take too long); choose {max} Hz or less \
             (`mdiag record --sample-hz`, the agent's `sample_hz`)"
        )),
        _ => Ok(()),
    }
}

fn attach_program(ebpf: &mut Ebpf, hz: u64) -> Result<(), String> {
    let program = ebpf
        .program_mut(PROG_PERF_SAMPLE)
        .ok_or_else(|| format!("program {PROG_PERF_SAMPLE} missing from the eBPF object"))?;
    let program: &mut PerfEvent = program
        .try_into()
        .map_err(|e| format!("{PROG_PERF_SAMPLE}: {e}"))?;
    program
        .load()
        .map_err(|e| format!("load: {}", error_chain(&e)))?;
    let cpus = aya::util::online_cpus().map_err(|(what, e)| format!("{what}: {e}"))?;
    let mut links = Vec::with_capacity(cpus.len());
    for cpu in cpus {
        let link = program.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Frequency(hz),
            false,
        );
        match link {
            Ok(link) => links.push(link),
            Err(e) => {
                // All CPUs or none: a partial set would bias every share.
                for link in links {
                    let _ = program.detach(link);
                }
                return Err(format!("attach on CPU {cpu}: {}", error_chain(&e)));
            }
        }
    }
    Ok(())
}

/// One slice of drained samples, before symbolization.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    pub cpu: PerfCpu,
    /// (tgid, ip) → samples.
    pub samples: HashMap<SampleKey, u64>,
}

pub struct PerfReader {
    samples: BpfHashMap<MapData, SampleKey, u64>,
    cpu: PerCpuArray<MapData, PerfCpu>,
    last_cpu: PerfCpu,
    target: Option<u32>,
    symbols: Option<TargetSymbols>,
    stacks: StackDrain,
    /// The sampling rate the events were opened with (Hz per CPU).
    hz: u64,
}

impl PerfReader {
    /// With `stacks`, the kernel side takes every sample's stacks; `hz` is
    /// the rate the events sample at.
    pub(super) fn new(
        ebpf: &mut Ebpf,
        target: Option<u32>,
        stacks: bool,
        hz: u64,
    ) -> Result<Self, ReadError> {
        if stacks {
            let mut on: Array<MapData, u32> = take_map(ebpf, MAP_STACKS_ON)?;
            on.set(0, &(STACKS_USER | STACKS_KERNEL), 0).map_err(ReadError::map(MAP_STACKS_ON))?;
        }
        let mut reader = Self {
            samples: take_map(ebpf, MAP_SAMPLES)?,
            cpu: take_map(ebpf, MAP_CPU)?,
            last_cpu: PerfCpu::default(),
            target,
            symbols: None,
            stacks: StackDrain::new(
                take_map::<BpfHashMap<MapData, _, _>>(ebpf, MAP_STACK_COUNTS)?,
                take_map::<StackTraceMap<MapData>>(ebpf, MAP_STACKS)?,
            ),
            hz,
        };
        reader.last_cpu = reader.cpu_totals()?;
        Ok(reader)
    }

    fn cpu_totals(&self) -> Result<PerfCpu, ReadError> {
        read_summed(&self.cpu, 0, MAP_CPU)
    }

    /// Reads and deletes every (tgid, ip) counter, and the per-CPU counters'
    /// change since the previous call. A sample that lands between the read
    /// and the delete of its key is lost (a window of microseconds).
    pub fn drain(&mut self) -> Result<Drained, ReadError> {
        let now = self.cpu_totals()?;
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let cpu = PerfCpu {
            samples: d(now.samples, self.last_cpu.samples),
            idle: d(now.idle, self.last_cpu.idle),
            observed: d(now.observed, self.last_cpu.observed),
            kernel: d(now.kernel, self.last_cpu.kernel),
            drops: d(now.drops, self.last_cpu.drops),
            stack_lost: d(now.stack_lost, self.last_cpu.stack_lost),
            stack_drops: d(now.stack_drops, self.last_cpu.stack_drops),
        };
        self.last_cpu = now;
        let keys: Vec<SampleKey> = self.samples.keys().flatten().collect();
        let mut samples = HashMap::with_capacity(keys.len());
        for key in keys {
            if let Ok(n) = self.samples.get(&key, 0) {
                *samples.entry(key).or_insert(0) += n;
            }
            let _ = self.samples.remove(&key);
        }
        Ok(Drained { cpu, samples })
    }

    /// The slice since the previous call.
    pub fn next_slice(&mut self) -> Result<PerfSlice, ReadError> {
        let drained = self.drain()?;
        let mut target_ips: Vec<(u64, u64)> = Vec::new();
        if let Some(pid) = self.target {
            target_ips = drained
                .samples
                .iter()
                .filter(|(k, _)| k.tgid == pid)
                .map(|(k, &n)| (k.ip, n))
                .collect();
            self.refresh_symbols(pid, &target_ips);
        }
        let mut slice = match self.symbols.as_mut() {
            Some(code) => summarize(&target_ips, |ip| code.classify_remembered(ip)),
            None => summarize(&target_ips, |ip| classify(None, ip)),
        };
        let code = self.symbols.as_ref();
        slice.freq_hz = self.hz;
        slice.samples = drained.cpu.samples;
        slice.idle_samples = drained.cpu.idle;
        slice.observed_samples = drained.cpu.observed;
        slice.drops = drained.cpu.drops;
        slice.stack_lost = drained.cpu.stack_lost;
        slice.stack_drops = drained.cpu.stack_drops;
        slice.allocator = code.map(|c| c.alloc.kind);
        match self.target {
            Some(pid) => {
                let (defs, counts) = self.stacks.next(pid, code.map(|c| &c.process));
                slice.stack_defs = defs;
                slice.stacks = counts;
            }
            None => drop(self.stacks.drain_raw()),
        }
        if let Some(c) = code {
            c.process.release_pages();
        }
        Ok(slice)
    }

    /// Loads the symbols of a running target now (before the recording's
    /// clock: mongod's take seconds to read the first time, which the
    /// first slice would otherwise pay).
    pub(crate) fn preload(&mut self, pid: u32) {
        self.refresh_symbols(pid, &[]);
    }

    /// Loads the target's symbols the first time, and reloads them when a
    /// sampled user address is in no mapped object (new library, new
    /// mapping), at most every [`RELOAD_EVERY`].
    fn refresh_symbols(&mut self, pid: u32, ips: &[(u64, u64)]) {
        let stale = match &self.symbols {
            None => true,
            Some(s) => {
                s.loaded_at.elapsed() >= RELOAD_EVERY
                    && ips.iter().any(|&(ip, _)| {
                        ip != KERNEL_IP
                            && !s
                                .process
                                .objects
                                .iter()
                                .any(|o| o.mapped.contains_address(ip))
                    })
            }
        };
        if !stale {
            return;
        }
        match ProcessSymbols::load(pid, ObjectCache::global()) {
            // The same objects at the same places (an address outside them
            // all, in [vdso] or anonymous memory, asks for a reload every
            // time): the allocator's code is where it was.
            Ok(process)
                if self
                    .symbols
                    .as_ref()
                    .is_some_and(|s| s.same_objects(&process)) =>
            {
                if let Some(s) = self.symbols.as_mut() {
                    s.loaded_at = Instant::now();
                }
            }
            Ok(process) => {
                self.symbols = Some(TargetSymbols::new(process));
                self.stacks.symbols_changed();
            }
            Err(e) => {
                tracing::debug!(pid, "perf: symbols unavailable: {e}");
                if let Some(s) = self.symbols.as_mut() {
                    s.loaded_at = Instant::now();
                }
            }
        }
    }
}

impl FamilyReader for PerfReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Drained before the recording's clock is read.
    fn rebases_before_clock(&self) -> bool {
        true
    }

    /// Drops the samples taken so far, without reading any symbols (the
    /// recording's clock starts now; a held child's maps are still mdiag's).
    fn rebase(&mut self) -> Result<(), ReadError> {
        drop(self.stacks.drain_raw());
        self.drain().map(drop)
    }
}

impl SectionReader for PerfReader {
    type Section = PerfSlice;

    fn read(&mut self, _last: bool) -> Result<PerfSlice, ReadError> {
        self.next_slice()
    }
}

impl PerCpuSum for PerfCpu {
    fn add(self, b: &Self) -> Self {
        PerfCpu {
            samples: self.samples + b.samples,
            idle: self.idle + b.idle,
            observed: self.observed + b.observed,
            kernel: self.kernel + b.kernel,
            drops: self.drops + b.drops,
            stack_lost: self.stack_lost + b.stack_lost,
            stack_drops: self.stack_drops + b.stack_drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_over_the_kernels_ceiling_is_refused_naming_the_setting() {
        assert_eq!(kernel_allows(99, Some(100_000)), Ok(()));
        assert_eq!(kernel_allows(1000, Some(1000)), Ok(()));
        assert_eq!(kernel_allows(1000, None), Ok(()));
        let e = kernel_allows(1000, Some(250)).unwrap_err();
        assert!(
            e.contains("1000 Hz")
                && e.contains("kernel.perf_event_max_sample_rate")
                && e.contains("choose 250 Hz or less"),
            "{e}"
        );
    }
}
