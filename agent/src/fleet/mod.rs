//! The fleet: every host's findings in one MongoDB store that the team
//! already runs (`[fleet] uri`), written by `mdiag agent` and read by
//! `mdiag fleet`. [`schema`] is the contract between the two.
//!
//! The reader: [`source`] (which store, connecting), [`query`] (the
//! aggregation pipelines), [`view`] (the one view model), [`render`] and
//! [`html`] (the formats), [`cmd`] (the command, end to end).

pub mod cmd;
pub mod html;
pub mod query;
pub mod render;
pub mod schema;
pub mod source;
pub mod view;
