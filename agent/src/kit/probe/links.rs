//! The links a family's attach made, kept for the agent's duty cycle
//! (`probes::cycle`), which detaches and attaches them again.

use aya::programs::{fentry::FEntryLinkId, fexit::FExitLinkId, tp_btf::BtfTracePointLinkId};

/// An attached program's link, by program type.
#[derive(Debug)]
pub enum LinkId {
    Tp(BtfTracePointLinkId),
    FEntry(FEntryLinkId),
    FExit(FExitLinkId),
}

/// One program a family attached: its link while attached, `None` while
/// the cycle has it detached.
#[derive(Debug)]
pub struct Link {
    pub family: &'static str,
    pub program: &'static str,
    pub id: Option<LinkId>,
}
