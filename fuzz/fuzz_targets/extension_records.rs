//! Extension records of any content under any feature bits: validation never panics, and a
//! superblock it accepts has records every reader can use (checked arithmetic everywhere).
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidcore::format::{self, Extension};

fuzz_target!(|data: &[u8]| {
    let mut sb = format::example_superblock();
    if data.len() < 2 {
        return;
    }
    sb.compat_features = data[0] as u64;
    sb.incompat_features = (data[1] & 3) as u64;
    sb.extensions.clear();
    let mut rest = &data[2..];
    while rest.len() >= 2 {
        let (tag, len) = (rest[0] as u32 % 8, rest[1] as usize);
        let end = (2 + len).min(rest.len());
        sb.extensions.push(Extension {
            tag,
            data: rest[2..end].to_vec(),
        });
        rest = &rest[end..];
    }
    format::check_records(&sb);
});
