//! Recordings: the data model (format v1), reading / writing files, and
//! windows merging consecutive slices (one code path for `explain` and the
//! agent's rolling windows).
pub mod contention;
pub mod io;
pub mod model;
pub mod window;

pub use contention::*;
pub use io::{RecordingError, default_file_name, newest_in_dir, read_file, write_atomic};
pub use model::*;
pub use window::{Mergeable, MongodWindow, SectionMs, Window, merge_window};
