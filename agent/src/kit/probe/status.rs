//! What a recording says of each probe family: every program, where it
//! attached, or why not. Written by the families' attach, kept in the
//! recording (`Recording::probes`), read by facts and reports.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeStatus {
    /// Probe family: "sched", ...
    pub family: String,
    /// Each program of the family and where it attached.
    pub programs: Vec<ProgramStatus>,
    /// Why the family was not tried at all when the user chose to leave it
    /// out (`record --probes`, the agent's `probes` key); it then has no
    /// programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

impl ProbeStatus {
    /// A family left out by choice, for `why`.
    pub fn left_out(family: &str, why: String) -> Self {
        ProbeStatus {
            family: family.to_owned(),
            programs: Vec::new(),
            left_out: Some(why),
        }
    }

    /// A family whose programs all share one attach point and one outcome
    /// (an entry/exit uprobe pair): `error` is `None` when they attached.
    pub fn same_for_all(
        family: &str,
        programs: &[&str],
        attach_point: String,
        error: Option<String>,
    ) -> Self {
        ProbeStatus {
            family: family.to_owned(),
            programs: programs
                .iter()
                .map(|p| ProgramStatus {
                    name: (*p).to_owned(),
                    attach_point: attach_point.clone(),
                    error: error.clone(),
                })
                .collect(),
            left_out: None,
        }
    }

    /// A family counts as attached when every one of its programs attached.
    pub fn attached(&self) -> bool {
        !self.programs.is_empty() && self.programs.iter().all(|p| p.error.is_none())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramStatus {
    /// Program name in the eBPF object.
    pub name: String,
    /// Attach point, e.g. "tp_btf/sched_switch".
    pub attach_point: String,
    /// `None` when attached; the reason otherwise.
    pub error: Option<String>,
}
