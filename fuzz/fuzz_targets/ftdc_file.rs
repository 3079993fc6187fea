//! Fuzz target `ftdc_file`: any bytes given to the FTDC decoder must give
//! documents or an error, never a panic, a hang or a huge allocation.
//!
//! Each input is read twice: as an FTDC file (BSON documents, zlib chunks)
//! and as the inflated content of a metric chunk (reference document,
//! counts, delta stream), because random mutations of a zlib stream almost
//! never get past its checksum to the layers inside. Every accessor of what
//! decodes is exercised too.
#![no_main]

use chrono::DateTime;
use libfuzzer_sys::fuzz_target;

#[path = "../../agent/src/ftdc/mod.rs"]
#[allow(dead_code, unused_imports)]
mod ftdc;

use ftdc::{Chunk, FtdcDoc, FtdcFile, chunk::decode_inflated};

fn touch(chunk: &Chunk) {
    let mut row = Vec::new();
    let n = chunk.sample_count();
    for s in [0, n / 2, n.saturating_sub(1), n] {
        chunk.sample_into(s, &mut row);
        let _ = chunk.timestamp(s);
    }
    for m in 0..chunk.metric_count().min(64) {
        if let Some(col) = chunk.column(m) {
            let _ = (
                col.first(),
                col.last(),
                col.iter().fold(0i64, i64::wrapping_add),
            );
        }
        let _ = chunk.paths().get(m);
    }
    let _ = chunk.time_range();
    let _ = chunk.changing_metrics();
    let _ = chunk.reference_document();
}

fuzz_target!(|data: &[u8]| {
    let mut file = FtdcFile::from_bytes(data, "fuzz-input");
    while let Some(doc) = file.next_doc() {
        match doc {
            Ok(FtdcDoc::Metrics(c)) => {
                touch(&c);
                file.recycle(c);
            }
            Ok(d) => {
                let _ = (d.id(), d.offset());
            }
            Err(e) => {
                let _ = (e.to_string(), e.offset(), e.file());
            }
        }
    }
    let id = DateTime::from_timestamp_millis(0).unwrap_or_default();
    if let Ok(c) = decode_inflated(data, id, 0, Vec::new()) {
        touch(&c);
    }
});
