//! The SIMD kernels' shared body: one macro writes XOR, P+Q generation (Horner's rule for Q,
//! two vectors per step so two dependency chains overlap, non-temporal stores for outputs of
//! 128 KiB and more) and multiply-accumulate by a constant for a vector type, given its
//! load/store/xor intrinsics, its multiply-by-2 and its multiply-by-constant. Each ISA file
//! (ssse3, avx2, avx512, gfni) is one invocation.

/// Outputs at least this long are written with non-temporal stores (when aligned), so the data
/// being read keeps the cache.
pub(super) const STREAM_FROM: usize = 128 << 10;

macro_rules! simd_kernels {
    (
        feature: $feat:literal,
        vector: $V:ty,
        width: $W:literal,
        load: $load:ident,
        store: $store:ident,
        stream: $stream:ident,
        xor: $xor:ident,
        mul2_const: $k2:block,
        mul2: |$a:ident, $ka:ident| $mul2:block,
        mulc_const: |$c:ident| $kc:block,
        mulc: |$b:ident, $kb:ident| $mulc:block $(,)?
    ) => {
        use super::gf;
        use super::simd::STREAM_FROM;

        /// Multiplies every byte of `$a` by 2 in GF(2^8); `$ka` from `mul2_const`.
        #[inline]
        #[target_feature(enable = $feat)]
        fn mul2($a: $V, $ka: $V) -> $V $mul2

        /// The constants of multiplication by `$c`.
        #[inline]
        #[target_feature(enable = $feat)]
        fn mulc_const($c: u8) -> ($V, $V, $V) $kc

        /// Multiplies every byte of `$b` by the constant `$kb` stands for.
        #[inline]
        #[target_feature(enable = $feat)]
        fn mulc($b: $V, $kb: ($V, $V, $V)) -> $V $mulc

        /// dst ^= src.
        ///
        /// # Safety
        /// The CPU must support the kernel's features.
        #[target_feature(enable = $feat)]
        unsafe fn xor_into_simd(dst: &mut [u8], src: &[u8]) {
            let n = dst.len().min(src.len());
            let mut i = 0;
            while i + $W <= n {
                // SAFETY: i + W <= n bounds both slices; unaligned loads and stores are allowed.
                unsafe {
                    let a = $load(dst.as_ptr().add(i) as *const $V);
                    let b = $load(src.as_ptr().add(i) as *const $V);
                    $store(dst.as_mut_ptr().add(i) as *mut $V, $xor(a, b));
                }
                i += $W;
            }
            for j in i..n {
                dst[j] ^= src[j];
            }
        }

        /// # Safety
        /// The CPU must support the kernel's features; every data slice is at least `p.len()`
        /// long, as is `q`.
        #[target_feature(enable = $feat)]
        unsafe fn gen_pq_simd(data: &[&[u8]], p: &mut [u8], mut q: Option<&mut [u8]>) {
            let len = p.len();
            let last = data.len() - 1;
            let k2 = $k2;
            let stream = len >= STREAM_FROM
                && p.as_ptr() as usize % $W == 0
                && q.as_ref().is_none_or(|q| q.as_ptr() as usize % $W == 0);
            let mut i = 0;
            while i + 2 * $W <= len {
                // SAFETY: i + 2W <= len, and every data slice and q hold at least len bytes.
                unsafe {
                    let at = |s: &[u8], k: usize| $load(s.as_ptr().add(i + k) as *const $V);
                    let put = |o: *mut u8, v: $V| {
                        if stream {
                            $stream(o as *mut $V, v)
                        } else {
                            $store(o as *mut $V, v)
                        }
                    };
                    let mut p0 = at(data[last], 0);
                    let mut p1 = at(data[last], $W);
                    match q.as_deref_mut() {
                        None => {
                            for d in &data[..last] {
                                p0 = $xor(p0, at(d, 0));
                                p1 = $xor(p1, at(d, $W));
                            }
                        }
                        Some(q) => {
                            let (mut q0, mut q1) = (p0, p1);
                            for d in data[..last].iter().rev() {
                                let (v0, v1) = (at(d, 0), at(d, $W));
                                p0 = $xor(p0, v0);
                                p1 = $xor(p1, v1);
                                q0 = $xor(mul2(q0, k2), v0);
                                q1 = $xor(mul2(q1, k2), v1);
                            }
                            put(q.as_mut_ptr().add(i), q0);
                            put(q.as_mut_ptr().add(i + $W), q1);
                        }
                    }
                    put(p.as_mut_ptr().add(i), p0);
                    put(p.as_mut_ptr().add(i + $W), p1);
                }
                i += 2 * $W;
            }
            if stream {
                std::arch::x86_64::_mm_sfence();
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
        /// The CPU must support the kernel's features.
        #[target_feature(enable = $feat)]
        unsafe fn mul_xor_simd(dst: &mut [u8], src: &[u8], c: u8) {
            let n = dst.len().min(src.len());
            let k = mulc_const(c);
            let mut i = 0;
            while i + $W <= n {
                // SAFETY: i + W <= n bounds both slices.
                unsafe {
                    let v = $load(src.as_ptr().add(i) as *const $V);
                    let d = $load(dst.as_ptr().add(i) as *const $V);
                    $store(dst.as_mut_ptr().add(i) as *mut $V, $xor(d, mulc(v, k)));
                }
                i += $W;
            }
            for j in i..n {
                dst[j] ^= gf::mul(c, src[j]);
            }
        }

        pub(super) fn xor_into(dst: &mut [u8], src: &[u8]) {
            // SAFETY: only reachable through the kernel's constructor, which checked the CPU.
            unsafe { xor_into_simd(dst, src) }
        }

        pub(super) fn gen_pq(data: &[&[u8]], p: &mut [u8], q: Option<&mut [u8]>) {
            assert!(
                data.iter().all(|d| d.len() >= p.len())
                    && q.as_ref().is_none_or(|q| q.len() >= p.len())
            );
            // SAFETY: the CPU was checked by the kernel's constructor; lengths checked above.
            unsafe { gen_pq_simd(data, p, q) }
        }

        pub(super) fn mul_xor(dst: &mut [u8], src: &[u8], c: u8) {
            // SAFETY: only reachable through the kernel's constructor, which checked the CPU.
            unsafe { mul_xor_simd(dst, src, c) }
        }
    };
}

pub(super) use simd_kernels;

/// The 16-entry nibble tables of multiplication by `c` (low nibble, high nibble), repeated to
/// `N` bytes for vectors wider than 128 bits.
pub(super) fn nibble_tables<const N: usize>(c: u8) -> ([u8; N], [u8; N]) {
    let mut lo = [0u8; N];
    let mut hi = [0u8; N];
    for x in 0..N {
        lo[x] = super::gf::mul(c, (x % 16) as u8);
        hi[x] = super::gf::mul(c, ((x % 16) as u8) << 4);
    }
    (lo, hi)
}
