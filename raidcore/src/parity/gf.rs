//! GF(2^8) arithmetic with the RAID-6 polynomial x^8+x^4+x^3+x^2+1 (0x11d) and generator 2,
//! as Linux md and SnapRAID use. Tables are computed at compile time from the definition.

/// The field polynomial.
pub const POLY: u16 = 0x11d;

const fn build_tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // exp is doubled so exp[log a + log b] needs no reduction mod 255.
    let mut j = 255;
    while j < 512 {
        exp[j] = exp[j - 255];
        j += 1;
    }
    (exp, log)
}

const TABLES: ([u8; 512], [u8; 256]) = build_tables();
/// g^i for i in 0..510.
pub const EXP: [u8; 512] = TABLES.0;
/// log_g(a) for a != 0 (LOG[0] is meaningless).
pub const LOG: [u8; 256] = TABLES.1;

/// a * b in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// Multiplicative inverse; `a` must not be 0.
#[inline]
pub fn inv(a: u8) -> u8 {
    debug_assert_ne!(a, 0);
    EXP[255 - LOG[a as usize] as usize]
}

/// g^e (e taken mod 255).
#[inline]
pub fn pow2(e: usize) -> u8 {
    EXP[e % 255]
}

/// a / b; `b` must not be 0.
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    mul(a, inv(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less multiply with reduction, straight from the definition.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut r = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                r ^= a;
            }
            let hi = a & 0x80;
            a <<= 1;
            if hi != 0 {
                a ^= (POLY & 0xff) as u8;
            }
            b >>= 1;
        }
        r
    }

    #[test]
    fn tables_match_definition() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
            }
        }
        assert_eq!(pow2(8), 0x1d);
    }
}
