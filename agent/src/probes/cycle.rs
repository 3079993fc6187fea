//! The per-event families' duty cycle: detaching their programs for a
//! while and attaching them again, so that a long-running agent can keep
//! what they cost the host within a budget (`agent/duty.rs` decides when).
//!
//! Why detach rather than a flag the programs test: a detached tracepoint
//! program costs nothing at all, a flag still costs the program's dispatch
//! on every event (and, for `sys_enter`, the traced syscall path).
//!
//! Only the families whose programs run per kernel event are cycled
//! ([`cycled`]): the scheduler, softirq, syscalls and contention families.
//! Perf samples at a fixed rate, WiredTiger's uprobes fire per checkpoint,
//! and the allocator family has its own budget.
//!
//! While detached, the end of whatever was in flight (a run on a CPU, a
//! run-queue wait, a syscall, a lock wait, a D-state sleep, a softirq) goes
//! unseen, so before attaching again each family forgets what its kernel
//! side had in flight ([`super::FamilyReader::forget_in_flight`]), then
//! its slices start again from the attach
//! ([`super::FamilyReader::rebase`]). A paused family has no section in the
//! slices taken meanwhile: windows then compute its rates over the time it
//! covered (`recording::window::SectionMs`).

use aya::{
    Ebpf,
    programs::{BtfTracePoint, FEntry, FExit},
};

/// Whether `family` is one the cycle detaches (its
/// [`FamilyUnit::CYCLED`](crate::kit::unit::FamilyUnit::CYCLED)).
pub fn cycled(family: &str) -> bool {
    super::FAMILIES.iter().any(|f| f.cycled && f.name == family)
}

/// The families the cycle detaches, in the registry's order.
pub fn cycled_families() -> impl Iterator<Item = &'static str> {
    super::FAMILIES.iter().filter(|f| f.cycled).map(|f| f.name)
}

pub use crate::kit::probe::links::{Link, LinkId};

/// Why a program could not be detached or attached again.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    #[error("program {0} missing from the eBPF object")]
    Missing(&'static str),
    #[error("program {program}: {source}")]
    Program {
        program: &'static str,
        source: aya::programs::ProgramError,
    },
}

/// The links of the cycled families and whether they are attached now.
#[derive(Debug, Default)]
pub struct Cycle {
    links: Vec<Link>,
    paused: bool,
}

impl Cycle {
    /// The cycle over `links` (every family's; only [`cycled`] ones kept).
    pub fn new(links: Vec<Link>) -> Self {
        let links = links.into_iter().filter(|l| cycled(l.family)).collect();
        Self {
            links,
            paused: false,
        }
    }

    /// Whether `family` is detached by the cycle now.
    pub fn paused(&self, family: &str) -> bool {
        self.paused && cycled(family)
    }

    /// Whether the cycled families are detached now.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether any cycled program is attached at all (else there is
    /// nothing to cycle).
    pub fn has_programs(&self) -> bool {
        !self.links.is_empty()
    }

    /// The cycled programs, by family.
    pub fn programs(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.links.iter().map(|l| (l.family, l.program))
    }

    /// Detaches every cycled program. A program that fails to detach stays
    /// attached (its link kept), with the error returned after the others.
    pub fn pause(&mut self, ebpf: &mut Ebpf) -> Result<(), CycleError> {
        let mut first_error = None;
        for link in &mut self.links {
            let Some(id) = link.id.take() else { continue };
            if let Err(e) = detach(ebpf, link.program, id) {
                first_error.get_or_insert(e);
            }
        }
        self.paused = true;
        first_error.map_or(Ok(()), Err)
    }

    /// Attaches every cycled program again (the caller has made the
    /// families forget what was in flight). A program that fails stays
    /// detached, with the error returned after the others.
    pub fn resume(&mut self, ebpf: &mut Ebpf) -> Result<(), CycleError> {
        let mut first_error = None;
        for link in &mut self.links {
            if link.id.is_some() {
                continue;
            }
            match attach(ebpf, link.program) {
                Ok(id) => link.id = Some(id),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        self.paused = false;
        first_error.map_or(Ok(()), Err)
    }
}

/// Detaches `program`'s link `id`.
fn detach(ebpf: &mut Ebpf, program: &'static str, id: LinkId) -> Result<(), CycleError> {
    let p = ebpf
        .program_mut(program)
        .ok_or(CycleError::Missing(program))?;
    let failed = |source| CycleError::Program { program, source };
    match id {
        LinkId::Tp(id) => <&mut BtfTracePoint>::try_from(p)
            .map_err(failed)?
            .detach(id)
            .map_err(failed),
        LinkId::FEntry(id) => <&mut FEntry>::try_from(p)
            .map_err(failed)?
            .detach(id)
            .map_err(failed),
        LinkId::FExit(id) => <&mut FExit>::try_from(p)
            .map_err(failed)?
            .detach(id)
            .map_err(failed),
    }
}

/// Attaches the already loaded `program` again.
fn attach(ebpf: &mut Ebpf, program: &'static str) -> Result<LinkId, CycleError> {
    let p = ebpf
        .program_mut(program)
        .ok_or(CycleError::Missing(program))?;
    let failed = |source| CycleError::Program { program, source };
    match p {
        aya::programs::Program::BtfTracePoint(p) => p.attach().map(LinkId::Tp).map_err(failed),
        aya::programs::Program::FEntry(p) => p.attach().map(LinkId::FEntry).map_err(failed),
        aya::programs::Program::FExit(p) => p.attach().map(LinkId::FExit).map_err(failed),
        _ => Err(CycleError::Missing(program)),
    }
}
