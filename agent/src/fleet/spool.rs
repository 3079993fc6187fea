//! The local spool: every document for the fleet store is written here
//! first, and sent from here, so a store that is down (or a crash) loses
//! nothing the bounds allow to keep.
//!
//! An append log of segment files under `<state_dir>/spool/`, each named by
//! the sequence number of its first record (`00000000000000000042.spool`).
//! A record is framed as `len u32 | crc32 u32 | written_at_ms i64 | BSON`
//! (little endian; the crc covers the time and the BSON), so a torn tail
//! after a crash is found by its crc and cut at open. The sender's
//! position (the next record not yet acknowledged by the store) is the
//! file `ack`, replaced atomically (write, fsync, rename, fsync the
//! directory). A crash between a delivery and its ack replays a few
//! records: the store's writes are idempotent, so that is harmless.
//!
//! Bounded by bytes and by age: whole segments go, oldest first, and the
//! records in them not yet delivered are counted as dropped.

use std::{
    collections::VecDeque,
    fs::{File, OpenOptions},
    io::{BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use super::schema::{FindingEvent, HostDoc, WindowDoc};

/// Header bytes before each record's BSON.
const HEADER: usize = 16;
/// A record larger than this is not a record (a corrupt length).
const MAX_RECORD: usize = 16 << 20;
const ACK: &str = "ack";
const SUFFIX: &str = ".spool";

/// One document for the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    Finding(FindingEvent),
    Window(WindowDoc),
    Host(HostDoc),
}

impl Record {
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Finding(_) => "finding",
            Record::Window(_) => "window",
            Record::Host(_) => "host",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("fleet spool {}: {source}; check the disk under [agent] state_dir", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("fleet spool: cannot encode a {kind} document: {why}")]
    Encode { kind: &'static str, why: String },
}

/// The spool's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct SpoolConfig {
    pub dir: PathBuf,
    pub max_bytes: u64,
    pub max_age: Duration,
}

impl SpoolConfig {
    /// Segments are cut at this size, so the bounds drop an eighth at a time.
    fn segment_bytes(&self) -> u64 {
        (self.max_bytes / 8).clamp(4 << 10, 8 << 20)
    }
}

#[derive(Debug, Clone)]
struct Segment {
    base: u64,
    count: u64,
    bytes: u64,
    /// When its newest record was written (Unix ms).
    newest_ms: i64,
}

/// What [`Spool::open`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Opened {
    /// Bytes cut from torn or corrupt tails.
    pub cut_bytes: u64,
    /// Records waiting for delivery.
    pub pending: u64,
}

/// The spool of one agent.
#[derive(Debug)]
pub struct Spool {
    cfg: SpoolConfig,
    segments: VecDeque<Segment>,
    /// Append handle of the last segment.
    active: Option<File>,
    next_seq: u64,
    /// Every record before this one is delivered.
    ack: u64,
    /// (sequence, segment base, byte offset) of the next record to read,
    /// when the last read stopped there.
    cursor: Option<(u64, u64, u64)>,
    unsynced: bool,
    new_files: bool,
    /// Records dropped to keep the bounds, or unreadable.
    pub dropped: u64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Spool {
    /// Opens (or creates) the spool in `cfg.dir`: scans the segments, cuts
    /// a torn or corrupt tail, resumes after the last acknowledged record.
    pub fn open(cfg: SpoolConfig) -> Result<(Spool, Opened), SpoolError> {
        std::fs::create_dir_all(&cfg.dir).map_err(io(&cfg.dir))?;
        let mut bases: Vec<u64> = std::fs::read_dir(&cfg.dir)
            .map_err(io(&cfg.dir))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(SUFFIX)?.parse().ok())
            .collect();
        bases.sort_unstable();
        let mut opened = Opened::default();
        let mut segments = VecDeque::new();
        for base in bases {
            let (seg, cut) = scan_segment(&cfg.dir, base)?;
            opened.cut_bytes += cut;
            segments.push_back(seg);
        }
        let ack_path = cfg.dir.join(ACK);
        let ack = std::fs::read_to_string(&ack_path)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let end = segments.back().map_or(0, |s| s.base + s.count);
        let mut spool = Spool {
            cfg,
            segments,
            active: None,
            next_seq: end.max(ack),
            ack,
            cursor: None,
            unsynced: false,
            new_files: false,
            dropped: 0,
        };
        // Segments dropped meanwhile: resume at the oldest one kept.
        if let Some(first) = spool.segments.front() {
            spool.ack = spool.ack.max(first.base);
        }
        spool.remove_delivered()?;
        opened.pending = spool.pending();
        Ok((spool, opened))
    }

