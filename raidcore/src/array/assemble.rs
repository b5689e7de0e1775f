//! Assembly: from one member path, find its siblings (path hints first, then the member's own
//! directory and any `--scan` locations), verify array and member uuids, drop stale members
//! (fewer events) and decide which slots are usable.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::{Array, Slot};
use crate::device::{FileMember, Member, OpenMode};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{self, LoadedSuperblock, Probe, SlotState};

/// How to assemble.
#[derive(Clone, Debug, Default)]
pub struct AssembleOptions {
    /// Open for writing (exclusive locks, superblock updates).
    pub writable: bool,
    /// Extra places to look for members: directories (every file and block device in them) or
    /// individual paths.
    pub scan: Vec<PathBuf>,
    /// Read-only opens only: assemble even when too many members are missing, so that status
    /// can report a failed array (every read still fails).
    pub allow_failed: bool,
}

struct Found {
    path: PathBuf,
    member: Arc<dyn Member>,
    loaded: LoadedSuperblock,
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    if m.file_type().is_block_device() {
        Some((u64::MAX, m.rdev()))
    } else {
        Some((m.dev(), m.ino()))
    }
}

fn uuid_str(u: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*u).hyphenated().to_string()
}

/// Opens a member without locking it and reads its superblock; errors name the path and what is
/// wrong. A member we decide to use is then [`claim`]ed.
fn load(path: &Path) -> Result<Found> {
    let member = FileMember::open(path, OpenMode::Peek)?;
    let name = path.display();
    let loaded = match format::probe(&member)? {
        Probe::NotMember => {
            return Err(Error::new(
                ErrorKind::Mismatch,
                format!("{name} is not a raidctl member (no superblock)"),
            ))
        }
        Probe::Corrupt(why) => {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("{name}: both superblock copies are invalid ({why})"),
            ))
        }
        Probe::Valid(l) => l,
    };
    let need = loaded.sb.data_end();
    if member.len() < need {
        bail!(
            Corrupt,
            "{name} is truncated: it has {} bytes but the array's data area ends at byte {need} (created at {} bytes)",
            member.len(),
            loaded.sb.member_bytes
        );
    }
    Ok(Found {
        path: path.to_path_buf(),
        member: Arc::new(member),
        loaded: *loaded,
    })
}

/// Reopens a peeked member with its lock (exclusive when writable) and checks that it is still
/// the same member.
fn claim(f: Found, writable: bool) -> Result<Found> {
    let mode = if writable {
        OpenMode::Write
    } else {
        OpenMode::Read
    };
    let member = FileMember::open(&f.path, mode)?;
    let again = load(&f.path)?;
    if again.loaded.sb.member_uuid != f.loaded.sb.member_uuid
        || again.loaded.generation != f.loaded.generation
    {
        bail!(
            Mismatch,
            "{} changed while the array was being assembled",
            f.path.display()
        );
    }
    Ok(Found {
        member: Arc::new(member),
        ..again
    })
}

/// Lists candidate member paths in the scan locations.
fn candidates(locations: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for loc in locations {
        match std::fs::read_dir(loc) {
            Ok(rd) => {
                let mut entries: Vec<PathBuf> = rd
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        std::fs::metadata(p)
                            .map(|m| m.file_type().is_file() || m.file_type().is_block_device())
                            .unwrap_or(false)
                    })
                    .collect();
                entries.sort();
                out.extend(entries);
            }
            Err(_) => out.push(loc.clone()),
        }
    }
    out
}

