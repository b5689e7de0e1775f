//! Parity: XOR (P), RAID-6 P+Q generation, and recovery of any one or two lost chunks of a row.
//! Kernels sit behind one [`Kernel`] table, one file per implementation; [`Kernel::best`] picks
//! one at run time. `scalar` is the byte-at-a-time reference that every other kernel is checked
//! against. This module knows nothing about members or files.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod gf;
#[cfg(target_arch = "x86_64")]
mod gfni;
mod portable;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(target_arch = "x86_64")]
mod ssse3;

use crate::error::{Error, ErrorKind, Result};

/// Signature of P(+Q) generation: data chunks, P out, optional Q out.
pub type GenPq = fn(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>);

/// One implementation of the parity primitives. All slices of one call have the same length.
pub struct Kernel {
    pub name: &'static str,
    /// dst ^= src
    pub xor_into: fn(dst: &mut [u8], src: &[u8]),
    /// p = XOR of data; q (when given) = sum of g^d * data[d]. Needs at least one data chunk.
    pub gen_pq: GenPq,
    /// dst ^= c * src in GF(2^8)
    pub mul_xor: fn(dst: &mut [u8], src: &[u8], c: u8),
}

/// Byte-at-a-time reference kernel (the oracle).
pub static SCALAR: Kernel = Kernel {
    name: "scalar",
    xor_into: scalar::xor_into,
    gen_pq: scalar::gen_pq,
    mul_xor: scalar::mul_xor,
};

