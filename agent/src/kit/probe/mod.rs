//! The probe kit: what every family's kernel-facing code is built from.
//! Reading maps ([`reader`]: one error type, typed maps, per-CPU sums, the
//! cumulative-counter and reader traits), attaching ([`attach`]: the
//! context a family's attach is given, one status per program), the
//! kernel's BTF ([`btf`]) and syscall entry functions
//! ([`syscall_entries`]) the object is loaded with, per-thread credit of
//! time in flight ([`credit`]), snapshot differences ([`delta`]), what a
//! recording says of each family ([`status`]) and the links the duty cycle
//! toggles ([`links`]).
//!
//! Below every family and the hub (`probes::Probes`) that owns them: it
//! names no family.

pub mod attach;
pub mod btf;
pub mod credit;
pub mod delta;
pub mod links;
pub mod process_cpu;
pub mod reader;
pub mod status;
pub mod syscall_entries;

pub use attach::{AttachContext, missing_tracepoint, not_applicable};
pub(crate) use attach::{NOT_APPLICABLE, error_chain, reader_if, reader_or_warn};
pub use reader::{Counters, FamilyReader, ReadError, SectionReader, TakeMapError};
pub(crate) use reader::{
    PerCpuSum, clear_map, clock_ns, edit_per_cpu, monotonic_now_ns, read_per_cpu, read_summed,
    sum_cpus, take_map,
};
pub use status::{ProbeStatus, ProgramStatus};
