//! AVX2 kernels: 32-byte XOR, RAID-6 P+Q by Horner's rule with a vector multiply-by-2, and
//! multiply-accumulate by a constant with two 16-entry pshufb nibble tables (as Linux raid6
//! and ISA-L do). Only reachable through [`super::Kernel::avx2`], which checks the CPU first.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::gf;

/// dst ^= src.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn xor_into_avx2(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n bounds both slices; unaligned loads and stores are allowed.
        unsafe {
            let a = _mm256_loadu_si256(dst.as_ptr().add(i) as *const __m256i);
            let b = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
            _mm256_storeu_si256(
                dst.as_mut_ptr().add(i) as *mut __m256i,
                _mm256_xor_si256(a, b),
            );
        }
        i += 32;
    }
    for j in i..n {
        dst[j] ^= src[j];
    }
}

/// Multiplies 32 field elements by 2.
#[inline]
#[target_feature(enable = "avx2")]
fn mul2(v: __m256i, poly: __m256i) -> __m256i {
    let high = _mm256_cmpgt_epi8(_mm256_setzero_si256(), v); // 0xff where the top bit is set
    _mm256_xor_si256(_mm256_add_epi8(v, v), _mm256_and_si256(high, poly))
}

/// # Safety
/// The CPU must support AVX2; every data slice is at least `p.len()` long, as is `q`.
#[target_feature(enable = "avx2")]
unsafe fn gen_pq_avx2(data: &[&[u8]], p: &mut [u8], mut q: Option<&mut [u8]>) {
    let len = p.len();
    let last = data.len() - 1;
    let poly = _mm256_set1_epi8(0x1d);
    let mut i = 0;
    // Two vectors per step: independent dependency chains keep both load ports busy.
    match q.as_deref_mut() {
        None => {
            while i + 64 <= len {
                // SAFETY: i + 64 <= len, and every data slice holds at least len bytes.
                unsafe {
                    let at = |s: &[u8], k: usize| {
                        _mm256_loadu_si256(s.as_ptr().add(i + k) as *const __m256i)
                    };
                    let mut p0 = at(data[last], 0);
                    let mut p1 = at(data[last], 32);
                    for d in &data[..last] {
                        p0 = _mm256_xor_si256(p0, at(d, 0));
                        p1 = _mm256_xor_si256(p1, at(d, 32));
                    }
                    _mm256_storeu_si256(p.as_mut_ptr().add(i) as *mut __m256i, p0);
                    _mm256_storeu_si256(p.as_mut_ptr().add(i + 32) as *mut __m256i, p1);
                }
                i += 64;
            }
        }
        Some(q) => {
            while i + 64 <= len {
                // SAFETY: i + 64 <= len, and every data slice and q hold at least len bytes.
                unsafe {
                    let at = |s: &[u8], k: usize| {
                        _mm256_loadu_si256(s.as_ptr().add(i + k) as *const __m256i)
                    };
                    let mut p0 = at(data[last], 0);
                    let mut p1 = at(data[last], 32);
                    let (mut q0, mut q1) = (p0, p1);
                    for d in data[..last].iter().rev() {
                        let (v0, v1) = (at(d, 0), at(d, 32));
                        p0 = _mm256_xor_si256(p0, v0);
                        p1 = _mm256_xor_si256(p1, v1);
                        q0 = _mm256_xor_si256(mul2(q0, poly), v0);
                        q1 = _mm256_xor_si256(mul2(q1, poly), v1);
                    }
                    _mm256_storeu_si256(p.as_mut_ptr().add(i) as *mut __m256i, p0);
                    _mm256_storeu_si256(p.as_mut_ptr().add(i + 32) as *mut __m256i, p1);
                    _mm256_storeu_si256(q.as_mut_ptr().add(i) as *mut __m256i, q0);
                    _mm256_storeu_si256(q.as_mut_ptr().add(i + 32) as *mut __m256i, q1);
                }
                i += 64;
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
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn mul_xor_avx2(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len().min(src.len());
    let mut lo = [0u8; 32];
    let mut hi = [0u8; 32];
    for x in 0..16u8 {
        lo[x as usize] = gf::mul(c, x);
        lo[x as usize + 16] = lo[x as usize];
        hi[x as usize] = gf::mul(c, x << 4);
        hi[x as usize + 16] = hi[x as usize];
    }
    // SAFETY: the tables are 32 bytes each.
    let (lo_t, hi_t) = unsafe {
        (
            _mm256_loadu_si256(lo.as_ptr() as *const __m256i),
            _mm256_loadu_si256(hi.as_ptr() as *const __m256i),
        )
    };
    let mask = _mm256_set1_epi8(0x0f);
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n bounds both slices.
        unsafe {
            let v = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
            let l = _mm256_shuffle_epi8(lo_t, _mm256_and_si256(v, mask));
            let h = _mm256_shuffle_epi8(hi_t, _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
            let d = _mm256_loadu_si256(dst.as_ptr().add(i) as *const __m256i);
            _mm256_storeu_si256(
                dst.as_mut_ptr().add(i) as *mut __m256i,
                _mm256_xor_si256(d, _mm256_xor_si256(l, h)),
            );
        }
        i += 32;
    }
    for j in i..n {
        dst[j] ^= gf::mul(c, src[j]);
    }
}

pub(super) fn xor_into(dst: &mut [u8], src: &[u8]) {
    // SAFETY: these wrappers are only reachable through Kernel::avx2(), which checked AVX2.
    unsafe { xor_into_avx2(dst, src) }
}

pub(super) fn gen_pq(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>) {
    assert!(
        data.iter().all(|d| d.len() >= p.len()) && q.as_ref().is_none_or(|q| q.len() >= p.len())
    );
    // SAFETY: AVX2 checked by Kernel::avx2(); lengths checked above.
    unsafe { gen_pq_avx2(data, p, q) }
}

pub(super) fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
    // SAFETY: AVX2 checked by Kernel::avx2().
    unsafe { mul_xor_avx2(dst, src, c) }
}
