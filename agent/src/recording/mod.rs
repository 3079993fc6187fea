//! Recordings: the data model (format v1) and reading / writing files.
pub mod contention;
pub mod io;
pub mod model;

pub use contention::*;
pub use io::{RecordingError, default_file_name, newest_in_dir, read_file, write_atomic};
pub use model::*;