/// Word-at-a-time kernel, portable to every CPU.
pub static PORTABLE: Kernel = Kernel {
    name: "portable",
    xor_into: portable::xor_into,
    gen_pq: portable::gen_pq,
    mul_xor: portable::mul_xor,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Kernel = Kernel {
    name: "avx2",
    xor_into: avx2::xor_into,
    gen_pq: avx2::gen_pq,
    mul_xor: avx2::mul_xor,
};

#[cfg(target_arch = "x86_64")]
static SSSE3: Kernel = Kernel {
    name: "ssse3",
    xor_into: ssse3::xor_into,
    gen_pq: ssse3::gen_pq,
    mul_xor: ssse3::mul_xor,
};

#[cfg(target_arch = "x86_64")]
static AVX512: Kernel = Kernel {
    name: "avx512",
    xor_into: avx512::xor_into,
    gen_pq: avx512::gen_pq,
    mul_xor: avx512::mul_xor,
};

#[cfg(target_arch = "x86_64")]
static GFNI: Kernel = Kernel {
    name: "avx512-gfni",
    xor_into: gfni::xor_into,
    gen_pq: gfni::gen_pq,
    mul_xor: gfni::mul_xor,
};

impl Kernel {
    /// The AVX-512 + GFNI kernel, when this CPU has AVX512F, AVX512BW and GFNI.
    pub fn gfni() -> Option<&'static Kernel> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("gfni")
        {
            return Some(&GFNI);
        }
        None
    }

    /// The AVX-512 kernel, when this CPU has AVX512F and AVX512BW.
    pub fn avx512() -> Option<&'static Kernel> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") {
            return Some(&AVX512);
        }
        None
    }

    /// The SSSE3 kernel, when this CPU has SSSE3.
    pub fn ssse3() -> Option<&'static Kernel> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("ssse3") {
            return Some(&SSSE3);
        }
        None
    }

    /// The AVX2 kernel, when this CPU has AVX2.
    pub fn avx2() -> Option<&'static Kernel> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            return Some(&AVX2);
        }
        None
    }

    /// Every kernel usable on this CPU, reference first.
    pub fn all() -> Vec<&'static Kernel> {
        let mut v = vec![&SCALAR, &PORTABLE];
        v.extend(Kernel::ssse3());
        v.extend(Kernel::avx2());
        v.extend(Kernel::avx512());
        v.extend(Kernel::gfni());
        v
    }

    /// The fastest kernel usable on this CPU, in this order: avx512-gfni, avx512, avx2, ssse3 (when the CPU
    /// has them), then portable.
    pub fn best() -> &'static Kernel {
        Kernel::gfni()
            .or_else(Kernel::avx512)
            .or_else(Kernel::avx2)
            .or_else(Kernel::ssse3)
            .unwrap_or(&PORTABLE)
    }

    /// Multiplies `src` by `c` into `dst` (dst = c * src).
    pub fn mul_into(&self, dst: &mut [u8], src: &[u8], c: u8) {
        dst.fill(0);
        (self.mul_xor)(dst, src, c);
    }

    /// Rebuilds the chunks of one row listed in `missing`. `bufs` holds the D data chunks, then
    /// P, then Q when `parity` is 2; the contents of the missing buffers are ignored and
    /// overwritten. At most `parity` buffers may be missing.
    pub fn recover(&self, bufs: &mut [&mut [u8]], parity: usize, missing: &[usize]) -> Result<()> {
        let total = bufs.len();
        if parity == 0 || parity > 2 || total < parity + 1 {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("recover: {total} chunks with {parity} parity"),
            ));
        }
        let d = total - parity;
        let mut miss: Vec<usize> = missing.to_vec();
        miss.sort_unstable();
        miss.dedup();
        if miss.len() > parity || miss.iter().any(|&m| m >= total) {
            return Err(Error::new(
                ErrorKind::ArrayFailed,
                format!("cannot recover chunks {miss:?} of a row with {d} data and {parity} parity chunks"),
            ));
        }
        let len = bufs[0].len();
        let p_idx = d;
        let q_idx = d + 1;
        let lost_data: Vec<usize> = miss.iter().copied().filter(|&m| m < d).collect();
        let p_lost = miss.contains(&p_idx);
        let q_lost = parity == 2 && miss.contains(&q_idx);

        match lost_data.as_slice() {
            [] => {}
            [x] if !p_lost => {
                let x = *x;
                let (before, rest) = bufs.split_at_mut(x);
                let (target, after) = rest.split_first_mut().expect("x < total");
                target.copy_from_slice(&after[p_idx - x - 1][..len]);
                for b in before.iter().chain(after[..d - x - 1].iter()) {
                    (self.xor_into)(target, b);
                }
            }
            [x] => {
                // P lost too, so Q is present: D_x = (Q ^ Q') / g^x with Q' the syndrome of the rest.
                let x = *x;
                bufs[x].fill(0);
                let (mut sp, mut sq) = scratch_pair(len);
                {
                    let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &**b).collect();
                    (self.gen_pq)(&data, &mut sp, Some(&mut sq));
                }
                (self.xor_into)(&mut sq, bufs[q_idx]);
                let c = gf::inv(gf::pow2(x));
                self.mul_into(bufs[x], &sq, c);
            }
            [x, y] => {
                let (x, y) = (*x, *y);
                bufs[x].fill(0);
                bufs[y].fill(0);
                let (mut pxy, mut qxy) = scratch_pair(len);
                {
                    let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &**b).collect();
                    (self.gen_pq)(&data, &mut pxy, Some(&mut qxy));
                }
                (self.xor_into)(&mut pxy, bufs[p_idx]);
                (self.xor_into)(&mut qxy, bufs[q_idx]);
                // D_x = (Qxy ^ g^y Pxy) / (g^x ^ g^y); D_y = Pxy ^ D_x.
                let gx = gf::pow2(x);
                let gy = gf::pow2(y);
                let c1 = gf::inv(gx ^ gy);
                let c2 = gf::mul(gy, c1);
                (self.mul_xor)(bufs[x], &qxy, c1);
                (self.mul_xor)(bufs[x], &pxy, c2);
                let (lo, hi) = bufs.split_at_mut(y);
                hi[0].copy_from_slice(&pxy);
                (self.xor_into)(hi[0], lo[x]);
            }
            _ => unreachable!("checked above"),
        }

        if p_lost || q_lost {
            let (data, par) = bufs.split_at_mut(d);
            let data: Vec<&[u8]> = data.iter().map(|b| &**b).collect();
            let (p, q) = par.split_at_mut(1);
            match (p_lost, q_lost) {
                (true, true) => (self.gen_pq)(&data, p[0], Some(q[0])),
                (true, false) => (self.gen_pq)(&data, p[0], None),
                (false, true) => {
                    let (mut sp, _) = scratch_pair(len);
                    (self.gen_pq)(&data, &mut sp, Some(q[0]));
                }
                (false, false) => unreachable!(),
            }
        }
        Ok(())
    }
}

thread_local! {
    /// Scratch for recovery, reused per thread: fresh buffers of a few hundred KiB per call cost
    /// page faults that dominated two-chunk recovery (bench --parity, 256 KiB chunks).
    static SCRATCH: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Two scratch buffers of `len` bytes (contents unspecified; every caller overwrites them),
/// handed back to the thread's pool on drop.
fn scratch_pair(len: usize) -> (Scratch, Scratch) {
    (Scratch::take(len), Scratch::take(len))
}

struct Scratch(Vec<u8>);

impl Scratch {
    fn take(len: usize) -> Scratch {
        let mut v = SCRATCH.with(|s| s.borrow_mut().pop()).unwrap_or_default();
        v.resize(len, 0);
        Scratch(v)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < 4 {
                s.push(v);
            }
        });
    }
}

