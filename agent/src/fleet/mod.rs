//! The fleet: every host's findings in one MongoDB store that the team
//! already runs (`[fleet] uri`), written by `mdiag agent` and read by
//! `mdiag fleet`. [`schema`] is the contract between the two; [`config`]
//! the `[fleet]` table; [`spool`] the local write-ahead log every document
//! goes through; [`store`] the driver side; [`sender`] delivery from the
//! spool to the store on a thread of its own; [`outbox`] what the agent
//! turns into documents.

pub mod config;
pub mod outbox;
pub mod schema;
pub mod sender;
pub mod spool;
pub mod store;
