//! One FTDC file: a sequence of BSON documents `{_id: Date, type: N, ...}`
//! read one at a time (with the byte offset of each), so a file of any size
//! needs the memory of one document plus one decoded chunk.
//!
//! type 0 = metadata (`doc`: hostInfo, getCmdLineOpts, buildInfo, ...),
//! type 1 = metric chunk (`data`, see [`super::chunk`]), type 2 = periodic
//! metadata (`doc`: the sections of a slowly changing document that changed,
//! `count`: how many deltas since the last full document). Other types are passed through as
//! [`FtdcDoc::Unknown`].
//!
//! A length field of zero ends the file, as in mongod's own reader (see
//! [`FtdcFile::next_doc`]). A document whose length is sound but whose
//! content is not (a flipped byte in a chunk's zlib stream, a bad sample
//! count, a metadata document that is not BSON) is reported as an error and
//! reading goes on with the next document; only a broken length (invalid,
//! or beyond the end of the file) or an I/O error ends the file, since then
//! there is no way to find the next document.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use bson::{Document, RawDocument, raw::RawBsonRef, spec::ElementType};
use chrono::{DateTime, Utc};

use super::chunk::{Chunk, ChunkDecoder};
use super::{Corrupt, FtdcError};

/// Largest outer document accepted (BSON's own limit is 16 MiB; chunks of
/// large deployments can come close).
pub const MAX_DOC: usize = 64 << 20;
/// Deepest nesting accepted in metadata documents (they are converted to a
/// [`bson::Document`] recursively).
pub const MAX_METADATA_DEPTH: usize = 100;

/// One document of an FTDC file, decoded.
#[derive(Debug, Clone)]
pub enum FtdcDoc {
    /// type 0: what the process and host are (hostInfo, getCmdLineOpts, buildInfo...).
    Metadata {
        id: DateTime<Utc>,
        offset: u64,
        doc: Document,
    },
    /// type 1: a chunk of samples.
    Metrics(Chunk),
    /// type 2: the changed parts of periodically collected metadata.
    PeriodicMetadata {
        id: DateTime<Utc>,
        offset: u64,
        /// The `count` field: deltas written since the last full document.
        count: Option<i64>,
        doc: Document,
    },
    /// A type this reader does not know (a newer mongod).
    Unknown {
        id: DateTime<Utc>,
        offset: u64,
        kind: i64,
    },
}

impl FtdcDoc {
    /// The document's `_id` (for a chunk: its first sample's time).
    pub fn id(&self) -> DateTime<Utc> {
        match self {
            FtdcDoc::Metadata { id, .. }
            | FtdcDoc::PeriodicMetadata { id, .. }
            | FtdcDoc::Unknown { id, .. } => *id,
            FtdcDoc::Metrics(c) => c.id,
        }
    }

    /// Byte offset of the document in its file.
    pub fn offset(&self) -> u64 {
        match self {
            FtdcDoc::Metadata { offset, .. }
            | FtdcDoc::PeriodicMetadata { offset, .. }
            | FtdcDoc::Unknown { offset, .. } => *offset,
            FtdcDoc::Metrics(c) => c.offset,
        }
    }
}

/// Reads the documents of one FTDC file in order.
pub struct FtdcFile<R = BufReader<File>> {
    reader: R,
    path: PathBuf,
    offset: u64,
    /// Bytes left in the input, when known (files): lengths beyond it are
    /// reported as truncation without allocating.
    remaining: Option<u64>,
    buf: Vec<u8>,
    decoder: ChunkDecoder,
    done: bool,
}

impl FtdcFile {
    /// Opens a file for reading.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FtdcError> {
        let path = path.as_ref();
        let io = |source| FtdcError::Io {
            file: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut f = Self::from_reader(BufReader::with_capacity(256 << 10, file), path);
        f.remaining = Some(len);
        Ok(f)
    }
}

impl<'a> FtdcFile<&'a [u8]> {
    /// Reads FTDC documents from memory; `name` is used in errors.
    pub fn from_bytes(bytes: &'a [u8], name: impl Into<PathBuf>) -> Self {
        let mut f = Self::from_reader(bytes, name);
        f.remaining = Some(bytes.len() as u64);
        f
    }
}

