//! Random slices of every family for the windows' property tests: each
//! family's section drawn in its folder (`family/<name>/random.rs`) with the
//! generator of `kit::random`, mongod's sample here.

pub(super) use crate::kit::random::Rng;
use crate::kit::unit::FamilyUnit;
use crate::recording::model::*;
use crate::recording::mongod::MongodSlice;
use crate::recording::server_status::ServerStatusSample;

fn mongod(r: &mut Rng, start_ms: u64) -> MongodSlice {
    if r.chance(70) {
        MongodSlice {
            at_ms: r.chance(90).then_some(start_ms + 100),
            status: Some(ServerStatusSample {
                op_insert: Some(start_ms as i64 / 10 + r.below(50) as i64),
                connections_current: Some(r.below(100) as i64),
                ..Default::default()
            }),
            missing: None,
            poll_ms: r.chance(50).then(|| r.below(900)),
            ..Default::default()
        }
    } else {
        let why = ["unreachable", "timeout", "auth"][r.below(3) as usize];
        MongodSlice {
            at_ms: None,
            status: None,
            missing: r.chance(80).then(|| why.to_string()),
            poll_ms: None,
            ..Default::default()
        }
    }
}

/// A random one-second slice starting at `start_ms`, each family present
/// most of the time.
pub(super) fn slice(r: &mut Rng, start_ms: u64) -> Slice {
    slice_with(r, start_ms, 85)
}

/// Generates [`slice_with`] from the registry.
macro_rules! slice_with {
    ($($variant:ident $module:ident,)*) => {
        /// A random slice, each family's section (drawn in its folder:
        /// [`FamilyUnit::random`]) present with `percent` chance.
        fn slice_with(r: &mut Rng, start_ms: u64, percent: u64) -> Slice {
            Slice {
                start_ms,
                duration_ms: 900 + r.below(101),
                $($module: r.chance(percent).then(|| {
                    <crate::family::$module::Unit as FamilyUnit>::random(r, start_ms)
                }),)*
                mongod: r.chance(percent).then(|| mongod(r, start_ms)),
            }
        }
    };
}
crate::kit::family::for_each_family!(slice_with);

/// `n` consecutive random slices.
pub(super) fn slices(r: &mut Rng, n: u64) -> Vec<Slice> {
    slices_with(r, n, 85)
}

/// `n` consecutive random slices, each family present with `percent` chance.
pub(super) fn slices_with(r: &mut Rng, n: u64, percent: u64) -> Vec<Slice> {
    let mut at = 0;
    (0..n)
        .map(|_| {
            let s = slice_with(r, at, percent);
            at += s.duration_ms;
            s
        })
        .collect()
}
