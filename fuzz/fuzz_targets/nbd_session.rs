//! Hostile NBD clients against the real server (`raidctl::nbd::serve_client`) over a socket
//! pair, on a RAID5 array of memory members. Three kinds of input, by the first byte:
//! raw bytes from the first byte of the handshake; a valid handshake (fixed newstyle, GO)
//! followed by raw bytes; or a valid handshake followed by well-framed requests whose
//! command, flags, offset and length come from the input. The server must never panic or
//! hang, and in the last kind every reply must be well framed: the simple reply magic, the
//! cookie of a request sent and not yet answered, and a read's data of exactly its length.
#![no_main]
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use raidcore::array::{Array, CreateSpec};
use raidcore::device::{MemMember, Member};
use raidcore::layout::{LayoutParams, Level};
use raidctl::nbd::{serve_client, Export, IHAVEOPT, REPLY_MAGIC, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC};

const OPT_GO: u32 = 7;
const REP_ACK: u32 = 1;
const CMD_READ: u16 = 0;
const CMD_DISC: u16 = 2;

fn export() -> Arc<Export> {
    let members = (0..3)
        .map(|i| {
            (
                PathBuf::from(format!("m{i}")),
                Arc::new(MemMember::new(3 << 20)) as Arc<dyn Member>,
            )
        })
        .collect();
    let spec = CreateSpec {
        name: "fuzz".into(),
        layout: LayoutParams::with_defaults(Level::Raid5, 3, 4096),
        overprovision_pct: 0.0,
        endurance_bytes: vec![],
        history_interval: 86_400,
        checksums: None,
        bitmap_chunk: None,
    };
    let array = Array::create_on(members, &spec, &mut |_, _| {}).expect("create");
    Arc::new(Export {
        name: "fuzz".into(),
        description: "fuzz".into(),
        array: Arc::new(array),
        readonly: false,
        stopping: Arc::new(AtomicBool::new(false)),
        sessions: AtomicUsize::new(0),
    })
}

/// Fixed newstyle, no zeroes, then GO for the default export with no info requests.
fn handshake() -> Vec<u8> {
    let mut h = 3u32.to_be_bytes().to_vec();
    h.extend_from_slice(&IHAVEOPT.to_be_bytes());
    h.extend_from_slice(&OPT_GO.to_be_bytes());
    h.extend_from_slice(&6u32.to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes());
    h.extend_from_slice(&0u16.to_be_bytes());
    h
}

/// Well-framed requests from 10-byte records; returns the bytes and each cookie's
/// (command, length).
fn requests(data: &[u8], size: u64) -> (Vec<u8>, HashMap<u64, (u16, u32)>) {
    let mut out = Vec::new();
    let mut sent = HashMap::new();
    for (cookie, r) in data.chunks_exact(10).enumerate() {
        let cmd = u16::from(r[0] % 8);
        let flags = u16::from(r[1]);
        let blocks = u32::from_le_bytes([r[2], r[3], r[4], 0]) as u64;
        // Mostly inside the array; sometimes past its end or unaligned.
        let offset = match r[5] % 8 {
            0 => size + blocks,
            1 => blocks,
            _ => (blocks * 512) % size,
        };
        let len = match r[6] % 8 {
            0 => u32::from_le_bytes([r[7], r[8], r[9], 0]) << 8,
            _ => u32::from(u16::from_le_bytes([r[7], r[8]])) + 1,
        };
        out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&cmd.to_be_bytes());
        out.extend_from_slice(&(cookie as u64).to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        sent.insert(cookie as u64, (cmd, len));
        if cmd == 1 {
            // A write's payload, as long as it says, up to 1 MiB: past that the request is the
            // last (the server refuses it, or waits for the rest until the client hangs up).
            out.extend(std::iter::repeat_n(r[9], (len as usize).min(1 << 20)));
            if len as usize > 1 << 20 {
                break;
            }
        }
        if cmd == CMD_DISC {
            break;
        }
    }
    (out, sent)
}

fn take<const N: usize>(r: &mut &[u8]) -> Option<[u8; N]> {
    let (h, t) = r.split_first_chunk::<N>()?;
    *r = t;
    Some(*h)
}

/// Checks the server's replies: the greeting, option replies up to GO's ack, then simple
/// replies to the requests sent. The stream may end at a reply boundary (the server closes
/// on a request it cannot frame), never inside one.
fn check_replies(mut r: &[u8], mut sent: HashMap<u64, (u16, u32)>) {
    let r = &mut r;
    take::<18>(r).expect("greeting");
    loop {
        let Some(h) = take::<20>(r) else {
            assert!(r.is_empty(), "torn option reply");
            return;
        };
        assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REPLY_MAGIC);
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        assert!(r.len() >= len, "torn option reply data");
        *r = &r[len..];
        if kind == REP_ACK {
            break;
        }
    }
    while !r.is_empty() {
        let h = take::<16>(r).expect("torn reply header");
        assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
        let error = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let (cmd, len) = sent.remove(&cookie).expect("a reply to no request, or a second one");
        if cmd == CMD_READ && error == 0 {
            assert!(r.len() >= len as usize, "a read's data cut short");
            *r = &r[len as usize..];
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let export = export();
    let (input, sent) = match mode % 3 {
        0 => (rest.to_vec(), None),
        1 => ([handshake(), rest.to_vec()].concat(), None),
        _ => {
            let (reqs, sent) = requests(rest, export.array.size());
            ([handshake(), reqs].concat(), Some(sent))
        }
    };
    let (client, server) = UnixStream::pair().expect("socket pair");
    let srv = std::thread::spawn(move || serve_client(Box::new(server), export));
    let mut w = client.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&input);
        let _ = w.shutdown(std::net::Shutdown::Write);
    });
    let mut replies = Vec::new();
    let _ = (&client).read_to_end(&mut replies);
    writer.join().expect("writer");
    let _ = srv.join().expect("the server panicked");
    if let Some(sent) = sent {
        check_replies(&replies, sent);
    }
});
