//! AVX-512 kernels (AVX512F + AVX512BW): 64-byte vectors, multiply-by-2 with the carry mask
//! straight from the sign bits, multiplication by a constant with two 16-entry pshufb nibble
//! tables in every 128-bit lane (as ISA-L does). Only reachable through
//! [`super::Kernel::avx512`], which checks the CPU first.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

super::simd::simd_kernels! {
    feature: "avx512f,avx512bw",
    vector: __m512i,
    width: 64,
    load: _mm512_loadu_si512,
    store: _mm512_storeu_si512,
    stream: _mm512_stream_si512,
    xor: _mm512_xor_si512,
    mul2_const: { _mm512_set1_epi8(0x1d) },
    mul2: |v, poly| {
        let high = _mm512_movepi8_mask(v); // bit set where the byte's top bit is set
        _mm512_xor_si512(_mm512_add_epi8(v, v), _mm512_maskz_mov_epi8(high, poly))
    },
    mulc_const: |c| {
        let (lo, hi) = super::simd::nibble_tables::<64>(c);
        // SAFETY: the tables are 64 bytes each.
        unsafe {
            (
                _mm512_loadu_si512(lo.as_ptr() as *const __m512i),
                _mm512_loadu_si512(hi.as_ptr() as *const __m512i),
                _mm512_set1_epi8(0x0f),
            )
        }
    },
    mulc: |v, k| {
        let (lo, hi, mask) = k;
        let l = _mm512_shuffle_epi8(lo, _mm512_and_si512(v, mask));
        let h = _mm512_shuffle_epi8(hi, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask));
        _mm512_xor_si512(l, h)
    },
}
