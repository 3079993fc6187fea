//! A recording file's zstd frames, decompressed one at a time, past damage.
//!
//! Why frame by frame: a stream recording (`recording/stream.rs`) may be cut
//! anywhere (killed, disk full, power lost), or damaged in the middle (a bad
//! disk block, a bit flipped in a copy). Each complete frame, its checksum
//! verified, is good data; the part of a frame the file ends in, or a
//! damaged one, is not. Decompressing whole frames only, the reader keeps
//! exactly the complete ones and says where the rest is.
//!
//! Why resynchronise: the frames are independent, so one damaged frame
//! costs only its own seconds. After a frame that does not decode, the
//! reader scans forward for the next zstd frame magic and takes the first
//! candidate that decodes whole, with a content checksum verified, and whose
//! content the caller accepts ([`Frames::expect`]); the bytes in
//! between are reported as skipped ([`Next::Damaged`]). When no candidate
//! is found the file ends there ([`Next::Cut`]): cut by a killed writer, or
//! damaged to its end. The scan reads the file once (linear); a candidate is
//! decoded only until its first error, and never past the `max` bytes of
//! content every frame is held to. Skippable frames (magic 0x184D2A5?),
//! which mdiag never writes, are passed over by zstd when met in order
//! (they read as empty frames); inside a resynchronisation they are scanned
//! over like damaged bytes.

use std::io::{Read, Seek, SeekFrom};

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 1 << 16;
/// How every zstd frame starts: 0xFD2FB528, little-endian.
pub(crate) const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The frame header descriptor's Content_Checksum_flag and Reserved_bit
/// (RFC 8878, 3.1.1.1.1): a candidate found by scanning must have the first
/// and not the second.
const CHECKSUM_FLAG: u8 = 0x04;
const RESERVED_BIT: u8 = 0x08;

/// Why bytes of the file are not a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The file ends inside the frame.
    Incomplete,
    /// zstd refuses the frame (its message).
    Damaged(String),
    /// The frame decompresses to more than this many bytes.
    TooLarge(u64),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Incomplete => f.write_str("the file ends inside a frame"),
            Self::Damaged(e) => write!(f, "damaged frame: {e}"),
            Self::TooLarge(max) => write!(f, "a frame decompresses to more than {max} bytes"),
        }
    }
}

/// What follows in the file.
#[derive(Debug)]
pub(crate) enum Next {
    /// A complete frame's content, its checksum (when it has one) verified.
    Frame(Vec<u8>),
    /// `skipped` bytes from byte `at` are no frame (the first of them
    /// because of `fault`); an intact frame follows them, the next one
    /// returned.
    Damaged { at: u64, skipped: u64, fault: Fault },
    /// The file ends after the last frame.
    End,
    /// No complete frame follows: the `skipped` bytes from byte `at` to the
    /// end of the file are not one (`fault`: the file ends inside a frame,
    /// or it is damaged with no intact frame after).
    Cut { at: u64, skipped: u64, fault: Fault },
}

/// One attempt at a frame from where the reader stands.
enum Decoded {
    Whole(Vec<u8>),
    /// The file ends here, between frames.
    Nothing,
    Bad(Fault),
}

/// The frames of a file, in order.
pub(crate) struct Frames<R> {
    src: R,
    decoder: Decoder<'static>,
    /// Bytes of the file from offset `base`: `buf[pos..len]` not yet used.
    buf: Vec<u8>,
    base: u64,
    pos: usize,
    len: usize,
    /// The file returned no more bytes (at `base + len`).
    eof: bool,
    /// The largest frame content accepted (a guard against zip bombs).
    max: u64,
    /// Every frame must carry a content checksum ([`Self::expect`]).
    strict: bool,
    /// Whether a frame found by scanning holds what the caller expects.
    check: fn(&[u8]) -> bool,
    /// A frame found by scanning, returned after [`Next::Damaged`].
    found: Option<Vec<u8>>,
    /// Where the file ended, once it did (returned again).
    cut: Option<(u64, u64, Fault)>,
}

