//! Log2 histograms, filled in the kernel and read in user space.
//!
//! Bucket `i` counts values `v` with `2^i <= v < 2^(i+1)`; bucket 0 also holds 0.

/// Number of log2 buckets: enough for any `u64` value.
pub const LOG2_BUCKETS: usize = 64;

/// Index of the log2 bucket of `v` (0 for 0 and 1, 63 for `u64::MAX`).
///
/// Written without loops or `leading_zeros` so that it compiles to a short,
/// branch-light sequence the BPF verifier accepts on every kernel.
#[inline(always)]
pub fn log2_bucket(v: u64) -> usize {
    let mut v = v;
    let mut r: u64 = 0;
    let mut shift: u64;
    shift = ((v > 0xFFFF_FFFF) as u64) << 5;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xFFFF) as u64) << 4;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xFF) as u64) << 3;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xF) as u64) << 2;
    v >>= shift;
    r |= shift;
    shift = ((v > 0x3) as u64) << 1;
    v >>= shift;
    r |= shift;
    r |= v >> 1;
    // LLVM proves `r < 64` and would drop the mask below; verifiers before
    // about 6.12 cannot prove it again and reject the map-value arithmetic
    // that indexes a histogram with `r` ("math between map_value pointer and
    // register with unbounded min value", seen on 5.10 and 6.1). A volatile
    // read hides the proof from LLVM on the BPF target, so the mask stays in
    // the emitted code and bounds the index for every verifier.
    #[cfg(target_arch = "bpf")]
    // SAFETY: a read of a local the function owns, through a valid reference.
    let r = unsafe { core::ptr::read_volatile(&r) };
    (r as usize) & (LOG2_BUCKETS - 1)
}

/// Lower bound (inclusive) of bucket `i`.
pub const fn bucket_lower(i: usize) -> u64 {
    if i == 0 { 0 } else { 1u64 << i }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_bucket_matches_leading_zeros() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 0);
        for shift in 1..64u32 {
            let v = 1u64 << shift;
            assert_eq!(log2_bucket(v), shift as usize, "2^{shift}");
            assert_eq!(log2_bucket(v - 1), shift as usize - 1, "2^{shift}-1");
            assert_eq!(log2_bucket(v | (v - 1)), shift as usize, "2^{shift}|low");
        }
        assert_eq!(log2_bucket(u64::MAX), 63);
        assert_eq!(log2_bucket(1000), 9);
    }

    #[test]
    fn bucket_lower_bounds() {
        assert_eq!(bucket_lower(0), 0);
        assert_eq!(bucket_lower(1), 2);
        assert_eq!(bucket_lower(10), 1024);
    }
}
