//! SSSE3 kernels, for x86-64 CPUs without SSSE3: 16-byte XOR, RAID-6 P+Q by Horner's rule with
//! a vector multiply-by-2, and multiply-accumulate by a constant with two 16-entry pshufb nibble
//! tables (as Linux raid6 and SnapRAID do). Only reachable through [`super::Kernel::ssse3`],
//! which checks the CPU first. The same algorithms as the SSSE3 file on half-width vectors.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::gf;

/// dst ^= src.
///
/// # Safety
/// The CPU must support SSSE3.
#[target_feature(enable = "ssse3")]
unsafe fn xor_into_ssse3(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n bounds both slices; unaligned loads and stores are allowed.
        unsafe {
            let a = _mm_loadu_si128(dst.as_ptr().add(i) as *const __m128i);
            let b = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            _mm_storeu_si128(dst.as_mut_ptr().add(i) as *mut __m128i, _mm_xor_si128(a, b));
        }
        i += 16;
    }
    for j in i..n {
        dst[j] ^= src[j];
    }
}

/// Multiplies 16 field elements by 2.
#[inline]
#[target_feature(enable = "ssse3")]
fn mul2(v: __m128i, poly: __m128i) -> __m128i {
    let high = _mm_cmpgt_epi8(_mm_setzero_si128(), v); // 0xff where the top bit is set
    _mm_xor_si128(_mm_add_epi8(v, v), _mm_and_si128(high, poly))
}

/// # Safety
/// The CPU must support SSSE3; every data slice is at least `p.len()` long, as is `q`.
#[target_feature(enable = "ssse3")]
unsafe fn gen_pq_ssse3(data: &[&[u8]], p: &mut [u8], mut q: Option<&mut [u8]>) {
    let len = p.len();
    let last = data.len() - 1;
    let poly = _mm_set1_epi8(0x1d);
    let mut i = 0;
    while i + 16 <= len {
        // SAFETY: i + 16 <= len, and every data slice and q hold at least len bytes.
        unsafe {
            let mut pv = _mm_loadu_si128(data[last].as_ptr().add(i) as *const __m128i);
            let mut qv = pv;
            for d in data[..last].iter().rev() {
                let v = _mm_loadu_si128(d.as_ptr().add(i) as *const __m128i);
                pv = _mm_xor_si128(pv, v);
                qv = _mm_xor_si128(mul2(qv, poly), v);
            }
            _mm_storeu_si128(p.as_mut_ptr().add(i) as *mut __m128i, pv);
            if let Some(q) = q.as_deref_mut() {
                _mm_storeu_si128(q.as_mut_ptr().add(i) as *mut __m128i, qv);
            }
        }
        i += 16;
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
/// The CPU must support SSSE3.
#[target_feature(enable = "ssse3")]
unsafe fn mul_xor_ssse3(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len().min(src.len());
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for x in 0..16u8 {
        lo[x as usize] = gf::mul(c, x);
        hi[x as usize] = gf::mul(c, x << 4);
    }
    // SAFETY: the tables are 16 bytes each.
    let (lo_t, hi_t) = unsafe {
        (
            _mm_loadu_si128(lo.as_ptr() as *const __m128i),
            _mm_loadu_si128(hi.as_ptr() as *const __m128i),
        )
    };
    let mask = _mm_set1_epi8(0x0f);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n bounds both slices.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            let l = _mm_shuffle_epi8(lo_t, _mm_and_si128(v, mask));
            let h = _mm_shuffle_epi8(hi_t, _mm_and_si128(_mm_srli_epi16(v, 4), mask));
            let d = _mm_loadu_si128(dst.as_ptr().add(i) as *const __m128i);
            _mm_storeu_si128(
                dst.as_mut_ptr().add(i) as *mut __m128i,
                _mm_xor_si128(d, _mm_xor_si128(l, h)),
            );
        }
        i += 16;
    }
    for j in i..n {
        dst[j] ^= gf::mul(c, src[j]);
    }
}

pub(super) fn xor_into(dst: &mut [u8], src: &[u8]) {
    // SAFETY: these wrappers are only reachable through Kernel::ssse3(), which checked SSSE3.
    unsafe { xor_into_ssse3(dst, src) }
}

pub(super) fn gen_pq(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>) {
    assert!(
        data.iter().all(|d| d.len() >= p.len()) && q.as_ref().is_none_or(|q| q.len() >= p.len())
    );
    // SAFETY: SSSE3 checked by Kernel::ssse3(); lengths checked above.
    unsafe { gen_pq_ssse3(data, p, q) }
}

pub(super) fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
    // SAFETY: SSSE3 checked by Kernel::ssse3().
    unsafe { mul_xor_ssse3(dst, src, c) }
}
