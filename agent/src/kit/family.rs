//! The probe families by name, at the bottom of the layers: the registry
//! ([`for_each_family`]), one line per family, from which the [`Family`]
//! enum and every hub's per-family code are generated; the choice of
//! families a run makes ([`Selection`]); and [`Section`], what every
//! family's section of a slice says about itself.
//!
//! Why a registry and not hand-kept lists: a new family is one line, and
//! every hub's generated code (the probes' table and readers, the slice's
//! merge and bound, the fact groups, the measurements, `compare`'s series)
//! stops compiling until the family has its `Unit` and its fields.

/// The registry: every probe family, one line each (`Variant module`), in
/// the order the reports show them, their probes attach and their statuses
/// stand in a recording. `module` is the family's folder
/// (`family/<module>/`, whose [`Unit`](super::unit::FamilyUnit) is all the
/// hubs know of it), its name in recordings, reports and metrics, and its
/// field in the recording's `Slice`, the probes' readers and the report's
/// `Measurements`.
///
/// One table drives every hub, as ripgrep's flag table drives its parser,
/// help and man page: each hub passes a macro that receives the whole list
/// (`for_each_family!(a_macro)`) and generates its per-family code, so a
/// new family is one line here, and the compiler names whatever else it
/// lacks (its `Unit`, its field in `Slice` and `Measurements`).
macro_rules! for_each_family {
    ($callback:ident) => {
        $callback! {
            Sched sched,
            Softirq softirq,
            Syscalls syscalls,
            Perf perf,
            Wiredtiger wiredtiger,
            Alloc alloc,
            Contention contention,
        }
    };
}
pub(crate) use for_each_family;

/// Generates [`Family`] from the registry.
macro_rules! family_enum {
    ($($variant:ident $module:ident,)*) => {
        /// A probe family (one per line of [`for_each_family`]). Its
        /// [`name`](Self::name) is the string a recording's `probes` and
        /// every report carry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Family {
            $(
                #[doc = concat!("`", stringify!($module), "`: `family/", stringify!($module), "/`.")]
                $variant,
            )*
        }

        impl Family {
            /// Every family, in the registry's order.
            pub const ALL: [Family; [$(stringify!($module)),*].len()] = [$(Family::$variant),*];

            /// The family's name in recordings, reports and metrics (its
            /// module's name).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Family::$variant => stringify!($module),)*
                }
            }
        }
    };
}
for_each_family!(family_enum);

impl Family {
    /// The family's place in [`Self::ALL`] (an index for per-family arrays).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Every family's name, comma-separated (for messages).
    pub fn names() -> String {
        Family::ALL.map(Family::name).join(", ")
    }

    /// The family named `name`, if any.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Which families a recording or the agent runs: all of them, or the ones
/// the user named (`record --probes sched,softirq`, the agent's `probes`
/// key). The others are left out by choice, and their status says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `None`: every family.
    chosen: Option<Vec<Family>>,
}

/// A family name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error(
        "unknown probe family {name:?}: choose among {}, or all",
        Family::names()
    )]
    Unknown { name: String },
    #[error("no probe family named: choose among {}, or all", Family::names())]
    Empty,
}

impl Selection {
    /// Every family.
    pub fn all() -> Self {
        Self::default()
    }

    /// The families named in `names` (each a [`Family::name`], or `all`
    /// for every family; repeats ignored, order kept).
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, SelectionError> {
        let mut chosen: Vec<Family> = Vec::new();
        let mut all = false;
        for name in names {
            let name = name.trim();
            if name == "all" {
                all = true;
                continue;
            }
            let family = Family::from_name(name).ok_or_else(|| SelectionError::Unknown {
                name: name.to_owned(),
            })?;
            if !chosen.contains(&family) {
                chosen.push(family);
            }
        }
        if all {
            return Ok(Self::all());
        }
        if chosen.is_empty() {
            return Err(SelectionError::Empty);
        }
        Ok(Self {
            chosen: Some(chosen),
        })
    }

    /// A comma-separated list of names (`sched,softirq`); `all` for every
    /// family.
    pub fn parse(list: &str) -> Result<Self, SelectionError> {
        Self::of_names(list.split(',').filter(|n| !n.trim().is_empty()))
    }

    /// Whether `family` runs.
    pub fn includes(&self, family: Family) -> bool {
        self.chosen.as_ref().is_none_or(|c| c.contains(&family))
    }

    /// Why a family that does not run was left out, for its status.
    pub fn left_out_reason(&self) -> String {
        let names: Vec<&str> = Family::ALL
            .into_iter()
            .filter(|&f| self.includes(f))
            .map(Family::name)
            .collect();
        format!("left out by choice (probes: {})", names.join(","))
    }
}

/// What every family's section of a slice says about itself.
pub trait Section {
    /// Events its kernel side could not count in this section (full maps,
    /// unmatched exits, full ring buffers...), all kinds summed.
    fn drops_total(&self) -> u64;
}

pub use super::window::{FamilyWindow, Kept, OfFamily, Sections};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_names_families_or_says_which_exist() {
        let s = Selection::parse("sched, softirq,sched").unwrap();
        assert!(s.includes(Family::Sched) && s.includes(Family::Softirq));
        assert!(!s.includes(Family::Alloc));
        assert_eq!(
            s.left_out_reason(),
            "left out by choice (probes: sched,softirq)"
        );
        let all = Selection::parse("all").unwrap();
        assert!(Family::ALL.into_iter().all(|f| all.includes(f)));
        assert!(Selection::all().includes(Family::Contention));
        let e = Selection::parse("sched,allocator").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "unknown probe family \"allocator\": choose among {}, or all",
                Family::ALL.map(Family::name).join(", ")
            )
        );
        assert!(e.to_string().contains("sched, softirq, syscalls"));
        assert_eq!(Selection::parse("sched,all").unwrap(), Selection::all());
        assert_eq!(Selection::parse(" , ").unwrap_err(), SelectionError::Empty);
    }

    #[test]
    fn names_round_trip_and_are_distinct() {
        for f in Family::ALL {
            assert_eq!(Family::from_name(f.name()), Some(f));
        }
        let mut names: Vec<_> = Family::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Family::ALL.len());
        assert_eq!(Family::from_name("allocator"), None);
        for (i, f) in Family::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i, "{f:?}");
        }
    }
}
