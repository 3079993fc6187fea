//! The fleet: every host's findings in one MongoDB store that the team
//! already runs (`[fleet] uri`), written by `mdiag agent` and read by
//! `mdiag fleet`. [`schema`] is the contract between the two.

pub mod schema;