    /// Records not delivered yet.
    pub fn pending(&self) -> u64 {
        self.next_seq - self.ack
    }

    /// Bytes on disk.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// The next record's sequence number.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn path(&self, base: u64) -> PathBuf {
        segment_path(&self.cfg.dir, base)
    }

    /// Appends `records` written at `now_ms`, fsyncs them, then keeps the
    /// bounds (which may drop the oldest undelivered records, counted).
    pub fn append(&mut self, records: &[Record], now_ms: i64) -> Result<(), SpoolError> {
        // Expired records go before new ones join their segment.
        self.enforce(now_ms)?;
        for r in records {
            let body = bson::serialize_to_vec(r).map_err(|e| SpoolError::Encode {
                kind: r.kind(),
                why: e.to_string(),
            })?;
            self.append_raw(&body, now_ms)?;
        }
        self.sync()?;
        self.enforce(now_ms)
    }

    fn append_raw(&mut self, body: &[u8], now_ms: i64) -> Result<(), SpoolError> {
        let roll = self
            .segments
            .back()
            .is_none_or(|s| s.bytes >= self.cfg.segment_bytes());
        if roll || self.active.is_none() {
            self.open_active(roll)?;
        }
        let frame = frame(body, now_ms);
        let Some(base) = self.segments.back().map(|s| s.base) else {
            return Ok(());
        };
        let path = self.path(base);
        let file = self.active.as_mut().ok_or_else(|| SpoolError::Io {
            path: path.clone(),
            source: std::io::Error::other("no active segment"),
        })?;
        file.write_all(&frame).map_err(io(&path))?;
        if let Some(s) = self.segments.back_mut() {
            s.count += 1;
            s.bytes += frame.len() as u64;
            s.newest_ms = s.newest_ms.max(now_ms);
        }
        self.next_seq += 1;
        self.unsynced = true;
        Ok(())
    }

    /// Opens the last segment for appending, or a new one (`fresh`).
    fn open_active(&mut self, fresh: bool) -> Result<(), SpoolError> {
        if fresh || self.segments.is_empty() {
            self.sync()?;
            self.segments.push_back(Segment {
                base: self.next_seq,
                count: 0,
                bytes: 0,
                newest_ms: i64::MIN,
            });
            self.new_files = true;
        }
        let Some(base) = self.segments.back().map(|s| s.base) else {
            return Ok(());
        };
        let path = self.path(base);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        self.active = Some(file);
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<(), SpoolError> {
        if self.unsynced
            && let Some(f) = &self.active
        {
            f.sync_data().map_err(io(&self.cfg.dir))?;
            self.unsynced = false;
        }
        if self.new_files {
            sync_dir(&self.cfg.dir)?;
            self.new_files = false;
        }
        Ok(())
    }

    /// Drops the oldest segments while over the bounds; counts what was
    /// not delivered in them.
    pub fn enforce(&mut self, now_ms: i64) -> Result<(), SpoolError> {
        let max_age = i64::try_from(self.cfg.max_age.as_millis()).unwrap_or(i64::MAX);
        loop {
            let Some(first) = self.segments.front().cloned() else {
                return Ok(());
            };
            let over = self.bytes() > self.cfg.max_bytes;
            let old = first.count > 0 && first.newest_ms.saturating_add(max_age) < now_ms;
            if !over && !old {
                return Ok(());
            }
            if self.segments.len() == 1 {
                // The active segment itself: continue in a new one first.
                self.open_active(true)?;
            }
            let undelivered = (first.base + first.count).saturating_sub(self.ack.max(first.base));
            self.dropped += undelivered;
            self.ack = self.ack.max(first.base + first.count);
            self.cursor = None;
            self.segments.pop_front();
            let path = self.path(first.base);
            std::fs::remove_file(&path).map_err(io(&path))?;
            self.write_ack()?;
        }
    }

    /// Up to `max` records from the first one not delivered, with their
    /// sequence numbers. A record that does not decode is skipped, counted.
    pub fn peek(&mut self, max: usize) -> Result<Vec<(u64, Record)>, SpoolError> {
        let mut out = Vec::new();
        let mut seq = self.ack;
        let mut skipped = 0;
        let segs: Vec<Segment> = self.segments.iter().cloned().collect();
        for seg in segs {
            if out.len() >= max {
                break;
            }
            if seq >= seg.base + seg.count {
                continue;
            }
            let path = self.path(seg.base);
            let mut file = BufReader::new(File::open(&path).map_err(io(&path))?);
            let (mut at, mut offset) = match self.cursor {
                Some((s, base, off)) if s == seq && base == seg.base => (s, off),
                _ => (seg.base, 0),
            };
            file.seek(SeekFrom::Start(offset)).map_err(io(&path))?;
            while at < seg.base + seg.count && out.len() < max {
                let Some((body, len)) = read_frame(&mut file, at >= seq).map_err(io(&path))? else {
                    break;
                };
                if at >= seq {
                    match bson::deserialize_from_slice::<Record>(&body) {
                        Ok(r) => out.push((at, r)),
                        Err(_) => skipped += 1,
                    }
                    seq = at + 1;
                }
                at += 1;
                offset += len;
            }
            if at == seq && at < seg.base + seg.count {
                self.cursor = Some((seq, seg.base, offset));
            }
        }
        // Undecodable records at the front are acknowledged as dropped.
        if skipped > 0 {
            self.dropped += skipped;
            if out.is_empty() {
                self.ack(seq)?;
            }
        }
        Ok(out)
    }

    /// Every record before `next` is delivered: durably so, and the
    /// segments wholly before it are removed.
    pub fn ack(&mut self, next: u64) -> Result<(), SpoolError> {
        let next = next.min(self.next_seq);
        if next <= self.ack {
            return Ok(());
        }
        // The cursor only serves reads that start exactly at `next`.
        self.cursor = self.cursor.filter(|(s, _, _)| *s == next);
        self.ack = next;
        self.write_ack()?;
        self.remove_delivered()
    }

    fn write_ack(&self) -> Result<(), SpoolError> {
        let tmp = self.cfg.dir.join("ack.tmp");
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(format!("{}\n", self.ack).as_bytes())
            .map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        let path = self.cfg.dir.join(ACK);
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        sync_dir(&self.cfg.dir)
    }

    /// Removes delivered segments (the active one stays).
    fn remove_delivered(&mut self) -> Result<(), SpoolError> {
        while self.segments.len() > 1 {
            let Some(first) = self.segments.front() else {
                break;
            };
            if first.base + first.count > self.ack {
                break;
            }
            let path = self.path(first.base);
            self.segments.pop_front();
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        Ok(())
    }
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}{SUFFIX}"))
}