impl<R: Read + Seek> Frames<R> {
    /// The frames of `src`, read from where it stands (its offset 0).
    pub(crate) fn new(src: R, max: u64) -> std::io::Result<Self> {
        Ok(Self {
            src,
            decoder: Decoder::new()?,
            buf: vec![0; READ_CHUNK],
            base: 0,
            pos: 0,
            len: 0,
            eof: false,
            max,
            strict: false,
            check: |_| true,
            found: None,
            cut: None,
        })
    }

    /// From now on every frame must carry a content checksum (mdiag writes
    /// one in every frame of a stream: a frame whose header says it has
    /// none is damaged, its content unverifiable), and a frame found by
    /// scanning past damage counts only if `check` accepts its content
    /// (e.g. it parses as the expected lines).
    pub(crate) fn expect(&mut self, check: fn(&[u8]) -> bool) {
        self.strict = true;
        self.check = check;
    }

    /// The next frame. I/O errors reading the file are returned as errors;
    /// what the file holds never is (damage is [`Next::Damaged`] or
    /// [`Next::Cut`]).
    pub(crate) fn next(&mut self) -> std::io::Result<Next> {
        if let Some(data) = self.found.take() {
            return Ok(Next::Frame(data));
        }
        if let Some((at, skipped, fault)) = &self.cut {
            return Ok(Next::Cut {
                at: *at,
                skipped: *skipped,
                fault: fault.clone(),
            });
        }
        let at = self.here();
        if self.strict
            && self.has_magic()?
            && self.descriptor()?.is_some_and(|d| d & CHECKSUM_FLAG == 0)
        {
            let why = "its header says it has no content checksum".to_owned();
            return self.resync(at, Fault::Damaged(why));
        }
        match self.decode()? {
            Decoded::Whole(data) => Ok(Next::Frame(data)),
            Decoded::Nothing => Ok(Next::End),
            Decoded::Bad(fault) => self.resync(at, fault),
        }
    }

    /// After the frame at `at` failed with `fault`: the first intact frame
    /// after it, found by scanning for the magic, else the end.
    fn resync(&mut self, at: u64, fault: Fault) -> std::io::Result<Next> {
        let mut from = at + 1;
        while let Some(candidate) = self.find_magic(from)? {
            self.seek(candidate)?;
            if self
                .descriptor()?
                .is_some_and(|d| d & CHECKSUM_FLAG != 0 && d & RESERVED_BIT == 0)
                && let Decoded::Whole(data) = self.decode()?
                && (self.check)(&data)
            {
                self.found = Some(data);
                return Ok(Next::Damaged {
                    at,
                    skipped: candidate - at,
                    fault,
                });
            }
            from = candidate + 1;
        }
        // No magic left: the reader has seen the end of the file.
        let skipped = (self.base + self.len as u64).saturating_sub(at);
        self.cut = Some((at, skipped, fault.clone()));
        Ok(Next::Cut { at, skipped, fault })
    }

    /// Decodes one frame from where the reader stands; it then stands after
    /// the bytes the decoder used.
    fn decode(&mut self) -> std::io::Result<Decoded> {
        self.decoder.reinit()?;
        let mut out = Vec::new();
        let mut scratch = vec![0u8; READ_CHUNK];
        let mut used = 0u64;
        loop {
            if self.pos == self.len {
                self.fill()?;
            }
            let mut input = InBuffer::around(&self.buf[self.pos..self.len]);
            let mut output = OutBuffer::around(&mut scratch[..]);
            let hint = match self.decoder.run(&mut input, &mut output) {
                Ok(h) => h,
                Err(e) => return Ok(Decoded::Bad(Fault::Damaged(e.to_string()))),
            };
            let consumed = input.pos();
            let produced = output.pos();
            self.pos += consumed;
            used += consumed as u64;
            out.extend_from_slice(&scratch[..produced]);
            if out.len() as u64 > self.max {
                return Ok(Decoded::Bad(Fault::TooLarge(self.max)));
            }
            if hint == 0 {
                // The frame is complete and flushed (its checksum checked).
                return Ok(Decoded::Whole(out));
            }
            if consumed == 0 && produced == 0 && self.eof {
                return Ok(if used == 0 && out.is_empty() {
                    Decoded::Nothing
                } else {
                    Decoded::Bad(Fault::Incomplete)
                });
            }
        }
    }