impl<R: Read> FtdcFile<R> {
    /// Reads FTDC documents from any reader; `name` is used in errors.
    pub fn from_reader(reader: R, name: impl Into<PathBuf>) -> Self {
        Self {
            reader,
            path: name.into(),
            offset: 0,
            remaining: None,
            buf: Vec::new(),
            decoder: ChunkDecoder::new(),
            done: false,
        }
    }

    /// The file's path (or the name given).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of the next document.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Hands a finished chunk back so its buffer is reused (optional; saves
    /// an allocation per chunk).
    pub fn recycle(&mut self, chunk: Chunk) {
        self.decoder.recycle(chunk);
    }

    /// The next document, `None` at the end of the file.
    ///
    /// An error about one document's content (see [`FtdcError::ends_file`])
    /// leaves the file open: the next call reads the document after it. An
    /// error in the framing (length, truncation, I/O) is the last item.
    pub fn next_doc(&mut self) -> Option<Result<FtdcDoc, FtdcError>> {
        if self.done {
            return None;
        }
        let offset = self.offset;
        let r = self.read_doc(offset).transpose();
        // The offset moves past a document only once all of it was read:
        // then the next one can be found whatever its content was.
        if r.is_none() || self.offset == offset {
            self.done = true;
        }
        r
    }

    /// Whether the file is read to its end (or to an error that ends it).
    pub fn is_finished(&self) -> bool {
        self.done
    }

    fn corrupt(&self, offset: u64, kind: impl Into<Corrupt>) -> FtdcError {
        FtdcError::Corrupt {
            file: self.path.clone(),
            offset,
            kind: kind.into(),
        }
    }

    fn read_doc(&mut self, offset: u64) -> Result<Option<FtdcDoc>, FtdcError> {
        let mut len_bytes = [0u8; 4];
        let got = read_full(&mut self.reader, &mut len_bytes).map_err(|source| FtdcError::Io {
            file: self.path.clone(),
            source,
        })?;
        if got == 0 {
            return Ok(None);
        }
        let available = self
            .remaining
            .map_or(u64::MAX, |r| r.saturating_sub(offset));
        if got < 4 {
            return Err(self.corrupt(
                offset,
                Corrupt::Truncated {
                    declared: 4,
                    available: got as u64,
                },
            ));
        }
        let declared = i32::from_le_bytes(len_bytes);
        // A zero length is mongod's end of file, not damage: its reader
        // (FTDCFileReader::readDocument in src/mongo/db/ftdc/file_reader.cpp)
        // returns an empty document when the 4-byte length reads 0 ("The
        // interim file sentinel is 8 bytes of zero"), and hasNext() then
        // reports no more documents, whatever follows.
        if declared == 0 {
            return Ok(None);
        }
        let len = usize::try_from(declared)
            .ok()
            .filter(|&l| (5..=MAX_DOC).contains(&l))
            .ok_or_else(|| {
                self.corrupt(
                    offset,
                    Corrupt::DocLength {
                        declared,
                        max: MAX_DOC,
                    },
                )
            })?;
        if len as u64 > available {
            return Err(self.corrupt(
                offset,
                Corrupt::Truncated {
                    declared: len,
                    available,
                },
            ));
        }
        self.buf.clear();
        self.buf.extend_from_slice(&len_bytes);
        // `take` + `read_to_end` grows the buffer with the data actually
        // there, never to a declared size the input cannot back.
        let body = (&mut self.reader)
            .take(len as u64 - 4)
            .read_to_end(&mut self.buf)
            .map_err(|source| FtdcError::Io {
                file: self.path.clone(),
                source,
            })?;
        if body + 4 < len {
            return Err(self.corrupt(
                offset,
                Corrupt::Truncated {
                    declared: len,
                    available: (body + 4) as u64,
                },
            ));
        }
        self.offset += len as u64;
        let buf = std::mem::take(&mut self.buf);
        let r = self.parse(offset, &buf);
        self.buf = buf;
        r.map(Some).map_err(|kind| self.corrupt(offset, kind))
    }

