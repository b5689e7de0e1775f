//! Hostile bytes on the daemon's control socket: every line decodes to a request or is refused,
//! none panics, lines are read within their bound, and a request that decodes encodes back to
//! itself (what a client sends is what the daemon runs).
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidctl::protocol::{decode, read_request, Line, MAX_LINE};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode(data) {
        let line = serde_json::to_string(&req).expect("a decoded request encodes");
        assert_eq!(decode(line.as_bytes()).as_ref(), Ok(&req), "{line}");
    }
    let mut r = std::io::Cursor::new(data);
    let mut lines = 0;
    loop {
        let before = r.position();
        match read_request(&mut r) {
            Line::End => break,
            Line::TooLong => {
                assert_eq!(r.position() - before, MAX_LINE as u64 + 1);
                break;
            }
            Line::Request(_) | Line::Bad(_) => lines += 1,
        }
        assert!(r.position() > before, "a line read nothing");
    }
    assert!(lines <= data.len());
});
