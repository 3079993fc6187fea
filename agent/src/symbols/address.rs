//! Address math between a symbol's ELF virtual address (`st_value`), its file
//! offset (what uprobes attach to) and its runtime address in a process.
//!
//! - file offset = V - p_vaddr + p_offset, for the PT_LOAD segment holding V;
//! - runtime address = mapping.start + (file offset - mapping.offset), for the
//!   mapping that shows that file offset;
//! - and the reverse of both, for instruction pointers from perf events.
//!
//! When two mappings show the same file page (segments that share a page in
//! files linked without `-z separate-code`), the one whose permissions match
//! the segment's flags wins. Addresses in `.bss` (past `p_filesz`) have no file
//! offset; [`load_bias`] places them (runtime = V + bias).

use super::maps::Mapping;

/// `PF_X`, `PF_W` of `p_flags`.
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;

/// One PT_LOAD program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
    /// `p_flags` (PF_X = 1, PF_W = 2, PF_R = 4).
    pub flags: u32,
}

impl Segment {
    /// Whether V lies in the part of the segment backed by the file.
    pub fn contains_file_vaddr(&self, vaddr: u64) -> bool {
        vaddr >= self.vaddr && vaddr - self.vaddr < self.filesz
    }

    /// Whether V lies in the segment's memory image (file part and .bss).
    pub fn contains_vaddr(&self, vaddr: u64) -> bool {
        vaddr >= self.vaddr && vaddr - self.vaddr < self.memsz.max(self.filesz)
    }

    /// Whether the file offset lies in the segment's file contents.
    pub fn contains_file_offset(&self, off: u64) -> bool {
        off >= self.offset && off - self.offset < self.filesz
    }
}

/// The PT_LOAD segment whose file contents hold V.
pub fn segment_for_vaddr(segments: &[Segment], vaddr: u64) -> Option<&Segment> {
    segments.iter().find(|s| s.contains_file_vaddr(vaddr))
}

/// The uprobe file offset of V: `V - p_vaddr + p_offset`.
pub fn file_offset_of_vaddr(segments: &[Segment], vaddr: u64) -> Option<u64> {
    segment_for_vaddr(segments, vaddr).map(|s| vaddr - s.vaddr + s.offset)
}

/// The virtual address (`st_value` space) of a file offset.
pub fn vaddr_of_file_offset(segments: &[Segment], off: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| s.contains_file_offset(off))
        .map(|s| off - s.offset + s.vaddr)
}

fn perms_match(m: &Mapping, seg: Option<&Segment>) -> bool {
    seg.is_none_or(|s| m.perms.exec == (s.flags & PF_X != 0))
}

/// The runtime address of a file offset: `start + (off - offset)` of the
/// mapping showing it; `segment` (the one holding the offset) breaks ties.
pub fn runtime_address_of_file_offset(
    mappings: &[Mapping],
    off: u64,
    segment: Option<&Segment>,
) -> Option<u64> {
    let mut showing = mappings.iter().filter(|m| m.contains_file_offset(off));
    let first = showing.clone().next()?;
    let best = showing.find(|m| perms_match(m, segment)).unwrap_or(first);
    best.address_of_file_offset(off)
}

/// The runtime address of V (file offset first, then the load bias for .bss).
pub fn runtime_address_of_vaddr(
    segments: &[Segment],
    mappings: &[Mapping],
    vaddr: u64,
) -> Option<u64> {
    if let Some(seg) = segment_for_vaddr(segments, vaddr) {
        let off = vaddr - seg.vaddr + seg.offset;
        if let Some(addr) = runtime_address_of_file_offset(mappings, off, Some(seg)) {
            return Some(addr);
        }
    }
    segments
        .iter()
        .any(|s| s.contains_vaddr(vaddr))
        .then(|| load_bias(segments, mappings))
        .flatten()
        .map(|bias| vaddr.wrapping_add(bias))
}

/// The file offset shown at a runtime address, and from it V.
pub fn vaddr_of_runtime_address(
    segments: &[Segment],
    mappings: &[Mapping],
    addr: u64,
) -> Option<u64> {
    let m = mappings.iter().find(|m| m.contains_address(addr))?;
    let off = m.file_offset_of_address(addr)?;
    // Prefer the segment whose permissions match the mapping's (shared pages).
    let mut holding = segments.iter().filter(|s| s.contains_file_offset(off));
    let first = holding.clone().next()?;
    let seg = holding
        .find(|s| m.perms.exec == (s.flags & PF_X != 0))
        .unwrap_or(first);
    Some(off - seg.offset + seg.vaddr)
}

