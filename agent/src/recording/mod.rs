//! Recordings: the data model (format v1), reading / writing files, and
//! windows merging consecutive slices (one code path for `explain` and the
//! agent's rolling windows). The common model is `model.rs`; each probe
//! family's section types are in `<family>.rs` (re-exported by both).
pub mod family;
pub mod host;
pub mod host_cpu;
pub mod io;
pub mod model;
pub mod mongod;
pub mod rseq;
pub mod server_status;

pub mod window;

pub use crate::family::contention::section::*;
pub use family::{Family, Section};
pub use io::{RecordingError, default_file_name, newest_in_dir, read_file, write_atomic};
pub use model::*;
pub use window::{Mergeable, MongodWindow, SectionMs, Window, merge_window};
