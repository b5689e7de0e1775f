//! Output helpers: uuids, timestamps and JSON printing shared by the subcommands.

use std::io::Write;

pub fn uuid(u: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*u).hyphenated().to_string()
}

/// `s` with its control characters escaped (`\n`, `\u{1b}`): names and paths come from
/// superblocks and the file system, and must not move a terminal's cursor or forge lines.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Seconds since the epoch as RFC 3339 UTC.
pub fn time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Prints a JSON value, pretty, with a trailing newline.
pub fn print_json(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, v);
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    #[test]
    fn printable_escapes_control_characters_only() {
        assert_eq!(super::printable("nas-1 ü"), "nas-1 ü");
        assert_eq!(
            super::printable("a\nBcc: x\u{1b}[2J"),
            "a\\nBcc: x\\u{1b}[2J"
        );
    }

    #[test]
    fn rfc3339() {
        assert_eq!(super::time(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::time(1_796_000_000), "2026-11-30T00:53:20Z");
    }
}
