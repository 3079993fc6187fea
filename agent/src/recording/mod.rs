//! Recordings: the data model, reading / writing files (format v2 streams
//! as it records, v1 still read), and
//! windows merging consecutive slices (one code path for `explain` and the
//! agent's rolling windows). The common model is `model.rs`; each probe
//! family's section types are in `<family>.rs` (re-exported by both).
pub mod family;
mod frames;
pub mod host;
pub mod host_cpu;
pub mod io;
pub mod keep;
pub mod model;
pub mod mongod;
pub mod read;
pub mod rseq;
pub mod server_status;
pub mod stream;

pub mod window;

pub use crate::family::contention::section::*;
pub use family::{Family, Section};
pub use io::{
    Opened, RecordingError, default_file_name, newest_in_dir, open, open_within, read_file,
    write_atomic,
};
pub use model::*;
pub use stream::StreamWriter;
pub use window::{Mergeable, MongodWindow, SectionMs, Window, merge_window};

#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod stream_full_tests;
#[cfg(test)]
mod stream_tests;
