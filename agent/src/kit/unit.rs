//! [`FamilyUnit`]: all the hubs know of a probe family, implemented once in
//! its folder (`family/<name>/unit.rs`) on a marker type its `mod.rs`
//! names `Unit`. The hubs (`probes`, `recording`, `rules`, `report`,
//! `compare`) generate their per-family code from the registry
//! ([`for_each_family`](super::family::for_each_family)) by calling these
//! functions, so a new family adds its line there and its `Unit` here, and
//! nothing else of a hub.
//!
//! What a family lacks it leaves to the defaults: no fact group of its own,
//! no chart, no per-second figure for `compare`.

use aya::Ebpf;

use super::fact::FactGroup;
use super::family::Family;
use super::merge::Mergeable;
use super::probe::{AttachContext, ProbeStatus, SectionReader};
use super::view;
use super::window::{FamilyWindow, OfFamily};

/// One figure `compare` sets side by side: its name, its unit and its
/// value in each slice of a recording (`None`: that slice has none).
pub type Series = (&'static str, &'static str, Vec<Option<f64>>);

/// What a family's report measurements are, for one window.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured<M> {
    /// Its measurements.
    Yes(M),
    /// None, for this reason (the report lists it under "not measured").
    No(String),
    /// None; the probe statuses say why (attached but nothing recorded,
    /// failed, not applicable).
    Nothing,
}

impl<M> Measured<M> {
    /// The measurements, if any.
    pub fn into_option(self) -> Option<M> {
        match self {
            Measured::Yes(m) => Some(m),
            Measured::No(_) | Measured::Nothing => None,
        }
    }
}

impl<M> From<Option<M>> for Measured<M> {
    fn from(m: Option<M>) -> Self {
        m.map_or(Measured::Nothing, Measured::Yes)
    }
}

/// A probe family as the hubs see it (see the module notes).
pub trait FamilyUnit {
    /// The family.
    const FAMILY: Family;
    /// Its `(program, BTF tracepoint)` pairs, checked against the kernel's
    /// BTF before anything attaches (none for uprobes and perf events).
    const TRACEPOINTS: &'static [(&'static str, &'static str)] = &[];
    /// Where its reader stands in the order a slice reads the families,
    /// lowest first: the families whose per-thread times are split at the
    /// cut first, the slow reads (symbolization) last.
    const READ_RANK: u8;
    /// It counts events per event, so the agent's duty cycle detaches it
    /// between active periods (`probes::cycle`).
    const CYCLED: bool = false;
    /// It attaches once the record loop or the agent knows its plan
    /// (`probes::Probes::attach_later`), not with the others.
    const ATTACH_LATER: bool = false;
    /// The report notes why it is missing from its probe statuses (else its
    /// [`measure`](Self::measure) alone says why).
    const STATUS_NOTES: bool = true;
    /// It derives a fact group of its own, named as the family
    /// ([`facts`](Self::facts)); else its numbers reach the rules through
    /// other groups (perf's CPU shares and alloc's latency through
    /// `allocator`).
    const FACTS: bool = false;

    /// Its section of a slice.
    type Section: OfFamily + Mergeable + Default;
    /// What reads its sections from its maps.
    type Reader: SectionReader<Section = Self::Section> + 'static;
    /// What the report shows of it (the JSON contract's
    /// `measurements.<name>`).
    type Measurements;

    /// Attaches its programs, with one status per program (`None`: not
    /// tried, as host-wide for a family that needs a process) and its
    /// reader when what it needs attached. Never fails as a whole.
    fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (Option<ProbeStatus>, Option<Self::Reader>);

    /// Its fact group, named as the family, from its totals over `w`
    /// (`Err`: why it is absent); asked only when [`Self::FACTS`].
    fn facts(_w: &FamilyWindow<'_, Self::Section>) -> Result<FactGroup, String> {
        Err(format!(
            "the {} family derives no facts of its own",
            Self::FAMILY.name()
        ))
    }

    /// Its section of the example recording rules are checked against
    /// when they load (`rules::facts::example`): made up, every number
    /// non-zero, so that every fact it derives is present. `None`: it has
    /// none there.
    fn example() -> Option<Self::Section> {
        None
    }

    /// A random section, for the property tests of the windows' merge
    /// laws (`recording/window/tests.rs`), from `start_ms` on.
    #[cfg(test)]
    fn random(r: &mut super::random::Rng, start_ms: u64) -> Self::Section;

    /// Its report measurements over `w`.
    fn measure(w: &FamilyWindow<'_, Self::Section>) -> Measured<Self::Measurements>;

    /// Whether it recorded anything over `w` (when not, the report says it
    /// attached but recorded nothing), given its measurements.
    fn recorded(_w: &FamilyWindow<'_, Self::Section>, m: Option<&Self::Measurements>) -> bool {
        m.is_some()
    }

    /// Its part of the report's Measurements section.
    fn view(m: &Self::Measurements) -> view::Section;

    /// Its charts in the HTML report (`why_missing`: the note when it has
    /// no measurements); none by default.
    fn chart(_out: &mut String, _m: Option<&Self::Measurements>, _why_missing: &str) {}

    /// Its per-second figures that `compare` sets side by side, one value
    /// per slice of a recording (`slices`: each slice's length in
    /// milliseconds and its section); none by default (events and sampled
    /// windows are not per-second figures).
    fn series(_slices: &[(u64, Option<&Self::Section>)]) -> Vec<Series> {
        Vec::new()
    }
}

/// Each slice's value of `f` per second of the slice, for
/// [`FamilyUnit::series`] (`None`: the slice has no section, or no length).
pub fn per_second<S>(slices: &[(u64, Option<&S>)], f: impl Fn(&S) -> f64) -> Vec<Option<f64>> {
    slices
        .iter()
        .map(|&(ms, s)| s.filter(|_| ms > 0).map(|s| f(s) / (ms as f64 / 1000.0)))
        .collect()
}
