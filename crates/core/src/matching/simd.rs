//! Vector compares for the engines' scans, at the widest width this CPU has, chosen at run time.
//!
//! Fingerprint scans compare 16-bit prints: 8 per SSE2 compare, 16 per AVX2 compare, 32 per
//! AVX-512 compare. `Portable` is plain Rust for any CPU; every width gives the same answers.

/// The vector instructions a scan uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    Portable,
    Sse2,
    Avx2,
    /// AVX-512 with byte and word compares (AVX-512BW).
    Avx512,
}

impl Simd {
    pub const ALL: [Simd; 4] = [Simd::Portable, Simd::Sse2, Simd::Avx2, Simd::Avx512];

    pub fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            Simd::Sse2 => "sse2",
            Simd::Avx2 => "avx2",
            Simd::Avx512 => "avx512",
        }
    }

    pub fn parse(text: &str) -> Option<Simd> {
        Self::ALL.into_iter().find(|simd| simd.name() == text)
    }

    /// Whether this CPU runs `self`.
    pub fn available(self) -> bool {
        match self {
            Simd::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Sse2 => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => is_x86_feature_detected!("avx512bw"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest this CPU runs.
    pub fn detect() -> Simd {
        Self::ALL
            .into_iter()
            .rev()
            .find(|simd| simd.available())
            .unwrap_or(Simd::Portable)
    }

    /// `self` if this CPU runs it, else the widest it runs: a width it lacks would fault.
    pub fn usable(self) -> Simd {
        if self.available() {
            self
        } else {
            Simd::detect()
        }
    }

    /// The widths this CPU runs, narrowest first.
    pub fn available_all() -> impl Iterator<Item = Simd> {
        Self::ALL.into_iter().filter(|simd| simd.available())
    }

    /// The first index of `prints` holding `a` or `b`.
    #[inline]
    pub(super) fn first_either(self, prints: &[u16], a: u16, b: u16) -> Option<usize> {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SSE2 is part of x86_64.
            Simd::Sse2 => unsafe { x86::first_either_sse2(prints, a, b) },
            // SAFETY (both): callers hold a `usable` width, one this CPU has.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { x86::first_either_avx2(prints, a, b) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { x86::first_either_avx512(prints, a, b) },
            _ => portable(prints, a, b),
        }
    }

    /// Bit i: `prints[i]` is `a` or `b`, for one block of 32.
    #[inline]
    pub(super) fn mask32(self, prints: &[u16; 32], a: u16, b: u16) -> u32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SSE2 is part of x86_64.
            Simd::Sse2 => unsafe { x86::mask32_sse2(prints, a, b) },
            // SAFETY (both): callers hold a `usable` width, one this CPU has.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { x86::mask32_avx2(prints, a, b) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { x86::mask32_avx512(prints, a, b) },
            _ => prints
                .iter()
                .enumerate()
                .fold(0, |mask, (i, &p)| mask | ((p == a || p == b) as u32) << i),
        }
    }
}

#[inline(always)]
fn portable(prints: &[u16], a: u16, b: u16) -> Option<usize> {
    prints.iter().position(|&p| p == a || p == b)
}