    fn parse(&mut self, offset: u64, bytes: &[u8]) -> Result<FtdcDoc, Corrupt> {
        let doc = RawDocument::from_bytes(bytes).map_err(|e| Corrupt::Bson(e.to_string()))?;
        let mut id = None;
        let mut kind = None;
        let mut data = None;
        let mut inner = None;
        let mut count = None;
        for elem in doc.iter_elements() {
            let elem = elem.map_err(|e| Corrupt::Bson(e.to_string()))?;
            let key = elem.key().as_str();
            if !matches!(key, "_id" | "type" | "data" | "doc" | "counter" | "count") {
                continue;
            }
            let value = elem.value().map_err(|e| Corrupt::Bson(e.to_string()))?;
            match (key, value) {
                ("_id", RawBsonRef::DateTime(d)) => id = Some(d.timestamp_millis()),
                ("_id", v) => {
                    return Err(field(
                        "_id",
                        format!("is a {:?}, not a date", v.element_type()),
                    ));
                }
                ("type", v) => {
                    kind = Some(integer(v).ok_or_else(|| {
                        field(
                            "type",
                            format!("is a {:?}, not an integer", v.element_type()),
                        )
                    })?)
                }
                ("data", RawBsonRef::Binary(b)) => data = Some(b.bytes),
                ("doc", RawBsonRef::Document(d)) => inner = Some(d),
                ("count" | "counter", v) => count = integer(v),
                _ => {}
            }
        }
        let id = id.ok_or_else(|| field("_id", "is missing".into()))?;
        let id = DateTime::from_timestamp_millis(id)
            .ok_or_else(|| field("_id", format!("{id} ms is out of range")))?;
        let kind = kind.ok_or_else(|| field("type", "is missing".into()))?;
        Ok(match kind {
            0 => FtdcDoc::Metadata {
                id,
                offset,
                doc: to_document(
                    inner.ok_or_else(|| field("doc", "is missing or not a document".into()))?,
                )?,
            },
            1 => {
                let data = data.ok_or_else(|| field("data", "is missing or not BinData".into()))?;
                FtdcDoc::Metrics(self.decoder.decode(id, offset, data)?)
            }
            2 => FtdcDoc::PeriodicMetadata {
                id,
                offset,
                count,
                doc: to_document(
                    inner.ok_or_else(|| field("doc", "is missing or not a document".into()))?,
                )?,
            },
            other => FtdcDoc::Unknown {
                id,
                offset,
                kind: other,
            },
        })
    }
}

impl<R: Read> Iterator for FtdcFile<R> {
    type Item = Result<FtdcDoc, FtdcError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_doc()
    }
}

fn field(field: &'static str, problem: String) -> Corrupt {
    Corrupt::Field { field, problem }
}

/// An integer field as mongod's `bsonExtractIntegerField` accepts it.
fn integer(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(d as i64),
        _ => None,
    }
}

/// Converts a metadata document, after checking its depth (the conversion
/// recurses). Invalid UTF-8 is replaced rather than refused.
fn to_document(doc: &RawDocument) -> Result<Document, Corrupt> {
    check_depth(doc, 0)?;
    bson::Utf8Lossy::<Document>::try_from(doc)
        .map(|d| d.0)
        .map_err(|e| Corrupt::Bson(e.to_string()))
}

fn check_depth(doc: &RawDocument, depth: usize) -> Result<(), Corrupt> {
    if depth > MAX_METADATA_DEPTH {
        return Err(Corrupt::TooDeep(MAX_METADATA_DEPTH));
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| Corrupt::Bson(e.to_string()))?;
        if matches!(
            elem.element_type(),
            ElementType::EmbeddedDocument
                | ElementType::Array
                | ElementType::JavaScriptCodeWithScope
        ) {
            let sub = match elem.value().map_err(|e| Corrupt::Bson(e.to_string()))? {
                RawBsonRef::Document(d) => d,
                RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes())
                    .map_err(|e| Corrupt::Bson(e.to_string()))?,
                RawBsonRef::JavaScriptCodeWithScope(c) => c.scope,
                _ => continue,
            };
            check_depth(sub, depth + 1)?;
        }
    }
    Ok(())
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(buf.get_mut(n..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
