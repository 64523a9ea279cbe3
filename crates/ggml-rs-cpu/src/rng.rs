//! A tiny xorshift generator for tests and benchmarks (reproducible data without a dependency).

pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// uniform in [lo, hi)
    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// uniform integer in [lo, hi]
    pub fn i32_in(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i32
    }

    pub fn fill_bytes(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next_u64() as u8;
        }
    }

    /// `n` values shaped like model weights/activations: mostly small, a few outliers, some
    /// exact zeros and repeated values (ties in the scale searches)
    pub fn model_like(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| match self.next_u64() % 64 {
                0 => 0.0,
                1 => self.f32_in(-8.0, 8.0),
                2 => 0.5,
                _ => self.f32_in(-1.0, 1.0) * self.f32_in(0.0, 1.0),
            })
            .collect()
    }
}