fn frame(body: &[u8], now_ms: i64) -> Vec<u8> {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&now_ms.to_le_bytes());
    crc.update(body);
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&now_ms.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// One frame: its body (empty unless `want`) and its length on disk;
/// `None` at the end. A frame that is torn or fails its crc is an error
/// of kind `InvalidData` (only [`scan_segment`] meets one: it cuts them).
fn read_frame(r: &mut impl Read, want: bool) -> std::io::Result<Option<(Vec<u8>, u64)>> {
    match read_checked(r)? {
        Some((body, _)) => {
            let len = (HEADER + body.len()) as u64;
            Ok(Some((if want { body } else { Vec::new() }, len)))
        }
        None => Ok(None),
    }
}

/// A checked frame: (body, written_at_ms); `None` at a clean end.
fn read_checked(r: &mut impl Read) -> std::io::Result<Option<(Vec<u8>, i64)>> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
    let mut head = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        let n = r.read(&mut head[got..])?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(bad("torn header"))
            };
        }
        got += n;
    }
    let word = |i: usize| [head[i], head[i + 1], head[i + 2], head[i + 3]];
    let len = u32::from_le_bytes(word(0)) as usize;
    let crc = u32::from_le_bytes(word(4));
    let mut at = [0u8; 8];
    at.copy_from_slice(&head[8..16]);
    if len > MAX_RECORD {
        return Err(bad("impossible length"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(|_| bad("torn body"))?;
    let mut h = crc32fast::Hasher::new();
    h.update(&at);
    h.update(&body);
    if h.finalize() != crc {
        return Err(bad("crc mismatch"));
    }
    Ok(Some((body, i64::from_le_bytes(at))))
}

/// Counts a segment's records; cuts it at the first torn or corrupt frame
/// (returns the bytes cut).
fn scan_segment(dir: &Path, base: u64) -> Result<(Segment, u64), SpoolError> {
    let path = segment_path(dir, base);
    let data = std::fs::read(&path).map_err(io(&path))?;
    let mut seg = Segment {
        base,
        count: 0,
        bytes: 0,
        newest_ms: i64::MIN,
    };
    let mut cursor = std::io::Cursor::new(&data[..]);
    // Up to the clean end, or the first torn or corrupt frame.
    while let Ok(Some((body, at))) = read_checked(&mut cursor) {
        seg.count += 1;
        seg.bytes += (HEADER + body.len()) as u64;
        seg.newest_ms = seg.newest_ms.max(at);
    }
    let cut = data.len() as u64 - seg.bytes;
    if cut > 0 {
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        f.set_len(seg.bytes).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))?;
    }
    Ok((seg, cut))
}

fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;
