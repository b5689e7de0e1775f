//! AVX2 kernels: 32-byte vectors, multiply-by-2 from the sign bits, multiplication by a constant
//! with two 16-entry pshufb nibble tables (as Linux raid6 and ISA-L do). Only reachable through
//! [`super::Kernel::avx2`], which checks the CPU first.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

super::simd::simd_kernels! {
    feature: "avx2",
    vector: __m256i,
    width: 32,
    load: _mm256_loadu_si256,
    store: _mm256_storeu_si256,
    stream: _mm256_stream_si256,
    xor: _mm256_xor_si256,
    mul2_const: { _mm256_set1_epi8(0x1d) },
    mul2: |v, poly| {
        let high = _mm256_cmpgt_epi8(_mm256_setzero_si256(), v); // 0xff where the top bit is set
        _mm256_xor_si256(_mm256_add_epi8(v, v), _mm256_and_si256(high, poly))
    },
    mulc_const: |c| {
        let (lo, hi) = super::simd::nibble_tables::<32>(c);
        // SAFETY: the tables are 32 bytes each.
        unsafe {
            (
                _mm256_loadu_si256(lo.as_ptr() as *const __m256i),
                _mm256_loadu_si256(hi.as_ptr() as *const __m256i),
                _mm256_set1_epi8(0x0f),
            )
        }
    },
    mulc: |v, k| {
        let (lo, hi, mask) = k;
        let l = _mm256_shuffle_epi8(lo, _mm256_and_si256(v, mask));
        let h = _mm256_shuffle_epi8(hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
        _mm256_xor_si256(l, h)
    },
}
