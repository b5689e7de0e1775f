//! Size parsing ("64K", "1.5G", "4096", "2MiB") and human formatting.

/// Parses a byte count with an optional suffix: K, M, G, T and KiB, MiB, GiB, TiB are
/// 1024-based (as mdadm and dd read them); KB, MB, GB, TB are decimal (as drive makers write
/// them: 1GB = 10^9 bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} is not a size (expected e.g. 4096, 64K, 1G)"));
    }
    let mult: u64 = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KIB" => 1 << 10,
        "M" | "MIB" => 1 << 20,
        "G" | "GIB" => 1 << 30,
        "T" | "TIB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size suffix {other:?} in {s:?} (use K, M, G, T or KiB, MiB, GiB, TiB: 1024-based; KB, MB, GB, TB: decimal)"
            ))
        }
    };
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
        let b = v * mult as f64;
        if !(0.0..1.8e19).contains(&b) {
            return Err(format!("{s:?} is out of range"));
        }
        Ok(b as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
        v.checked_mul(mult)
            .ok_or_else(|| format!("{s:?} is out of range"))
    }
}

/// "45 s", "12 min", "3.5 h", "2.0 d".
pub fn human_duration(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else if secs < 5400.0 {
        format!("{:.0} min", secs / 60.0)
    } else if secs < 172_800.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{:.1} d", secs / 86_400.0)
    }
}

/// Parses a duration in seconds: "3600", "90s", "30m", "12h", "1d".
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1),
        Some('m') => (&t[..t.len() - 1], 60),
        Some('h') => (&t[..t.len() - 1], 3600),
        Some('d') => (&t[..t.len() - 1], 86_400),
        _ => (t, 1),
    };
    let v: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 3600, 12h, 1d)"))?;
    match v.checked_mul(mult) {
        Some(x) if x > 0 => Ok(x),
        _ => Err(format!("{s:?} is not a positive duration")),
    }
}

/// As [`parse_duration`], where 0 means never.
pub fn parse_duration_or_zero(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_duration(s)
}

/// "1.5 GiB" style.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        // Issue #18: 1GB was read as GiB. Decimal suffixes are decimal.
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("2TB").unwrap(), 2_000_000_000_000);
        assert_eq!(parse_size("500KB").unwrap(), 500_000);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(parse_duration("1d").unwrap(), 86_400);
        assert_eq!(parse_duration("90").unwrap(), 90);
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("day").is_err());
    }
}