impl Array {
    /// Assembles the array that `path` is a member of.
    pub fn open(path: &Path, opts: &AssembleOptions) -> Result<Array> {
        let primary = claim(load(path)?, opts.writable)?;
        let sb0 = primary.loaded.sb.clone();
        let n = sb0.slots.len();
        let mut seen: HashSet<(u64, u64)> = file_id(path).into_iter().collect();
        let mut found: Vec<Option<Found>> = (0..n).map(|_| None).collect();
        let mut reasons: Vec<Option<String>> = vec![None; n];
        let slot0 = sb0.slot as usize;
        found[slot0] = Some(primary);

        let matches = |f: &Found, slot: usize| -> std::result::Result<(), String> {
            let sb = &f.loaded.sb;
            if sb.array_uuid != sb0.array_uuid {
                return Err(format!(
                    "{} belongs to another array ({} \"{}\")",
                    f.path.display(),
                    uuid_str(&sb.array_uuid),
                    sb.name
                ));
            }
            if sb.member_uuid != sb0.slots[slot].member_uuid {
                return Err(format!(
                    "{} is not the member recorded for slot {slot}",
                    f.path.display()
                ));
            }
            if sb.layout != sb0.layout
                || sb.data_offset != sb0.data_offset
                || sb.data_rows != sb0.data_rows
            {
                return Err(format!(
                    "{} disagrees with its siblings about the array geometry",
                    f.path.display()
                ));
            }
            Ok(())
        };

        // Path hints first.
        for slot in 0..n {
            if found[slot].is_some() {
                continue;
            }
            let hint = PathBuf::from(&sb0.slots[slot].path_hint);
            let Some(id) = file_id(&hint) else {
                reasons[slot] = Some(format!("not found at {}", hint.display()));
                continue;
            };
            if seen.contains(&id) {
                continue;
            }
            match load(&hint) {
                Ok(f) => match matches(&f, slot)
                    .and_then(|()| claim(f, opts.writable).map_err(|e| e.to_string()))
                {
                    Ok(f) => {
                        seen.insert(id);
                        found[slot] = Some(f);
                    }
                    Err(why) => reasons[slot] = Some(why),
                },
                Err(e) => reasons[slot] = Some(e.to_string()),
            }
        }

        // Then the member's own directory and the scan locations.
        if found.iter().any(|f| f.is_none()) {
            let mut locations = Vec::new();
            if std::fs::metadata(path)
                .map(|m| m.is_file())
                .unwrap_or(false)
            {
                if let Some(dir) = path.parent() {
                    locations.push(if dir.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        dir.to_path_buf()
                    });
                }
            }
            locations.extend(opts.scan.iter().cloned());
            for cand in candidates(&locations) {
                if found.iter().all(|f| f.is_some()) {
                    break;
                }
                let Some(id) = file_id(&cand) else { continue };
                if seen.contains(&id) {
                    continue;
                }
                let Ok(f) = load(&cand) else { continue };
                if f.loaded.sb.array_uuid != sb0.array_uuid {
                    continue;
                }
                let Some(slot) = (0..n).find(|&s| {
                    found[s].is_none() && sb0.slots[s].member_uuid == f.loaded.sb.member_uuid
                }) else {
                    continue;
                };
                match matches(&f, slot)
                    .and_then(|()| claim(f, opts.writable).map_err(|e| e.to_string()))
                {
                    Ok(f) => {
                        seen.insert(id);
                        reasons[slot] = None;
                        found[slot] = Some(f);
                    }
                    Err(why) => reasons[slot] = Some(why),
                }
            }
        }

        // The member with the most events carries the truth; members behind it are stale.
        let (auth_slot, auth) = found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (i, f)))
            .max_by_key(|(i, f)| (f.loaded.sb.events, *i == slot0, f.loaded.generation))
            .expect("the primary member is present");
        let auth_sb = auth.loaded.sb.clone();
        let _ = auth_slot;

        let mut slots = Vec::with_capacity(n);
        let mut changed = false;
        for (i, f) in found.into_iter().enumerate() {
            let slot = match f {
                None => {
                    let mut s = Slot::new(None, None);
                    s.member_uuid = auth_sb.slots[i].member_uuid;
                    *s.reason.get_mut().expect("fresh") =
                        reasons[i].take().or(Some("not found".into()));
                    s
                }
                Some(f) => {
                    let mut s = Slot::new(Some(f.member.clone()), Some(f.path.clone()));
                    s.member_uuid = f.loaded.sb.member_uuid;
                    s.wear_base = f.loaded.sb.wear.clone();
                    s.sb_state = Mutex::new((f.loaded.generation, f.loaded.copy));
                    let recorded = auth_sb.slots[i].state;
                    if f.loaded.sb.events < auth_sb.events {
                        s.failed.store(true, Ordering::Release);
                        *s.reason.get_mut().expect("fresh") = Some(format!(
                            "stale: events {} behind the array's {} (failed or absent while the array changed); it must be rebuilt",
                            f.loaded.sb.events, auth_sb.events
                        ));
                    } else if recorded != SlotState::Active {
                        s.failed.store(true, Ordering::Release);
                        *s.reason.get_mut().expect("fresh") =
                            Some(format!("recorded {}", recorded.name()));
                    }
                    if auth_sb.slots[i].path_hint != f.path.display().to_string() {
                        changed = true;
                    }
                    s
                }
            };
            slots.push(slot);
        }
        let array = Array::from_parts(auth_sb, slots, opts.writable)?;
        if !opts.allow_failed || opts.writable {
            array
                .check_alive()
                .map_err(|e| e.context(format!("assembling {}", path.display())))?;
        }
        if opts.writable {
            let mut meta = array.meta.lock().expect("meta lock");
            for (i, s) in array.slots.iter().enumerate() {
                if let Some(p) = &s.path {
                    let hint = std::fs::canonicalize(p)
                        .unwrap_or_else(|_| p.clone())
                        .display()
                        .to_string();
                    if hint.len() <= format::MAX_PATH_HINT && meta.slots[i].path_hint != hint {
                        meta.slots[i].path_hint = hint;
                        changed = true;
                    }
                }
                if s.usable().is_none() && meta.slots[i].state == SlotState::Active {
                    meta.slots[i].state = SlotState::Faulty;
                    changed = true;
                    meta.events += 1;
                }
            }
            drop(meta);
            if changed {
                array.persist()?;
            }
        }
        Ok(array)
    }
}
