//! A recording file's content as one JSON document, whichever its layout
//! (docs/recording-format.md): what the VM matrix and the benchmark read
//! of the recordings mdiag makes, without depending on mdiag itself.
//!
//! Version 1 is one zstd frame holding one document. Version 2 is zstd
//! frames of JSON lines (`head`, `slice`…, `detail`…, `end`): the end's (or,
//! cut short, the head's) object with the slices put back in `slices`.

use serde_json::Value;

/// The decompressed content of a recording (`json`) as one document.
pub fn document(json: &[u8]) -> Result<Value, String> {
    if !json.starts_with(b"{\"head\":") {
        return serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"));
    }
    let mut top: Option<Value> = None;
    let mut slices = Vec::new();
    for line in json.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(mut line) = v else {
            return Err("a line is not an object".into());
        };
        if let Some(s) = line.remove("slice") {
            slices.push(s);
        } else if let Some(h) = line.remove("end").or_else(|| line.remove("head")) {
            top = Some(h);
        }
    }
    let mut top = top.ok_or("no head line")?;
    top["slices"] = Value::Array(slices);
    Ok(top)
}

/// The recording file at `path`, as one document.
pub fn read(path: &std::path::Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let json = zstd::decode_all(bytes.as_slice()).map_err(|e| format!("not zstd: {e}"))?;
    document(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_recording_reads_as_one_document() {
        let text = [
            serde_json::json!({"head": {"version": 2, "stop_reason": "recording", "slices": []}}),
            serde_json::json!({"slice": {"start_ms": 0}}),
            serde_json::json!({"slice": {"start_ms": 1000}}),
            serde_json::json!({"detail": {"at_ms": 0, "metrics": {}}}),
            serde_json::json!({"end": {"version": 2, "stop_reason": "duration", "slices": []}}),
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>();
        let v = document(text.as_bytes()).unwrap();
        assert_eq!(v["stop_reason"], "duration");
        assert_eq!(v["slices"][1]["start_ms"], 1000);
        assert_eq!(v["slices"].as_array().unwrap().len(), 2);
        // Cut before its end: the head's object.
        let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            document(cut.as_bytes()).unwrap()["stop_reason"],
            "recording"
        );
        // Version 1: the document itself.
        assert_eq!(document(b"{\"version\": 1}").unwrap()["version"], 1);
    }
}
