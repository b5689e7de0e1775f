//! SSSE3 kernels, for x86-64 CPUs without AVX2: 16-byte vectors, multiply-by-2 from the sign
//! bits, multiplication by a constant with two 16-entry pshufb nibble tables (as Linux raid6 and
//! SnapRAID do). Only reachable through [`super::Kernel::ssse3`], which checks the CPU first.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

super::simd::simd_kernels! {
    feature: "ssse3",
    vector: __m128i,
    width: 16,
    load: _mm_loadu_si128,
    store: _mm_storeu_si128,
    stream: _mm_stream_si128,
    xor: _mm_xor_si128,
    mul2_const: { _mm_set1_epi8(0x1d) },
    mul2: |v, poly| {
        let high = _mm_cmpgt_epi8(_mm_setzero_si128(), v); // 0xff where the top bit is set
        _mm_xor_si128(_mm_add_epi8(v, v), _mm_and_si128(high, poly))
    },
    mulc_const: |c| {
        let (lo, hi) = super::simd::nibble_tables::<16>(c);
        // SAFETY: the tables are 16 bytes each.
        unsafe {
            (
                _mm_loadu_si128(lo.as_ptr() as *const __m128i),
                _mm_loadu_si128(hi.as_ptr() as *const __m128i),
                _mm_set1_epi8(0x0f),
            )
        }
    },
    mulc: |v, k| {
        let (lo, hi, mask) = k;
        let l = _mm_shuffle_epi8(lo, _mm_and_si128(v, mask));
        let h = _mm_shuffle_epi8(hi, _mm_and_si128(_mm_srli_epi16(v, 4), mask));
        _mm_xor_si128(l, h)
    },
}