    /// Whether a zstd frame magic is where the reader stands.
    fn has_magic(&mut self) -> std::io::Result<bool> {
        while self.len - self.pos < MAGIC.len() && self.fill()? {}
        Ok(self.buf[self.pos..self.len].starts_with(&MAGIC))
    }

    /// The frame header descriptor (the byte after the magic) where the
    /// reader stands, if the file has it.
    fn descriptor(&mut self) -> std::io::Result<Option<u8>> {
        while self.len - self.pos <= MAGIC.len() && self.fill()? {}
        Ok(self.buf[self.pos..self.len].get(MAGIC.len()).copied())
    }

    /// The offset of the first frame magic at or after `from`, if any.
    fn find_magic(&mut self, from: u64) -> std::io::Result<Option<u64>> {
        self.seek(from)?;
        loop {
            let window = &self.buf[self.pos..self.len];
            if let Some(i) = window.windows(MAGIC.len()).position(|w| w == MAGIC) {
                return Ok(Some(self.here() + i as u64));
            }
            // A magic may straddle two reads: its first bytes are kept.
            self.pos = self.len - window.len().min(MAGIC.len() - 1);
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The file offset the reader stands at.
    fn here(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Moves the reader to file offset `to`.
    fn seek(&mut self, to: u64) -> std::io::Result<()> {
        if (self.base..=self.base + self.len as u64).contains(&to) {
            self.pos = (to - self.base) as usize;
            return Ok(());
        }
        self.src.seek(SeekFrom::Start(to))?;
        self.base = to;
        self.pos = 0;
        self.len = 0;
        self.eof = false;
        Ok(())
    }

    /// Keeps the unused bytes and reads more after them; `false` when the
    /// file has no more. (At most a few bytes are kept: there is room.)
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        let n = read_some(&mut self.src, &mut self.buf[self.len..])?;
        self.len += n;
        self.eof = n == 0;
        Ok(n > 0)
    }
}

/// Reads what is there (retrying on interrupts); 0 at the end.
fn read_some(src: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match src.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(data: &[u8]) -> Vec<u8> {
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
            .unwrap();
        c.compress(data).unwrap()
    }

    /// What a reader sees of `bytes`: the frames, each damaged stretch
    /// `(at, skipped)`, and where the file ended early.
    struct Seen {
        frames: Vec<Vec<u8>>,
        damaged: Vec<(u64, u64, Fault)>,
        cut: Option<(u64, u64, Fault)>,
    }

    fn read_with(bytes: &[u8], max: u64, check: Option<fn(&[u8]) -> bool>) -> Seen {
        let mut f = Frames::new(std::io::Cursor::new(bytes), max).unwrap();
        if let Some(check) = check {
            f.expect(check);
        }
        let mut seen = Seen {
            frames: Vec::new(),
            damaged: Vec::new(),
            cut: None,
        };
        loop {
            match f.next().unwrap() {
                Next::Frame(d) => seen.frames.push(d),
                Next::Damaged { at, skipped, fault } => seen.damaged.push((at, skipped, fault)),
                Next::End => return seen,
                Next::Cut { at, skipped, fault } => {
                    // Asked again, the reader says the same.
                    assert!(matches!(f.next().unwrap(), Next::Cut { at: a, .. } if a == at));
                    seen.cut = Some((at, skipped, fault));
                    return seen;
                }
            }
        }
    }

    fn all(bytes: &[u8]) -> Seen {
        read_with(bytes, 1 << 20, None)
    }

    /// Three frames of different sizes, their contents and their bytes.
    fn three() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let parts: Vec<Vec<u8>> = (0..3)
            .map(|i| format!("line {i}\n").repeat(1000 * (i + 1)).into_bytes())
            .collect();
        let framed = parts.iter().map(|p| frame(p)).collect();
        (parts, framed)
    }

    #[test]
    fn frames_come_back_one_by_one_and_a_cut_one_is_left_out() {
        let (parts, framed) = three();
        let file: Vec<u8> = framed.concat();
        let seen = all(&file);
        assert_eq!(seen.frames, parts);
        assert!(seen.cut.is_none() && seen.damaged.is_empty());
        // Where each frame ends.
        let ends: Vec<usize> = framed
            .iter()
            .scan(0, |end, f| {
                *end += f.len();
                Some(*end)
            })
            .collect();
        // Cut anywhere: exactly the complete frames before the cut, and the
        // cut named as one (not as damage).
        for n in 0..file.len() {
            let seen = all(&file[..n]);
            let complete = ends.iter().take_while(|&&e| e <= n).count();
            assert_eq!(seen.frames, parts[..complete], "cut at {n}");
            assert!(seen.damaged.is_empty(), "cut at {n}");
            let boundary = if complete == 0 { 0 } else { ends[complete - 1] };
            match seen.cut {
                None => assert_eq!(n, boundary, "cut at {n}"),
                Some((at, skipped, fault)) => {
                    assert_eq!(at as usize, boundary, "cut at {n}: {fault}");
                    assert_eq!((at + skipped) as usize, n, "cut at {n}");
                    assert_eq!(fault, Fault::Incomplete, "cut at {n}");
                }
            }
        }
    }

    #[test]
    fn a_damaged_frame_is_skipped_and_the_next_one_read() {
        let (parts, framed) = three();
        let (a, b) = (framed[0].len() as u64, framed[1].len() as u64);
        for i in [0, 1, 4, 5, b as usize / 2, b as usize - 1] {
            let mut file = framed.concat();
            file[a as usize + i] ^= 0x5a;
            let seen = all(&file);
            assert_eq!(seen.frames, [&parts[0][..], &parts[2][..]], "byte {i}");
            assert_eq!(seen.damaged.len(), 1, "byte {i}");
            let (at, skipped, fault) = &seen.damaged[0];
            assert_eq!((*at, *skipped), (a, b), "byte {i}: {fault}");
            assert!(matches!(fault, Fault::Damaged(_)), "byte {i}: {fault}");
            assert!(seen.cut.is_none());
        }
    }

    #[test]
    fn neighbouring_damaged_frames_are_one_stretch_and_damage_at_the_end_a_cut() {
        let (parts, framed) = three();
        let ends: Vec<usize> = [framed[0].len(), framed[0].len() + framed[1].len()].into();
        let mut file = framed.concat();
        file[ends[0] / 2] ^= 1;
        file[ends[0] + 7] ^= 1;
        let seen = all(&file);
        assert_eq!(seen.frames, [&parts[2][..]]);
        assert_eq!(seen.damaged.len(), 1);
        assert_eq!(seen.damaged[0].0, 0);
        assert_eq!(seen.damaged[0].1, ends[1] as u64);
        // The last frame damaged: nothing intact after it, a cut at its start.
        let mut file = framed.concat();
        file[ends[1] + 20] ^= 0x10;
        let seen = all(&file);
        assert_eq!(seen.frames, parts[..2]);
        let (at, skipped, fault) = seen.cut.unwrap();
        assert_eq!(at as usize, ends[1]);
        assert_eq!((at + skipped) as usize, file.len());
        assert!(matches!(fault, Fault::Damaged(_)), "{fault}");
    }

    #[test]
    fn a_frame_magic_is_found_across_reads_and_garbage_is_skipped() {
        let good = frame(b"after the garbage\n");
        // The frame begins at every offset around the end of the first and
        // the second read, so that its magic straddles one of them.
        for pad in (READ_CHUNK - 8..READ_CHUNK + 8).chain(2 * READ_CHUNK - 6..2 * READ_CHUNK + 2) {
            let mut file = frame(b"first\n");
            let first = file.len() as u64;
            file.resize(pad, 0);
            file.extend_from_slice(&good);
            let seen = all(&file);
            assert_eq!(seen.frames.len(), 2, "pad {pad}");
            assert_eq!(seen.frames[1], b"after the garbage\n", "pad {pad}");
            assert_eq!(seen.damaged[0].0, first);
            assert_eq!(seen.damaged[0].1, pad as u64 - first, "pad {pad}");
        }
    }

    #[test]
    fn a_candidate_counts_only_whole_checksummed_and_accepted() {
        let (parts, framed) = three();
        // A magic inside the garbage, its frame cut short; one whose header
        // says it has no checksum; and one that is whole but refused.
        let no_checksum = zstd::bulk::compress(b"no checksum\n", 3).unwrap();
        let refused = frame(b"refused\n");
        let mut file = framed[0].clone();
        file.extend_from_slice(&[0xde, 0xad]);
        file.extend_from_slice(&framed[1][..framed[1].len() / 2]);
        file.extend_from_slice(&no_checksum);
        file.extend_from_slice(&refused);
        let at = framed[0].len() as u64;
        let skipped = file.len() as u64 - at;
        file.extend_from_slice(&framed[2]);
        let refuse: Option<fn(&[u8]) -> bool> = Some(|d| !d.starts_with(b"refused"));
        let seen = read_with(&file, 1 << 20, refuse);
        assert_eq!(seen.frames, [&parts[0][..], &parts[2][..]]);
        assert_eq!(seen.damaged.len(), 1);
        assert_eq!(seen.damaged[0].0, at);
        assert_eq!(seen.damaged[0].1, skipped);
        // Met in order, a frame without a checksum is damaged when every
        // frame must have one, and read otherwise.
        let file = [framed[0].clone(), no_checksum.clone(), refused].concat();
        let seen = read_with(&file, 1 << 20, Some(|_| true));
        assert_eq!(seen.frames, [&parts[0][..], b"refused\n"]);
        let (at, skipped, fault) = &seen.damaged[0];
        assert_eq!(
            (*at, *skipped),
            (framed[0].len() as u64, no_checksum.len() as u64)
        );
        assert!(fault.to_string().contains("no content checksum"), "{fault}");
        assert_eq!(all(&file).frames.len(), 3);
        // The check is for frames found by scanning, not those met in order.
        let file = [framed[0].clone(), frame(b"refused\n")].concat();
        assert_eq!(read_with(&file, 1 << 20, refuse).frames.len(), 2);
    }

    #[test]
    fn a_frame_larger_than_allowed_is_refused_and_skipped() {
        let big = frame(&vec![b'x'; 4 << 20]);
        let seen = all(&big);
        assert!(seen.frames.is_empty());
        let (_, _, fault) = seen.cut.unwrap();
        assert_eq!(fault, Fault::TooLarge(1 << 20));
        assert!(fault.to_string().contains("more than"));
        let file = [big.clone(), frame(b"small\n")].concat();
        let seen = all(&file);
        assert_eq!(seen.frames, [b"small\n"]);
        assert_eq!(seen.damaged[0].1, big.len() as u64);
    }

    #[test]
    fn a_skippable_frame_met_in_order_reads_as_empty() {
        let mut skippable = vec![0x50, 0x2A, 0x4D, 0x18];
        skippable.extend_from_slice(&3u32.to_le_bytes());
        skippable.extend_from_slice(b"abc");
        let file = [frame(b"one\n"), skippable, frame(b"two\n")].concat();
        let seen = all(&file);
        assert_eq!(seen.frames, [&b"one\n"[..], b"", b"two\n"]);
        assert!(seen.damaged.is_empty() && seen.cut.is_none());
    }
}