/// The first set lane over `len` elements, given `lanes(at)`: a mask with `LANE` bits per
/// element for the `WIDTH` elements from `at` (`len >= WIDTH`). The last block overlaps the one
/// before it instead of ending element by element.
#[inline(always)]
fn first_lane<const WIDTH: usize, const LANE: u32>(
    len: usize,
    lanes: impl Fn(usize) -> u64,
) -> Option<usize> {
    let mut base = 0;
    while base + WIDTH <= len {
        let mask = lanes(base);
        if mask != 0 {
            return Some(base + (mask.trailing_zeros() / LANE) as usize);
        }
        base += WIDTH;
    }
    if base == len {
        return None;
    }
    let mask = lanes(len - WIDTH) >> (LANE as usize * (base + WIDTH - len));
    (mask != 0).then(|| base + (mask.trailing_zeros() / LANE) as usize)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{first_lane, portable};
    use std::arch::x86_64::*;

    /// Every load reads `WIDTH` elements inside `prints`, which `first_lane` guarantees.
    #[target_feature(enable = "sse2")]
    pub unsafe fn first_either_sse2(prints: &[u16], a: u16, b: u16) -> Option<usize> {
        if prints.len() < 8 {
            return portable(prints, a, b);
        }
        let (a, b) = (_mm_set1_epi16(a as i16), _mm_set1_epi16(b as i16));
        first_lane::<8, 2>(prints.len(), |at| {
            let v = _mm_loadu_si128(prints.as_ptr().add(at) as *const __m128i);
            let hits = _mm_or_si128(_mm_cmpeq_epi16(v, a), _mm_cmpeq_epi16(v, b));
            _mm_movemask_epi8(hits) as u32 as u64
        })
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn first_either_avx2(prints: &[u16], a: u16, b: u16) -> Option<usize> {
        if prints.len() < 16 {
            return first_either_sse2(prints, a, b);
        }
        let (a, b) = (_mm256_set1_epi16(a as i16), _mm256_set1_epi16(b as i16));
        first_lane::<16, 2>(prints.len(), |at| {
            let v = _mm256_loadu_si256(prints.as_ptr().add(at) as *const __m256i);
            let hits = _mm256_or_si256(_mm256_cmpeq_epi16(v, a), _mm256_cmpeq_epi16(v, b));
            _mm256_movemask_epi8(hits) as u32 as u64
        })
    }

    #[target_feature(enable = "sse2")]
    pub unsafe fn mask32_sse2(prints: &[u16; 32], a: u16, b: u16) -> u32 {
        let (a, b) = (_mm_set1_epi16(a as i16), _mm_set1_epi16(b as i16));
        let mut mask = 0;
        for block in 0..4 {
            let v = _mm_loadu_si128(prints.as_ptr().add(8 * block) as *const __m128i);
            let hits = _mm_or_si128(_mm_cmpeq_epi16(v, a), _mm_cmpeq_epi16(v, b));
            // Signed saturation keeps 0 and -1 lanes: one byte per element.
            let bytes = _mm_packs_epi16(hits, _mm_setzero_si128());
            mask |= (_mm_movemask_epi8(bytes) as u32 & 0xff) << (8 * block);
        }
        mask
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn mask32_avx2(prints: &[u16; 32], a: u16, b: u16) -> u32 {
        let (a, b) = (_mm256_set1_epi16(a as i16), _mm256_set1_epi16(b as i16));
        let lanes = |at: usize| {
            let v = _mm256_loadu_si256(prints.as_ptr().add(at) as *const __m256i);
            let hits = _mm256_or_si256(_mm256_cmpeq_epi16(v, a), _mm256_cmpeq_epi16(v, b));
            _mm256_movemask_epi8(hits) as u32
        };
        // Two bits per element in each half: one bit each, the second half above the first.
        let (low, high) = (lanes(0), lanes(16));
        compress(low) | compress(high) << 16
    }

    #[target_feature(enable = "avx512bw")]
    pub unsafe fn mask32_avx512(prints: &[u16; 32], a: u16, b: u16) -> u32 {
        let v = _mm512_loadu_si512(prints.as_ptr() as *const __m512i);
        let (a, b) = (_mm512_set1_epi16(a as i16), _mm512_set1_epi16(b as i16));
        _mm512_cmpeq_epi16_mask(v, a) | _mm512_cmpeq_epi16_mask(v, b)
    }

    /// Every other bit of `mask` (both bits of a 16-bit lane are equal), packed.
    #[inline(always)]
    fn compress(mask: u32) -> u32 {
        let mut x = mask & 0x5555_5555;
        x = (x | x >> 1) & 0x3333_3333;
        x = (x | x >> 2) & 0x0f0f_0f0f;
        x = (x | x >> 4) & 0x00ff_00ff;
        (x | x >> 8) & 0x0000_ffff
    }

    #[target_feature(enable = "avx512bw")]
    pub unsafe fn first_either_avx512(prints: &[u16], a: u16, b: u16) -> Option<usize> {
        if prints.len() < 32 {
            return first_either_avx2(prints, a, b);
        }
        let (a, b) = (_mm512_set1_epi16(a as i16), _mm512_set1_epi16(b as i16));
        first_lane::<32, 1>(prints.len(), |at| {
            let v = _mm512_loadu_si512(prints.as_ptr().add(at) as *const __m512i);
            (_mm512_cmpeq_epi16_mask(v, a) | _mm512_cmpeq_epi16_mask(v, b)) as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every width this CPU has finds what the portable scan finds, at every length and
        /// offset (the vector paths switch width at 8, 16 and 32 elements).
        #[test]
        fn every_width_finds_the_first_of_either_key(
            prints in prop::collection::vec(0u16..6, 0..100),
            from in 0usize..8,
            a in 0u16..6,
            b in 0u16..6,
        ) {
            let prints = &prints[from.min(prints.len())..];
            for simd in Simd::available_all() {
                prop_assert_eq!(simd.first_either(prints, a, b), portable(prints, a, b), "{:?}", simd);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn every_width_masks_a_block_alike(
            prints in prop::array::uniform32(0u16..4),
            a in 0u16..4,
            b in 0u16..4,
        ) {
            let want = Simd::Portable.mask32(&prints, a, b);
            for simd in Simd::available_all() {
                prop_assert_eq!(simd.mask32(&prints, a, b), want, "{:?}", simd);
            }
        }
    }

    #[test]
    fn names_parse_back_and_the_portable_scan_runs_anywhere() {
        for simd in Simd::ALL {
            assert_eq!(Simd::parse(simd.name()), Some(simd));
        }
        assert!(Simd::Portable.available() && Simd::detect().available());
    }
}
