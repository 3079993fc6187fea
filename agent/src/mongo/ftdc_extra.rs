//! FTDC's collectors besides serverStatus, per sample: `replSetGetStatus`
//! and `local.oplog.rs.stats` ([`ReplSample`]) and `systemMetrics`
//! ([`SystemSample`]). The columns a chunk holds for them are found once per
//! chunk (member names from its reference document, since strings are not
//! metrics); each sample then reads only those columns.

use std::collections::HashMap;

use super::{repl, system};
use crate::ftdc::Chunk;
use crate::recording::mongod::{ReplSample, SystemSample};

/// The replication and system columns of one chunk.
#[derive(Debug, Default)]
pub struct ExtraColumns {
    repl: HashMap<String, usize>,
    system: Vec<(String, usize)>,
    names: Vec<String>,
}

impl ExtraColumns {
    /// Finds the columns in `chunk`.
    pub fn new(chunk: &Chunk) -> Self {
        let mut out = ExtraColumns::default();
        for (i, path) in chunk.paths().iter().enumerate() {
            if repl::is_ftdc_path(path) {
                out.repl.entry(path.to_owned()).or_insert(i);
            } else if system::is_ftdc_path(path) {
                out.system.push((path.to_owned(), i));
            }
        }
        if let Ok(rs) = chunk.reference().get_document("replSetGetStatus") {
            out.names = repl::member_names(rs);
        }
        out
    }

    /// The replication figures of sample `s`, when the chunk has any.
    pub fn repl(&self, chunk: &Chunk, s: usize) -> Option<ReplSample> {
        if self.repl.is_empty() {
            return None;
        }
        ReplSample::parse_with(
            &|p| self.repl.get(p).and_then(|&m| chunk.value(s, m)),
            &self.names,
        )
    }

    /// The systemMetrics of sample `s`, when the chunk has them.
    pub fn system(&self, chunk: &Chunk, s: usize) -> Option<SystemSample> {
        if self.system.is_empty() {
            return None;
        }
        SystemSample::parse_with(
            self.system
                .iter()
                .filter_map(|(p, m)| Some((p.as_str(), chunk.value(s, *m)?))),
        )
    }
}
