//! AVX-512 + GFNI kernels: as the AVX-512 ones, but every multiplication by a constant in
//! GF(2^8) (by 2 in Horner's rule for Q, by any c in recovery) is one GF2P8AFFINEQB: a
//! multiplication by a constant is linear over GF(2), so it is an 8x8 bit matrix applied to
//! every byte, whatever the field polynomial (0x11d here). Only reachable through
//! [`super::Kernel::gfni`], which checks the CPU first.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// The GF2P8AFFINEQB matrix of multiplication by `c` in GF(2^8) mod 0x11d: byte 7-i of the
/// matrix selects the input bits whose products have bit i set.
fn matrix(c: u8) -> i64 {
    let mut m = 0u64;
    for i in 0..8 {
        let mut row = 0u8;
        for j in 0..8 {
            if super::gf::mul(c, 1 << j) >> i & 1 == 1 {
                row |= 1 << j;
            }
        }
        m |= (row as u64) << (8 * (7 - i));
    }
    m as i64
}

super::simd::simd_kernels! {
    feature: "avx512f,avx512bw,gfni",
    vector: __m512i,
    width: 64,
    load: _mm512_loadu_si512,
    store: _mm512_storeu_si512,
    stream: _mm512_stream_si512,
    xor: _mm512_xor_si512,
    mul2_const: { _mm512_set1_epi64(matrix(2)) },
    mul2: |v, m| { _mm512_gf2p8affine_epi64_epi8::<0>(v, m) },
    mulc_const: |c| {
        let m = _mm512_set1_epi64(matrix(c));
        (m, m, m)
    },
    mulc: |v, k| { _mm512_gf2p8affine_epi64_epi8::<0>(v, k.0) },
}
