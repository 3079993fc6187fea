//! A recording file's zstd frames, decompressed one at a time.
//!
//! Why frame by frame: a stream recording (`recording/stream.rs`) may be cut
//! anywhere (killed, disk full, power lost). Each complete frame, its
//! checksum verified, is good data; the part of a frame the file ends in,
//! or a damaged one, is not. Decompressing whole frames only, the reader
//! keeps exactly the complete ones and says where the rest ends.

use std::io::Read;

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 1 << 16;

/// What follows in the file.
#[derive(Debug)]
pub(crate) enum Next {
    /// A complete frame's content, its checksum (when it has one) verified.
    Frame(Vec<u8>),
    /// The file ends after the last frame.
    End,
    /// No complete frame follows: the file ends inside one, or it is
    /// damaged. `at` is the byte offset where the frame begins.
    Cut { at: u64, why: String },
}

/// The frames of a file, in order.
pub(crate) struct Frames<R> {
    src: R,
    decoder: Decoder<'static>,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    /// Compressed bytes consumed up to the end of the last complete frame.
    done: u64,
    /// Compressed bytes consumed in the frame being decoded.
    in_frame: u64,
    /// The largest frame content accepted (a guard against zip bombs).
    max: u64,
}

impl<R: Read> Frames<R> {
    pub(crate) fn new(src: R, max: u64) -> std::io::Result<Self> {
        Ok(Self {
            src,
            decoder: Decoder::new()?,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            len: 0,
            eof: false,
            done: 0,
            in_frame: 0,
            max,
        })
    }

    /// The next frame. I/O errors reading the file are returned as errors;
    /// what the file holds never is (a cut or damaged frame is [`Next::Cut`]).
    pub(crate) fn next(&mut self) -> std::io::Result<Next> {
        let mut out = Vec::new();
        let mut scratch = vec![0u8; READ_CHUNK];
        loop {
            if self.pos == self.len && !self.eof {
                self.len = read_some(&mut self.src, &mut self.buf)?;
                self.pos = 0;
                self.eof = self.len == 0;
            }
            let mut input = InBuffer::around(&self.buf[self.pos..self.len]);
            let mut output = OutBuffer::around(&mut scratch[..]);
            let hint = match self.decoder.run(&mut input, &mut output) {
                Ok(h) => h,
                Err(e) => return Ok(self.cut(format!("damaged frame: {e}"))),
            };
            let consumed = input.pos();
            let produced = output.pos();
            self.pos += consumed;
            self.in_frame += consumed as u64;
            out.extend_from_slice(&scratch[..produced]);
            if out.len() as u64 > self.max {
                return Ok(self.cut(format!(
                    "a frame decompresses to more than {} bytes",
                    self.max
                )));
            }
            if hint == 0 {
                // The frame is complete and flushed (its checksum checked).
                self.done += self.in_frame;
                self.in_frame = 0;
                return Ok(Next::Frame(out));
            }
            if consumed == 0 && produced == 0 && self.eof {
                return Ok(if self.in_frame == 0 && out.is_empty() {
                    Next::End
                } else {
                    self.cut("the file ends inside a frame".into())
                });
            }
        }
    }

    fn cut(&mut self, why: String) -> Next {
        self.eof = true;
        self.pos = self.len;
        Next::Cut { at: self.done, why }
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

    fn all(bytes: &[u8]) -> (Vec<Vec<u8>>, Option<(u64, String)>) {
        let mut f = Frames::new(bytes, 1 << 20).unwrap();
        let mut frames = Vec::new();
        loop {
            match f.next().unwrap() {
                Next::Frame(d) => frames.push(d),
                Next::End => return (frames, None),
                Next::Cut { at, why } => return (frames, Some((at, why))),
            }
        }
    }

    #[test]
    fn frames_come_back_one_by_one_and_a_cut_one_is_left_out() {
        let parts: Vec<Vec<u8>> = (0..3)
            .map(|i| format!("line {i}\n").repeat(1000 * (i + 1)).into_bytes())
            .collect();
        let framed: Vec<Vec<u8>> = parts.iter().map(|p| frame(p)).collect();
        let file: Vec<u8> = framed.concat();
        let (got, cut) = all(&file);
        assert_eq!(got, parts);
        assert!(cut.is_none());
        // Where each frame ends.
        let ends: Vec<usize> = framed
            .iter()
            .scan(0, |end, f| {
                *end += f.len();
                Some(*end)
            })
            .collect();
        // Cut anywhere: exactly the complete frames before the cut.
        for n in 0..file.len() {
            let (got, cut) = all(&file[..n]);
            let complete = ends.iter().take_while(|&&e| e <= n).count();
            assert_eq!(got, parts[..complete], "cut at {n}");
            let boundary = if complete == 0 { 0 } else { ends[complete - 1] };
            match cut {
                None => assert_eq!(n, boundary, "cut at {n}"),
                Some((at, why)) => {
                    assert_eq!(at as usize, boundary, "cut at {n}: {why}");
                    assert!(n > boundary);
                }
            }
        }
    }

    #[test]
    fn a_damaged_frame_is_not_misread() {
        let a = frame(b"first\n");
        let b = frame(&b"second frame, longer\n".repeat(50));
        let mut file = [a.clone(), b.clone()].concat();
        // Flip a byte inside the second frame's compressed data.
        let i = a.len() + b.len() / 2;
        file[i] ^= 0x5a;
        let (got, cut) = all(&file);
        assert_eq!(got, vec![b"first\n".to_vec()]);
        let (at, why) = cut.expect("the damage is seen");
        assert_eq!(at as usize, a.len());
        assert!(why.contains("damaged"), "{why}");
    }

    #[test]
    fn a_frame_larger_than_allowed_is_refused() {
        let big = frame(&vec![b'x'; 4 << 20]);
        let (got, cut) = all(&big);
        assert!(got.is_empty());
        assert!(cut.unwrap().1.contains("more than"));
    }
}
