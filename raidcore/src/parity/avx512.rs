//! AVX-512 kernels (AVX512F + AVX512BW): 64-byte XOR, RAID-6 P+Q by Horner's rule with a
//! vector multiply-by-2 (the carry mask straight from the byte sign bits), and
//! multiply-accumulate by a constant with two 16-entry pshufb nibble tables broadcast to every
//! 128-bit lane (as ISA-L does). Only reachable through [`super::Kernel::avx512`], which checks
//! the CPU first. The same algorithms as the AVX-512 file on double-width vectors.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::gf;

/// Outputs at least this long are written with non-temporal stores.
const STREAM_FROM: usize = 128 << 10;

/// dst ^= src.
///
/// # Safety
/// The CPU must support AVX-512.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn xor_into_avx512(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n bounds both slices; unaligned loads and stores are allowed.
        unsafe {
            let a = _mm512_loadu_si512(dst.as_ptr().add(i) as *const __m512i);
            let b = _mm512_loadu_si512(src.as_ptr().add(i) as *const __m512i);
            _mm512_storeu_si512(
                dst.as_mut_ptr().add(i) as *mut __m512i,
                _mm512_xor_si512(a, b),
            );
        }
        i += 64;
    }
    for j in i..n {
        dst[j] ^= src[j];
    }
}

/// Multiplies 64 field elements by 2.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn mul2(v: __m512i, poly: __m512i) -> __m512i {
    let high = _mm512_movepi8_mask(v); // bit set where the byte's top bit is set
    _mm512_xor_si512(_mm512_add_epi8(v, v), _mm512_maskz_mov_epi8(high, poly))
}

/// # Safety
/// The CPU must support AVX-512; every data slice is at least `p.len()` long, as is `q`.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn gen_pq_avx512(data: &[&[u8]], p: &mut [u8], mut q: Option<&mut [u8]>) {
    let len = p.len();
    let last = data.len() - 1;
    let poly = _mm512_set1_epi8(0x1d);
    let mut i = 0;
    // Large outputs go around the cache (non-temporal stores need 64-byte alignment), so the
    // data being read keeps it.
    let stream = len >= STREAM_FROM && (p.as_ptr() as usize).is_multiple_of(64);
    // Two vectors per step: independent dependency chains keep both load ports busy.
    match q.as_deref_mut() {
        None => {
            while i + 128 <= len {
                // SAFETY: i + 128 <= len, and every data slice holds at least len bytes.
                unsafe {
                    let at = |s: &[u8], k: usize| {
                        _mm512_loadu_si512(s.as_ptr().add(i + k) as *const __m512i)
                    };
                    let mut p0 = at(data[last], 0);
                    let mut p1 = at(data[last], 64);
                    for d in &data[..last] {
                        p0 = _mm512_xor_si512(p0, at(d, 0));
                        p1 = _mm512_xor_si512(p1, at(d, 64));
                    }
                    if stream {
                        _mm512_stream_si512(p.as_mut_ptr().add(i) as *mut __m512i, p0);
                        _mm512_stream_si512(p.as_mut_ptr().add(i + 64) as *mut __m512i, p1);
                    } else {
                        _mm512_storeu_si512(p.as_mut_ptr().add(i) as *mut __m512i, p0);
                        _mm512_storeu_si512(p.as_mut_ptr().add(i + 64) as *mut __m512i, p1);
                    }
                }
                i += 128;
            }
            if stream {
                _mm_sfence();
            }
        }
        Some(q) => {
            let stream_q = stream && (q.as_ptr() as usize).is_multiple_of(64);
            while i + 256 <= len {
                // SAFETY: i + 256 <= len, and every data slice and q hold at least len bytes.
                unsafe {
                    let at = |s: &[u8], k: usize| {
                        _mm512_loadu_si512(s.as_ptr().add(i + k) as *const __m512i)
                    };
                    let mut pv = [
                        at(data[last], 0),
                        at(data[last], 64),
                        at(data[last], 128),
                        at(data[last], 192),
                    ];
                    let mut qv = pv;
                    for d in data[..last].iter().rev() {
                        for k in 0..4 {
                            let v = at(d, 64 * k);
                            pv[k] = _mm512_xor_si512(pv[k], v);
                            qv[k] = _mm512_xor_si512(mul2(qv[k], poly), v);
                        }
                    }
                    for k in 0..4 {
                        let (pp, qq) = (
                            p.as_mut_ptr().add(i + 64 * k) as *mut __m512i,
                            q.as_mut_ptr().add(i + 64 * k) as *mut __m512i,
                        );
                        if stream_q {
                            _mm512_stream_si512(pp, pv[k]);
                            _mm512_stream_si512(qq, qv[k]);
                        } else {
                            _mm512_storeu_si512(pp, pv[k]);
                            _mm512_storeu_si512(qq, qv[k]);
                        }
                    }
                }
                i += 256;
            }
            if stream_q {
                _mm_sfence();
            }
        }
    }
    for j in i..len {
        let mut pv = data[last][j];
        let mut qv = pv;
        for d in data[..last].iter().rev() {
            pv ^= d[j];
            qv = gf::mul(qv, 2) ^ d[j];
        }
        p[j] = pv;
        if let Some(q) = q.as_deref_mut() {
            q[j] = qv;
        }
    }
}

/// dst ^= c * src.
///
/// # Safety
/// The CPU must support AVX-512.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn mul_xor_avx512(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len().min(src.len());
    let mut lo = [0u8; 64];
    let mut hi = [0u8; 64];
    for x in 0..64usize {
        lo[x] = gf::mul(c, (x % 16) as u8);
        hi[x] = gf::mul(c, ((x % 16) as u8) << 4);
    }
    // SAFETY: the tables are 64 bytes each.
    let (lo_t, hi_t) = unsafe {
        (
            _mm512_loadu_si512(lo.as_ptr() as *const __m512i),
            _mm512_loadu_si512(hi.as_ptr() as *const __m512i),
        )
    };
    let mask = _mm512_set1_epi8(0x0f);
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n bounds both slices.
        unsafe {
            let v = _mm512_loadu_si512(src.as_ptr().add(i) as *const __m512i);
            let l = _mm512_shuffle_epi8(lo_t, _mm512_and_si512(v, mask));
            let h = _mm512_shuffle_epi8(hi_t, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask));
            let d = _mm512_loadu_si512(dst.as_ptr().add(i) as *const __m512i);
            _mm512_storeu_si512(
                dst.as_mut_ptr().add(i) as *mut __m512i,
                _mm512_xor_si512(d, _mm512_xor_si512(l, h)),
            );
        }
        i += 64;
    }
    for j in i..n {
        dst[j] ^= gf::mul(c, src[j]);
    }
}

pub(super) fn xor_into(dst: &mut [u8], src: &[u8]) {
    // SAFETY: these wrappers are only reachable through Kernel::avx512(), which checked AVX-512.
    unsafe { xor_into_avx512(dst, src) }
}

pub(super) fn gen_pq(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>) {
    assert!(
        data.iter().all(|d| d.len() >= p.len()) && q.as_ref().is_none_or(|q| q.len() >= p.len())
    );
    // SAFETY: AVX-512 checked by Kernel::avx512(); lengths checked above.
    unsafe { gen_pq_avx512(data, p, q) }
}

pub(super) fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
    // SAFETY: AVX-512 checked by Kernel::avx512().
    unsafe { mul_xor_avx512(dst, src, c) }
}
