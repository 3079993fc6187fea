//! The fleet: every host's findings in one MongoDB store that the team
//! already runs (`[fleet] uri`), written by `mdiag agent` and read by
//! `mdiag fleet`. [`schema`] is the contract between the two.
//!
//! The writer: [`config`] the `[fleet]` table; [`spool`] the local
//! write-ahead log every document goes through; [`store`] the driver side;
//! [`sender`] delivery from the spool to the store on a thread of its own;
//! [`outbox`] what the agent turns into documents.
//!
//! The reader (`mdiag fleet`): [`source`] (which store, connecting),
//! [`query`] (the aggregation pipelines), [`view`] (the one view model),
//! [`render`] and [`html`] (the formats), [`cmd`] (the command, end to end).

pub mod cmd;
pub mod config;
pub mod html;
pub mod query;
pub mod render;
pub mod schema;
pub mod sender;
pub mod source;
pub mod spool;
pub mod store;
pub mod view;
