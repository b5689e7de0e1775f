//! Scalar byte-at-a-time parity kernels: the reference every faster kernel is checked against.

use super::gf;

pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

pub fn gen_pq(data: &[&[u8]], p: &mut [u8], mut q: Option<&mut [u8]>) {
    for i in 0..p.len() {
        let mut pv = 0u8;
        let mut qv = 0u8;
        for (d, chunk) in data.iter().enumerate() {
            pv ^= chunk[i];
            qv ^= gf::mul(gf::pow2(d), chunk[i]);
        }
        p[i] = pv;
        if let Some(q) = q.as_deref_mut() {
            q[i] = qv;
        }
    }
}

pub fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= gf::mul(c, *s);
    }
}
