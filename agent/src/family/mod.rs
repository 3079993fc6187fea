//! The probe families, one folder each (`family/<name>/`), each owning
//! everything from its maps to its report section: its probe (attach and
//! reader), its recording section and how sections merge, its typed totals
//! computed once from a window, its facts and its report section and chart,
//! all from those totals.
//!
//! A family depends only on the kit below it ([`crate::kit`]) and on the
//! low shared modules (findings, hist, threads, mdiag-common's kernel
//! types); the hubs above (`probes`, `recording`, `rules`, `report`, the
//! agent) name the families, never the other way round
//! (`module_graph_tests.rs` fails on a cycle). A family may use another's
//! types (contention joins the syscalls, sched and WiredTiger sections), as
//! long as no cycle forms. How to add one: `docs/ARCHITECTURE.md`.

/// Declares every family's module from the registry.
macro_rules! family_modules {
    ($($variant:ident $module:ident,)*) => {
        $(pub mod $module;)*
    };
}
crate::kit::family::for_each_family!(family_modules);