/// `runtime - V`, the same for every segment of an object (0 for ET_EXEC),
/// computed from the executable segment and an executable mapping showing it.
pub fn load_bias(segments: &[Segment], mappings: &[Mapping]) -> Option<u64> {
    let pairs = segments
        .iter()
        .flat_map(|s| mappings.iter().map(move |m| (s, m)));
    let mut fallback = None;
    for (s, m) in pairs {
        let Some(start) = m.address_of_file_offset(s.offset) else {
            continue;
        };
        let bias = start.wrapping_sub(s.vaddr);
        if s.flags & PF_X != 0 && m.perms.exec {
            return Some(bias);
        }
        fallback.get_or_insert(bias);
    }
    fallback
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::maps::Perms;

    fn perms(s: &str) -> Perms {
        Perms {
            read: s.contains('r'),
            write: s.contains('w'),
            exec: s.contains('x'),
            shared: false,
        }
    }

    // A typical PIE: text at vaddr 0x1000 (file 0x1000), data at vaddr 0x5e10
    // (file 0x4e10, sharing no page), .bss up to 0x6100.
    fn pie() -> (Vec<Segment>, Vec<Mapping>) {
        let segs = vec![
            Segment {
                vaddr: 0,
                offset: 0,
                filesz: 0x800,
                memsz: 0x800,
                flags: 4,
            },
            Segment {
                vaddr: 0x1000,
                offset: 0x1000,
                filesz: 0x2345,
                memsz: 0x2345,
                flags: 5,
            },
            Segment {
                vaddr: 0x5e10,
                offset: 0x4e10,
                filesz: 0x200,
                memsz: 0x2f0,
                flags: 6,
            },
        ];
        let base = 0x5555_0000_0000;
        let maps = vec![
            Mapping {
                start: base,
                end: base + 0x1000,
                offset: 0,
                perms: perms("r"),
            },
            Mapping {
                start: base + 0x1000,
                end: base + 0x4000,
                offset: 0x1000,
                perms: perms("rx"),
            },
            Mapping {
                start: base + 0x5000,
                end: base + 0x6000,
                offset: 0x4000,
                perms: perms("r"),
            },
            Mapping {
                start: base + 0x6000,
                end: base + 0x7000,
                offset: 0x5000,
                perms: perms("rw"),
            },
        ];
        (segs, maps)
    }

    #[test]
    fn function_vaddr_to_file_offset_to_runtime_and_back() {
        let (segs, maps) = pie();
        let v = 0x1234;
        let off = file_offset_of_vaddr(&segs, v).unwrap();
        assert_eq!(off, 0x1234 - 0x1000 + 0x1000);
        let addr = runtime_address_of_vaddr(&segs, &maps, v).unwrap();
        assert_eq!(addr, 0x5555_0000_0000 + 0x1234);
        assert_eq!(vaddr_of_runtime_address(&segs, &maps, addr), Some(v));
        assert_eq!(vaddr_of_file_offset(&segs, off), Some(v));
        assert_eq!(load_bias(&segs, &maps), Some(0x5555_0000_0000));
    }

    #[test]
    fn data_vaddr_differs_from_file_offset() {
        let (segs, maps) = pie();
        let v = 0x5e20; // .data: file offset 0x4e20, in the page mapped at base+0x5000 (RELRO, now r--)
        assert_eq!(file_offset_of_vaddr(&segs, v), Some(0x4e20));
        let addr = runtime_address_of_vaddr(&segs, &maps, v).unwrap();
        assert_eq!(addr, 0x5555_0000_0000 + 0x5e20);
        assert_eq!(vaddr_of_runtime_address(&segs, &maps, addr), Some(v));
        // .bss: no file offset, placed through the bias.
        assert_eq!(file_offset_of_vaddr(&segs, 0x6050), None);
        assert_eq!(
            runtime_address_of_vaddr(&segs, &maps, 0x6050),
            Some(0x5555_0000_0000 + 0x6050)
        );
        // Outside every segment: nothing.
        assert_eq!(runtime_address_of_vaddr(&segs, &maps, 0x9000), None);
        assert_eq!(file_offset_of_vaddr(&segs, 0x9000), None);
    }

    #[test]
    fn shared_file_page_is_resolved_by_permissions() {
        // Old-style layout: text ends and data starts in the same file page,
        // mapped twice (r-x and rw-). Data V=0x201010 is file 0x1010.
        let segs = vec![
            Segment {
                vaddr: 0,
                offset: 0,
                filesz: 0x1008,
                memsz: 0x1008,
                flags: 5,
            },
            Segment {
                vaddr: 0x201008,
                offset: 0x1008,
                filesz: 0x100,
                memsz: 0x100,
                flags: 6,
            },
        ];
        let maps = vec![
            Mapping {
                start: 0x7000_0000,
                end: 0x7000_2000,
                offset: 0,
                perms: perms("rx"),
            },
            Mapping {
                start: 0x7020_1000,
                end: 0x7020_2000,
                offset: 0x1000,
                perms: perms("rw"),
            },
        ];
        let data = runtime_address_of_vaddr(&segs, &maps, 0x201010).unwrap();
        assert_eq!(data, 0x7020_1010);
        let code = runtime_address_of_vaddr(&segs, &maps, 0x1000).unwrap();
        assert_eq!(code, 0x7000_1000);
        assert_eq!(
            vaddr_of_runtime_address(&segs, &maps, 0x7020_1010),
            Some(0x201010)
        );
        assert_eq!(
            vaddr_of_runtime_address(&segs, &maps, 0x7000_1004),
            Some(0x1004)
        );
    }

    #[test]
    fn non_pie_executable_has_zero_bias() {
        let segs = vec![Segment {
            vaddr: 0x400000,
            offset: 0,
            filesz: 0x3000,
            memsz: 0x3000,
            flags: 5,
        }];
        let maps = vec![Mapping {
            start: 0x400000,
            end: 0x403000,
            offset: 0,
            perms: perms("rx"),
        }];
        assert_eq!(load_bias(&segs, &maps), Some(0));
        assert_eq!(file_offset_of_vaddr(&segs, 0x401234), Some(0x1234));
        assert_eq!(
            runtime_address_of_vaddr(&segs, &maps, 0x401234),
            Some(0x401234)
        );
    }
}
