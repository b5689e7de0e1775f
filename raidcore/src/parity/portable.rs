//! Portable word-at-a-time kernels (u64 lanes; the compiler vectorises the loops). Correct on
//! every CPU; the default until SIMD kernels are added beside this file.

use super::gf;
use std::sync::OnceLock;

const LANE: usize = 8;

#[inline]
fn load(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b.try_into().expect("8-byte lane"))
}

/// Multiplies eight field elements packed in a u64 by g = 2.
#[inline]
fn mul2(x: u64) -> u64 {
    let hi = (x >> 7) & 0x0101_0101_0101_0101;
    ((x << 1) & 0xfefe_fefe_fefe_fefe) ^ (hi * 0x1d)
}

pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    // 64-byte blocks of u64 lanes: LLVM turns this into full-width vector XORs.
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut dc = dst.chunks_exact_mut(64);
    let mut sc = src.chunks_exact(64);
    for (d, s) in (&mut dc).zip(&mut sc) {
        let mut lanes = [0u64; 8];
        for (i, l) in lanes.iter_mut().enumerate() {
            *l = load(&d[i * LANE..(i + 1) * LANE]) ^ load(&s[i * LANE..(i + 1) * LANE]);
        }
        for (i, l) in lanes.iter().enumerate() {
            d[i * LANE..(i + 1) * LANE].copy_from_slice(&l.to_ne_bytes());
        }
    }
    for (d, s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *d ^= *s;
    }
}

pub fn gen_pq(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>) {
    let len = p.len();
    let whole = len - len % LANE;
    match q {
        None => {
            p.copy_from_slice(&data[0][..len]);
            for d in &data[1..] {
                xor_into(p, d);
            }
        }
        Some(q) => {
            // Horner's rule from the highest data index: q = q*g ^ D_d.
            let last = data.len() - 1;
            for off in (0..whole).step_by(LANE) {
                let mut pv = load(&data[last][off..off + LANE]);
                let mut qv = pv;
                for d in data[..last].iter().rev() {
                    let v = load(&d[off..off + LANE]);
                    pv ^= v;
                    qv = mul2(qv) ^ v;
                }
                p[off..off + LANE].copy_from_slice(&pv.to_ne_bytes());
                q[off..off + LANE].copy_from_slice(&qv.to_ne_bytes());
            }
            for i in whole..len {
                let mut pv = data[last][i];
                let mut qv = pv;
                for d in data[..last].iter().rev() {
                    pv ^= d[i];
                    qv = gf::mul(qv, 2) ^ d[i];
                }
                p[i] = pv;
                q[i] = qv;
            }
        }
    }
}

fn mul_table() -> &'static [[u8; 256]; 256] {
    static TABLE: OnceLock<Box<[[u8; 256]; 256]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([[0u8; 256]; 256]);
        for (a, row) in t.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                *v = gf::mul(a as u8, b as u8);
            }
        }
        t
    })
}

pub fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
    match c {
        0 => {}
        1 => xor_into(dst, src),
        _ => {
            let row = &mul_table()[c as usize];
            for (d, s) in dst.iter_mut().zip(src) {
                *d ^= row[*s as usize];
            }
        }
    }
}
