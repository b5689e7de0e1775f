//! `raidctl examine`: decode one member's superblock copies without assembling the array.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::device::{FileMember, Member, OpenMode};
use raidcore::format::{self, Superblock, SB_SIZE};
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::output::{time, uuid};

/// Show the superblock of one member
#[derive(Args, Debug)]
pub struct ExamineArgs {
    /// Member path (file, loop or block device)
    #[arg(value_name = "MEMBER")]
    pub member: PathBuf,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

fn sb_json(sb: &Superblock) -> Value {
    let l = &sb.layout;
    json!({
        "array_uuid": uuid(&sb.array_uuid),
        "name": sb.name,
        "level": l.level.name(),
        "members_count": l.members,
        "chunk_bytes": l.chunk_bytes,
        "copies": l.copies,
        "parity_weights": l.weights,
        "member_uuid": uuid(&sb.member_uuid),
        "slot": sb.slot,
        "events": sb.events,
        "clean": sb.clean,
        "member_bytes": sb.member_bytes,
        "metadata_offset": sb.metadata_offset,
        "metadata_bytes": sb.metadata_bytes,
        "data_offset": sb.data_offset,
        "data_rows": sb.data_rows,
        "data_bytes": sb.data_rows * l.chunk_bytes,
        "array_bytes": sb.array_bytes,
        "created": time(sb.created),
        "updated": time(sb.updated),
        "slots": sb.slots.iter().enumerate().map(|(i, s)| json!({
            "slot": i,
            "member_uuid": uuid(&s.member_uuid),
            "state": s.state.name(),
            "rebuild_checkpoint_row": match s.state { format::SlotState::Rebuilding { checkpoint_row } => Some(checkpoint_row), _ => None },
            "path_hint": s.path_hint,
        })).collect::<Vec<_>>(),
        "compat_features": sb.compat_features,
        "incompat_features": sb.incompat_features,
        "areas": areas_json(sb),
        "scrub": raidcore::array::health::scrub_of(sb),
        "error_counters": raidcore::array::health::counters_of(sb).iter().map(|c| json!({
            "member_uuid": uuid(&c.uuid), "read": c.read, "write": c.write, "checksum": c.checksum,
        })).collect::<Vec<_>>(),
        "wear": {
            "data_bytes": sb.wear.data_bytes,
            "parity_bytes": sb.wear.parity_bytes,
            "metadata_bytes": sb.wear.metadata_bytes,
            "rebuild_bytes": sb.wear.rebuild_bytes,
            "endurance_bytes": sb.wear.endurance_bytes,
            "history_samples": sb.wear.history.len(),
        },
    })
}

/// Where the metadata structures sit on the member (what tests and repair tools need).
fn areas_json(sb: &Superblock) -> Value {
    use raidcore::array::{bitmap::BitmapGeometry, csum::CsumGeometry, journal::JournalGeometry};
    let mut v = json!({
        "superblock_a": {"offset": format::SB_A_OFFSET, "bytes": SB_SIZE},
        "superblock_b": {"offset": format::SB_B_OFFSET, "bytes": SB_SIZE},
        "data": {"offset": sb.data_offset, "bytes": sb.data_rows * sb.layout.chunk_bytes},
    });
    if let Some(g) = BitmapGeometry::from_superblock(sb) {
        v["bitmap"] = json!({
            "offset": g.offset,
            "bytes": g.bytes,
            "rows_per_region": g.region_rows,
            "chunk_bytes": g.region_rows * sb.layout.chunk_bytes,
        });
        if g.data_map {
            v["data_map"] = json!({"offset": g.offset + g.bytes, "bytes": g.bytes});
        }
    }
    if let Some(g) = JournalGeometry::from_superblock(sb) {
        v["journal"] = json!({"offset": g.offset, "bytes": g.bytes});
    }
    if let Some(g) = CsumGeometry::from_superblock(sb) {
        v["checksums"] = json!({
            "hash": g.algo.name(),
            "offset": g.offset,
            "bytes": g.bytes(),
            "table_offset": g.table_offset(),
            "table_bytes": g.table_pages * 4096,
            "log_offset": g.log_offset(),
            "log_bytes": g.log_pages * 4096,
            "block_bytes": raidcore::array::csum::BLOCK,
            "entries_per_page": raidcore::array::csum::PER_PAGE,
        });
    }
    // The exact bad-block list, when it is longer than the superblock holds.
    if let Some(a) = raidcore::array::badblocks::area_ref_of(sb) {
        v["bad_block_area"] = json!({
            "offset": a.offset,
            "bytes": 2 * a.copy_bytes,
            "copy_bytes": a.copy_bytes,
            "copy": a.seq % 2,
            "entries": a.entries,
        });
    }
    v
}

pub fn run(a: ExamineArgs) -> Result<ExitCode> {
    // Peek: examining a member never takes its lock, so it cannot disturb the process owning it.
    let m = FileMember::open(&a.member, OpenMode::Peek)?;
    let name = a.member.display().to_string();
    let mut copies = Vec::new();
    let mut best: Option<(u64, Superblock)> = None;
    for (label, off) in [("A", format::SB_A_OFFSET), ("B", format::SB_B_OFFSET)] {
        let mut raw = vec![0u8; SB_SIZE];
        let decoded = if m.len() < off + SB_SIZE as u64 {
            Err(Error::new(
                ErrorKind::Corrupt,
                "member too small to hold it",
            ))
        } else {
            m.read_at(&mut raw, off)
                .and_then(|_| Superblock::decode(&raw))
        };
        match decoded {
            Ok((sb, generation)) => {
                copies.push(
                    json!({"copy": label, "offset": off, "valid": true, "generation": generation}),
                );
                if best.as_ref().is_none_or(|(g, _)| generation > *g) {
                    best = Some((generation, sb));
                }
            }
            Err(e) => copies.push(
                json!({"copy": label, "offset": off, "valid": false, "error": e.to_string()}),
            ),
        }
    }
    let Some((generation, sb)) = best else {
        let why: Vec<String> = copies
            .iter()
            .map(|c| {
                format!(
                    "copy {}: {}",
                    c["copy"].as_str().unwrap_or("?"),
                    c["error"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let no_magic = copies
            .iter()
            .all(|c| c["error"].as_str().is_some_and(|e| e.contains("bad magic")));
        let kind = if no_magic {
            ErrorKind::Mismatch
        } else {
            ErrorKind::Corrupt
        };
        let what = if no_magic {
            "is not a raidctl member"
        } else {
            "has no valid superblock"
        };
        return Err(Error::new(
            kind,
            format!("{name} {what} ({})", why.join("; ")),
        ));
    };
    let mut v = sb_json(&sb);
    v["member"] = json!(name);
    v["member_size"] = json!(m.len());
    v["generation"] = json!(generation);
    v["copies"] = json!(copies);
    v["truncated"] = json!(m.len() < sb.data_end());
    if a.json {
        crate::output::print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "member       {name} ({} bytes{})",
        m.len(),
        if m.len() < sb.data_end() {
            ", TRUNCATED"
        } else {
            ""
        }
    );
    println!(
        "array        \"{}\" {}",
        crate::output::printable(&sb.name),
        uuid(&sb.array_uuid)
    );
    println!(
        "level        {} x{} chunk {} weights {:?} copies {}",
        sb.layout.level.name(),
        sb.layout.members,
        sb.layout.chunk_bytes,
        sb.layout.weights,
        sb.layout.copies
    );
    println!(
        "this member  slot {} uuid {}",
        sb.slot,
        uuid(&sb.member_uuid)
    );
    println!(
        "events       {}  generation {}  {}",
        sb.events,
        generation,
        if sb.clean { "clean" } else { "dirty" }
    );
    println!(
        "metadata     offset {} bytes {}",
        sb.metadata_offset, sb.metadata_bytes
    );
    println!(
        "data         offset {} rows {} ({} bytes)",
        sb.data_offset,
        sb.data_rows,
        sb.data_rows * sb.layout.chunk_bytes
    );
    let areas = areas_json(&sb);
    for (name, label) in [
        ("bitmap", "bitmap      "),
        ("data_map", "data map    "),
        ("journal", "journal     "),
        ("checksums", "checksums   "),
        ("bad_block_area", "bad blocks  "),
    ] {
        let a = &areas[name];
        if a.is_object() {
            let hash = a["hash"]
                .as_str()
                .map(|h| format!(" hash {h}"))
                .unwrap_or_default();
            // The bitmap chunk: member data per write-intent bit (create --bitmap-chunk).
            let chunk = a["chunk_bytes"]
                .as_u64()
                .map(|c| format!(" chunk {}", crate::units::human(c)))
                .unwrap_or_default();
            println!(
                "{label} offset {} bytes {}{hash}{chunk}",
                a["offset"], a["bytes"]
            );
        }
    }
    println!("array size   {} bytes", sb.array_bytes);
    println!(
        "created      {}   updated {}",
        time(sb.created),
        time(sb.updated)
    );
    println!(
        "written      data {} parity {} metadata {} rebuild {}",
        sb.wear.data_bytes, sb.wear.parity_bytes, sb.wear.metadata_bytes, sb.wear.rebuild_bytes
    );
    for c in &copies {
        println!(
            "copy {}       {}",
            c["copy"].as_str().unwrap_or("?"),
            if c["valid"] == true {
                format!("valid, generation {}", c["generation"])
            } else {
                format!("INVALID: {}", c["error"].as_str().unwrap_or(""))
            }
        );
    }
    for (i, s) in sb.slots.iter().enumerate() {
        println!(
            "slot {i:<3}     {:<10} {}  {}",
            s.state.name(),
            uuid(&s.member_uuid),
            crate::output::printable(&s.path_hint)
        );
    }
    Ok(ExitCode::SUCCESS)
}
