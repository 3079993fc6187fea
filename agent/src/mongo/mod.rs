//! mongod itself as evidence: polled through the official `mongodb` driver
//! during `record`, or read from its FTDC files by `explain --ftdc`.
//!
//! - [`conn`]: which server (`--uri`, `MDIAG_MONGODB_URI`, config file) and
//!   redaction of credentials;
//! - [`port`]: the local process listening on the URI's port (the target);
//! - [`status`]: the one serverStatus parser (live replies and FTDC samples);
//! - [`info`]: buildInfo / getCmdLineOpts / hostInfo facts;
//! - [`startup`]: mongod's own startup warnings (`getLog`), kept verbatim;
//! - [`fcv`]: the command that sets the feature compatibility version;
//! - [`poll`]: the driver on its own thread, with timeouts;
//! - [`session`]: polls → one sample per slice, faults marked;
//! - [`ftdc`]: FTDC samples as a recording, or joined to one on time;
//!   [`ftdc_extra`]: its replSetGetStatus, oplog and systemMetrics columns;
//! - [`repl`]: replication figures (members, oplog), live and from FTDC;
//! - [`system`]: the host's CPU, memory, disks and space (systemMetrics, /proc);
//! - [`summary`]: the figures over a recording (rates, fill, checkpoints),
//!   shared by the rules' facts and the report;
//! - what the recording keeps of mongod is in `recording/mongod.rs` and
//!   `recording/server_status.rs`, below this module.

pub mod conn;
pub mod fcv;
pub mod ftdc;
pub mod ftdc_extra;
#[cfg(test)]
mod ftdc_mongod8_tests;
#[cfg(test)]
mod ftdc_tests;
pub mod ftdc_window;
pub mod info;
pub mod lifecycle;
pub mod poll;
pub mod port;
pub mod repl;
pub mod session;
pub mod sockdiag;
pub mod startup;
pub mod status;
pub mod summary;
pub mod system;

pub use conn::{Connection, redact};
pub use session::{MongoPlan, MongoSession};