impl std::ops::Deref for Scratch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random bytes (splitmix64, as fixtures/raid6/gen_isal.c).
    fn fill(seed: u64, buf: &mut [u8]) {
        crate::rng::SplitMix64(seed).fill(buf);
    }

    fn row(seed: u64, d: usize, parity: usize, len: usize) -> Vec<Vec<u8>> {
        let mut bufs: Vec<Vec<u8>> = (0..d)
            .map(|i| {
                let mut v = vec![0u8; len];
                fill(seed * 1000 + i as u64, &mut v);
                v
            })
            .collect();
        let mut p = vec![0u8; len];
        let mut q = vec![0u8; len];
        {
            let data: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
            (SCALAR.gen_pq)(&data, &mut p, if parity == 2 { Some(&mut q) } else { None });
        }
        bufs.push(p);
        if parity == 2 {
            bufs.push(q);
        }
        bufs
    }

    #[test]
    fn kernels_match_reference_generation() {
        #[cfg(target_arch = "x86_64")]
        for (feature, name) in [
            (std::is_x86_feature_detected!("ssse3"), "ssse3"),
            (std::is_x86_feature_detected!("avx2"), "avx2"),
            (
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw"),
                "avx512",
            ),
            (
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("gfni"),
                "avx512-gfni",
            ),
        ] {
            // The SIMD kernels this CPU can run are really among those checked.
            assert_eq!(
                Kernel::all().iter().any(|k| k.name == name),
                feature,
                "{name}"
            );
        }
        for k in Kernel::all() {
            for d in 1..15 {
                for len in [1usize, 7, 8, 64, 4096 + 3] {
                    let reference = row(d as u64 + len as u64, d, 2, len);
                    let data: Vec<&[u8]> = reference[..d].iter().map(|b| &b[..]).collect();
                    let mut p = vec![0xaau8; len];
                    let mut q = vec![0x55u8; len];
                    (k.gen_pq)(&data, &mut p, Some(&mut q));
                    assert_eq!(p, reference[d], "{} P d={d} len={len}", k.name);
                    assert_eq!(q, reference[d + 1], "{} Q d={d} len={len}", k.name);
                    let mut p1 = vec![0u8; len];
                    (k.gen_pq)(&data, &mut p1, None);
                    assert_eq!(p1, reference[d]);
                    let mut m = reference[0].clone();
                    let mut mr = reference[0].clone();
                    (k.mul_xor)(&mut m, &reference[d], 0x53);
                    (SCALAR.mul_xor)(&mut mr, &reference[d], 0x53);
                    assert_eq!(m, mr);
                }
            }
        }
    }

    /// Every member count 3..16 and every 1- and 2-failure combination, for P-only and P+Q rows.
    #[test]
    fn recover_every_failure_combination() {
        let len = 256 + 5;
        for k in Kernel::all() {
            for n in 3..=16usize {
                for parity in [1usize, 2] {
                    if n < parity + 2 {
                        continue;
                    }
                    let d = n - parity;
                    let good = row(n as u64 * 7 + parity as u64, d, parity, len);
                    let mut combos: Vec<Vec<usize>> = (0..n).map(|a| vec![a]).collect();
                    if parity == 2 {
                        for a in 0..n {
                            for b in a + 1..n {
                                combos.push(vec![a, b]);
                            }
                        }
                    }
                    for miss in combos {
                        let mut work = good.clone();
                        for &m in &miss {
                            work[m].fill(0xee);
                        }
                        let mut refs: Vec<&mut [u8]> =
                            work.iter_mut().map(|b| &mut b[..]).collect();
                        k.recover(&mut refs, parity, &miss).unwrap();
                        assert_eq!(
                            work, good,
                            "{} n={n} parity={parity} missing={miss:?}",
                            k.name
                        );
                    }
                }
            }
        }
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// P and Q match Intel ISA-L's pq_gen (an independent implementation; fixtures/README.md).
    #[test]
    fn raid6_matches_isal_vectors() {
        let text = include_str!("../../../fixtures/raid6/isal-vectors.txt");
        let mut cases = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (nd, seed, len): (usize, u64, usize) = (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            );
            let data: Vec<Vec<u8>> = (0..nd)
                .map(|i| {
                    let mut v = vec![0u8; len];
                    fill(seed + i as u64, &mut v);
                    v
                })
                .collect();
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            for k in Kernel::all() {
                let mut p = vec![0u8; len];
                let mut q = vec![0u8; len];
                (k.gen_pq)(&refs, &mut p, Some(&mut q));
                assert_eq!(p, unhex(f[3]), "{} P, {nd} data", k.name);
                assert_eq!(q, unhex(f[4]), "{} Q, {nd} data", k.name);
            }
            cases += 1;
        }
        assert_eq!(cases, 8);
    }

    #[test]
    fn too_many_failures_is_an_error() {
        let mut work = row(1, 3, 1, 16);
        let mut refs: Vec<&mut [u8]> = work.iter_mut().map(|b| &mut b[..]).collect();
        assert!(SCALAR.recover(&mut refs, 1, &[0, 1]).is_err());
    }
}
