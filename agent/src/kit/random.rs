//! Reproducible random numbers for the property tests of the families'
//! merge laws (test builds only): a small deterministic generator (no
//! property-testing crate is a dependency). Each family draws its random
//! sections with it in its folder (`family/<name>/random.rs`), with keys
//! from small sets so that rows of different slices meet.

/// xorshift64*: reproducible random numbers for the properties.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn vec(&mut self, max_len: u64, max: u64) -> Vec<u64> {
        (0..self.below(max_len + 1))
            .map(|_| self.below(max))
            .collect()
    }
    /// Distinct ids out of 1..=`of`, at most `max` of them, in random order.
    pub fn ids(&mut self, max: u64, of: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for _ in 0..self.below(max + 1) {
            let id = 1 + self.below(u64::from(of)) as u32;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }
}
