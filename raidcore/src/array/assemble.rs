//! Assembly: from one member path, find its siblings (path hints first, then the member's own
//! directory and any `--scan` locations), verify array and member uuids, drop stale members
//! (fewer events) and decide which slots are usable.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::sync::atomic::AtomicU64;

use super::{Array, Dev, Slot, Target, TargetKind};
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
    /// When more members are failed than the level tolerates (a storm of write errors failed
    /// them one after another), take back the most recently failed ones that are present,
    /// newest first, until it does: `mdadm --assemble --force`. What they missed after they
    /// failed is lost; a writable open resyncs the whole array.
    pub force: bool,
    /// Read-only reports (status, wear, list): take no lock at all, so they answer while
    /// another process (an offline scrub, rebuild or write) holds the members. What they
    /// show may trail that process by its last superblock update.
    pub unlocked: bool,
}

struct Found {
    path: PathBuf,
    member: Arc<dyn Member>,
    loaded: LoadedSuperblock,
}

/// Where assembly finds members: the file system (files and block devices, [`Files`]) or, in
/// the simulator, a store of simulated members.
pub trait MemberSource {
    /// Opens `path` without locking it, to read its superblock.
    fn peek(&self, path: &Path) -> Result<Arc<dyn Member>>;
    /// Opens `path` for use: locked, exclusively when `writable`.
    fn claim(&self, path: &Path, writable: bool) -> Result<Arc<dyn Member>>;
    /// What `path` is (so one device reached by two paths is used once).
    fn id(&self, path: &Path) -> Option<(u64, u64)>;
    /// Candidate member paths in scan locations (directories or single paths).
    fn candidates(&self, locations: &[PathBuf]) -> Vec<PathBuf>;
    /// True when `path` is a regular file (its directory is then searched too).
    fn is_file(&self, path: &Path) -> bool;

    /// Every block device of the system, to find members by uuid wherever they are now (a
    /// device renamed at boot); none by default.
    fn block_devices(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// Members that are files or block devices.
pub struct Files;

impl MemberSource for Files {
    fn peek(&self, path: &Path) -> Result<Arc<dyn Member>> {
        Ok(Arc::new(FileMember::open(path, OpenMode::Peek)?))
    }

    fn claim(&self, path: &Path, writable: bool) -> Result<Arc<dyn Member>> {
        let mode = if writable {
            OpenMode::Write
        } else {
            OpenMode::Read
        };
        Ok(Arc::new(FileMember::open(path, mode)?))
    }

    fn id(&self, path: &Path) -> Option<(u64, u64)> {
        let m = std::fs::metadata(path).ok()?;
        if m.file_type().is_block_device() {
            Some((u64::MAX, m.rdev()))
        } else {
            Some((m.dev(), m.ino()))
        }
    }

    fn candidates(&self, locations: &[PathBuf]) -> Vec<PathBuf> {
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

    fn is_file(&self, path: &Path) -> bool {
        std::fs::metadata(path)
            .map(|m| m.is_file())
            .unwrap_or(false)
    }

    fn block_devices(&self) -> Vec<PathBuf> {
        // As `mdadm --assemble --scan` does: every block device and partition the kernel
        // lists, except optical and floppy drives (a read can wait for a medium).
        let Ok(rd) = std::fs::read_dir("/sys/class/block") else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with("sr") && !n.starts_with("fd"))
            // Empty ones (an unattached loop device, a drive without medium) are not opened.
            .filter(|n| {
                std::fs::read_to_string(format!("/sys/class/block/{n}/size"))
                    .is_ok_and(|s| s.trim().parse::<u64>().is_ok_and(|x| x > 0))
            })
            .map(|n| PathBuf::from("/dev").join(n))
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
            .collect();
        out.sort();
        out
    }
}

/// A member found by [`discover`]: where it is and which array it belongs to.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub path: PathBuf,
    pub array_uuid: [u8; 16],
    pub member_uuid: [u8; 16],
    pub name: String,
    /// The superblock's event count and generation: the newest copy of an array's metadata
    /// has the most events, then the highest generation (writes bump the generation only).
    pub events: u64,
    pub generation: u64,
    /// The members this superblock records as active in a slot.
    pub active: Vec<[u8; 16]>,
}

/// Of the members found for `array_uuid`, one the newest superblock among them (most events)
/// records as active: the member to name the array by. A disk failed out of the array, or
/// replaced and left in the box, keeps a valid superblock of the array that no longer counts
/// it; the first found was taken, and assembly by `UUID=` failed whenever it enumerated
/// first (issue 29, item 1). None when none is found; the first found when none is active.
pub fn member_to_assemble(found: &[Discovered], array_uuid: &[u8; 16]) -> Option<PathBuf> {
    let ours: Vec<&Discovered> = found
        .iter()
        .filter(|d| d.array_uuid == *array_uuid)
        .collect();
    let age = |d: &Discovered| (d.events, d.generation);
    let newest = ours.iter().max_by_key(|d| age(d))?;
    // The first found of those with the newest metadata (ties keep the discovery order): a
    // stale copy of an active member (a disk image cloned before later writes) carries the
    // same member uuid and events, with an older generation.
    let mut pick: Option<&&Discovered> = None;
    for d in ours
        .iter()
        .filter(|d| newest.active.contains(&d.member_uuid))
    {
        if pick.is_none_or(|p| age(d) > age(p)) {
            pick = Some(d);
        }
    }
    pick.or(ours.first()).map(|d| d.path.clone())
}

/// Every raidctl member in `locations` (directories or paths) and on every block device of the
/// system, as assembly finds them: valid superblocks only, each device once.
pub fn discover(src: &dyn MemberSource, locations: &[PathBuf]) -> Vec<Discovered> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for p in src
        .candidates(locations)
        .into_iter()
        .chain(src.block_devices())
    {
        if !src.id(&p).is_some_and(|id| seen.insert(id)) {
            continue;
        }
        let Ok(m) = src.peek(&p) else { continue };
        if let Ok(Probe::Valid(l)) = format::probe(m.as_ref()) {
            out.push(Discovered {
                path: p,
                array_uuid: l.sb.array_uuid,
                member_uuid: l.sb.member_uuid,
                name: l.sb.name.clone(),
                events: l.sb.events,
                generation: l.generation,
                active: l
                    .sb
                    .slots
                    .iter()
                    .filter(|s| s.state == format::SlotState::Active)
                    .map(|s| s.member_uuid)
                    .collect(),
            });
        }
    }
    out
}

/// Per member uuid, the newest generation any found member records for it.
fn expected_generations(found: &[Option<Found>]) -> std::collections::HashMap<[u8; 16], u64> {
    let mut expected = std::collections::HashMap::new();
    for f in found.iter().flatten() {
        for (u, g) in f.loaded.sb.member_generations() {
            let e = expected.entry(u).or_insert(0);
            *e = (*e).max(g);
        }
    }
    expected
}

fn uuid_str(u: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*u).hyphenated().to_string()
}

/// Opens a member without locking it and reads its superblock; errors name the path and what is
/// wrong. A member we decide to use is then [`claim`]ed.
fn load(src: &dyn MemberSource, path: &Path) -> Result<Found> {
    let member = src.peek(path)?;
    let name = path.display();
    let loaded = match format::probe(member.as_ref())? {
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
        member,
        loaded: *loaded,
    })
}

/// Reopens a peeked member with its lock (exclusive when writable) and checks that it is still
/// the same member.
fn claim(src: &dyn MemberSource, f: Found, opts: &AssembleOptions) -> Result<Found> {
    let member = if opts.unlocked && !opts.writable {
        src.peek(&f.path)?
    } else {
        src.claim(&f.path, opts.writable)?
    };
    let again = load(src, &f.path)?;
    if again.loaded.sb.member_uuid != f.loaded.sb.member_uuid
        || again.loaded.generation != f.loaded.generation
    {
        bail!(
            Mismatch,
            "{} changed while the array was being assembled",
            f.path.display()
        );
    }
    Ok(Found { member, ..again })
}

/// Files and block devices whose claimed members go through a table of injected faults
/// (failure drills; see [`crate::device::inject`]). Every member is wrapped, with or without
/// faults, so its requests in flight are tracked for the member timeout.
pub struct InjectingFiles(pub Arc<crate::device::inject::InjectTable>);

impl MemberSource for InjectingFiles {
    fn peek(&self, path: &Path) -> Result<Arc<dyn Member>> {
        Files.peek(path)
    }

    fn claim(&self, path: &Path, writable: bool) -> Result<Arc<dyn Member>> {
        Ok(self.0.wrap(path, Files.claim(path, writable)?))
    }

    fn id(&self, path: &Path) -> Option<(u64, u64)> {
        Files.id(path)
    }

    fn candidates(&self, locations: &[PathBuf]) -> Vec<PathBuf> {
        Files.candidates(locations)
    }

    fn is_file(&self, path: &Path) -> bool {
        Files.is_file(path)
    }

    fn block_devices(&self) -> Vec<PathBuf> {
        Files.block_devices()
    }
}

impl Array {
    /// Assembles the array that `path` is a member of.
    pub fn open(path: &Path, opts: &AssembleOptions) -> Result<Array> {
        Array::open_from(&Files, path, opts)
    }

    /// Assembles the array that `path` is a member of, finding members through `src`.
    pub fn open_from(src: &dyn MemberSource, path: &Path, opts: &AssembleOptions) -> Result<Array> {
        // Member paths are reported and events name them: absolute, so that they mean the
        // same to a process in another directory. The directory is resolved (`..`, symlinks),
        // the file name kept (/dev/disk/by-id names stay).
        let absolute = match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => {
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                std::fs::canonicalize(dir).map(|d| d.join(name)).ok()
            }
            _ => None,
        }
        .or_else(|| std::path::absolute(path).ok())
        .unwrap_or_else(|| path.to_path_buf());
        let path = absolute.as_path();
        let primary = claim(src, load(src, path)?, opts)?;
        let sb0 = primary.loaded.sb.clone();
        let mut seen: HashSet<(u64, u64)> = src.id(path).into_iter().collect();
        let entries = sb0.slots.clone();
        let count = entries.len();
        let mut found: Vec<Option<Found>> = (0..count).map(|_| None).collect();
        let mut reasons: Vec<Option<String>> = vec![None; count];
        let slot0 = sb0.slot as usize;
        found[slot0] = Some(primary);
        let wanted = |i: usize| entries[i].member_uuid != [0; 16];

        let matches = |f: &Found, entry: usize| -> std::result::Result<(), String> {
            let sb = &f.loaded.sb;
            if sb.array_uuid != sb0.array_uuid {
                return Err(format!(
                    "{} belongs to another array ({} \"{}\")",
                    f.path.display(),
                    uuid_str(&sb.array_uuid),
                    sb.name
                ));
            }
            if sb.member_uuid != entries[entry].member_uuid {
                return Err(format!(
                    "{} is not the member recorded for slot {entry}",
                    f.path.display()
                ));
            }
            if sb.layout.level != sb0.layout.level
                || sb.layout.members != sb0.layout.members
                || sb.layout.chunk_bytes != sb0.layout.chunk_bytes
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

        // Members of this array that the named member does not list, with more events than it:
        // the array went on without the named member (it was failed or replaced while its own
        // superblock could not be updated) and they know what happened since.
        let mut newer: Vec<Found> = Vec::new();
        // The named member's own directory first (a copy of an array's files must assemble
        // from the copy, never reach back into the original through its absolute hints),
        // then the path hints, then the scan locations.
        let by_scan = |locations: Vec<PathBuf>,
                       found: &mut Vec<Option<Found>>,
                       reasons: &mut Vec<Option<String>>,
                       seen: &mut HashSet<(u64, u64)>,
                       newer: &mut Vec<Found>| {
            for cand in src.candidates(&locations) {
                if (0..count).all(|i| found[i].is_some() || !wanted(i)) {
                    break;
                }
                let Some(id) = src.id(&cand) else { continue };
                if seen.contains(&id) {
                    continue;
                }
                let Ok(f) = load(src, &cand) else { continue };
                if f.loaded.sb.array_uuid != sb0.array_uuid {
                    continue;
                }
                let Some(i) = (0..count).find(|&i| {
                    found[i].is_none() && entries[i].member_uuid == f.loaded.sb.member_uuid
                }) else {
                    if f.loaded.sb.events > sb0.events
                        && !entries
                            .iter()
                            .any(|e| e.member_uuid == f.loaded.sb.member_uuid)
                    {
                        newer.push(f);
                    }
                    continue;
                };
                match matches(&f, i).and_then(|()| claim(src, f, opts).map_err(|e| e.to_string())) {
                    Ok(f) => {
                        seen.insert(id);
                        reasons[i] = None;
                        found[i] = Some(f);
                    }
                    Err(why) => reasons[i] = Some(why),
                }
            }
        };
        if src.is_file(path) {
            if let Some(dir) = path.parent() {
                let dir = if dir.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    dir.to_path_buf()
                };
                by_scan(vec![dir], &mut found, &mut reasons, &mut seen, &mut newer);
            }
        }

        // Path hints.
        for i in 0..count {
            if found[i].is_some() || !wanted(i) {
                continue;
            }
            let hint = PathBuf::from(&entries[i].path_hint);
            let Some(id) = src.id(&hint) else {
                reasons[i] = Some(format!("not found at {}", hint.display()));
                continue;
            };
            if seen.contains(&id) {
                continue;
            }
            match load(src, &hint) {
                Ok(f) => match matches(&f, i)
                    .and_then(|()| claim(src, f, opts).map_err(|e| e.to_string()))
                {
                    Ok(f) => {
                        seen.insert(id);
                        found[i] = Some(f);
                    }
                    Err(why) => reasons[i] = Some(why),
                },
                Err(e) => reasons[i] = Some(e.to_string()),
            }
        }

        // A member found one place whose hint names another place holding the same member
        // (the same member uuid): two copies of one member. Which one holds the array's data
        // cannot be told, so neither is used.
        // When the generations tell them apart (one is an older copy), the current one is
        // used and the older left alone.
        let expected = expected_generations(&found);
        let current = |l: &LoadedSuperblock| {
            l.generation.saturating_add(1) >= expected.get(&l.sb.member_uuid).copied().unwrap_or(0)
        };
        for i in 0..count {
            let Some(f) = &found[i] else { continue };
            let hint = PathBuf::from(&entries[i].path_hint);
            let (Some(at), Some(other)) = (src.id(&f.path), src.id(&hint)) else {
                continue;
            };
            if at == other {
                continue;
            }
            if let Ok(h) = load(src, &hint) {
                if h.loaded.sb.array_uuid == sb0.array_uuid
                    && h.loaded.sb.member_uuid == entries[i].member_uuid
                {
                    match (current(&f.loaded), current(&h.loaded)) {
                        (true, false) => continue,
                        (false, true) if i != slot0 => {
                            if let Ok(h) = claim(src, h, opts) {
                                seen.insert(other);
                                found[i] = Some(h);
                                continue;
                            }
                        }
                        _ => {}
                    }
                    bail!(
                        Mismatch,
                        "{} and {} are both slot {i} of array {} (copies of one member): assemble from one set of copies only; move the other set away first",
                        f.path.display(),
                        hint.display(),
                        uuid_str(&sb0.array_uuid)
                    );
                }
            }
        }

        if (0..count).any(|i| found[i].is_none() && wanted(i)) && !opts.scan.is_empty() {
            by_scan(
                opts.scan.clone(),
                &mut found,
                &mut reasons,
                &mut seen,
                &mut newer,
            );
        }
        // Members on block devices are looked for by uuid on every block device: kernel names
        // change between boots, and a member found under a new name is not stale.
        if (0..count).any(|i| found[i].is_none() && wanted(i)) && !src.is_file(path) {
            by_scan(
                src.block_devices(),
                &mut found,
                &mut reasons,
                &mut seen,
                &mut newer,
            );
        }

        // Split brain: the named member and a sibling were each assembled without the other,
        // each recording the other out of service while counting itself active, so each went
        // on taking writes the other lacks. Whichever is named would be served as the array
        // (reads through one member returned one half's data, through the other the other's)
        // and re-adding the other overwrites its writes: refused, unless --force-assemble says
        // the named half is the one to keep. A report shows it instead.
        let split: Vec<String> = found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let f = f.as_ref()?;
                let theirs = &f.loaded.sb;
                // Out of service in a superblock: recorded faulty (and in no other role). A
                // rebuild or replace target is in service (a member that stopped answering
                // during a rebuild still records the target as rebuilding: not a split). A
                // member not listed at all is not taken for a split either: a stale member
                // from before a replace never knew its slot's new device (simulator seed 519).
                let out = |sb: &format::Superblock, uuid: &[u8; 16]| {
                    sb.slots
                        .iter()
                        .any(|e| &e.member_uuid == uuid && e.state == SlotState::Faulty)
                        && !sb
                            .slots
                            .iter()
                            .any(|e| &e.member_uuid == uuid && e.state != SlotState::Faulty)
                };
                let self_active = theirs.slots.get(theirs.slot as usize).is_some_and(|e| {
                    e.member_uuid == theirs.member_uuid && e.state == SlotState::Active
                });
                let in_service = |sb: &format::Superblock, uuid: &[u8; 16]| {
                    sb.slots
                        .iter()
                        .any(|e| &e.member_uuid == uuid && e.state != SlotState::Faulty)
                };
                // Not a split but one stale half: a third member the stale one last saw in
                // service records it out and the other in service. It was with the stale one
                // when the other was failed, and with the other once it was back (re-added)
                // and the stale one was gone. A half that went on alone would have recorded
                // the third member out too. (Simulator seed 17001450: RAID1 of three, m1
                // failed, then m0, m1 re-added and rebuilt, m2 failed: m0 and m1 each
                // recorded the other as failed, and the array was refused as split.)
                let stale = |gone: &format::Superblock, back: &[u8; 16]| {
                    found.iter().flatten().any(|z| {
                        let zs = &z.loaded.sb;
                        zs.member_uuid != gone.member_uuid
                            && &zs.member_uuid != back
                            && in_service(gone, &zs.member_uuid)
                            && out(zs, &gone.member_uuid)
                            && in_service(zs, back)
                    })
                };
                (i != slot0
                    && i < sb0.layout.members
                    && out(theirs, &sb0.member_uuid)
                    && out(&sb0, &theirs.member_uuid)
                    && self_active
                    && !stale(theirs, &sb0.member_uuid)
                    && !stale(&sb0, &theirs.member_uuid))
                .then(|| f.path.display().to_string())
            })
            .collect();
        let mut split_note = None;
        let mut forced_split = false;
        if !split.is_empty() {
            let why = format!(
                "split brain: {} and {} were each assembled without the other and each records the other as failed, so each may hold writes the other lacks",
                path.display(),
                split.join(", ")
            );
            if opts.allow_failed {
                split_note = Some(why);
            } else if opts.force {
                forced_split = true;
                split_note = Some(format!(
                    "FORCED: {why}; the array is assembled from {} and the writes only {} holds are lost when it is re-added",
                    path.display(),
                    split.join(", ")
                ));
            } else {
                bail!(
                    Mismatch,
                    "{why}. Keep one half: read each alone (the other moved away) to choose, then assemble the half to keep with --force-assemble and `raidctl add` the other to rebuild it from that half"
                );
            }
        }

        // The named member must be current: a member behind its siblings, or one recorded
        // faulty, would otherwise present old data as the array's. Its siblings include members
        // of the array it does not list (found by scanning): when every member it knows is gone,
        // they are the only sign that the array went on without it (simulator seed 302389).
        let newest = found
            .iter()
            .flatten()
            .chain(&newer)
            .map(|f| f.loaded.sb.events)
            .max()
            .unwrap_or(0);
        let name = path.display();
        // A forced split keeps the named half whatever its event count: the other half's
        // count says only that it, too, went on alone.
        if sb0.events < newest && !forced_split {
            let good = found
                .iter()
                .flatten()
                .chain(&newer)
                .find(|f| f.loaded.sb.events == newest);
            // Behind only because a superblock update did not reach it (a crash in the middle
            // of one): the newest superblock still counts it as active, so it missed no data.
            // Assemble from the newest member instead, which is the authority on roles.
            if let Some(g) = good {
                if g.path != path
                    && g.loaded
                        .sb
                        .slots
                        .iter()
                        .any(|e| e.member_uuid == sb0.member_uuid && e.state == SlotState::Active)
                {
                    let authority = g.path.clone();
                    drop(found);
                    return Array::open_from(src, &authority, opts);
                }
            }
            let good = good.map(|f| f.path.display().to_string());
            bail!(
                Mismatch,
                "{name} is stale: events {} behind the array's {newest} (it was failed or absent while the array changed); \
                 name a current member such as {} and re-add {name} with `raidctl add` to rebuild it",
                sb0.events,
                good.unwrap_or_default()
            );
        }
        if sb0.slots[slot0].state == SlotState::Faulty {
            bail!(
                Mismatch,
                "{name} was failed out of its array \"{}\"; name another member, and re-add it with `raidctl add` to rebuild it",
                sb0.name
            );
        }

        // The generation every member should have at least, by the newest record any member
        // holds. One behind is a superblock update a crash cut short (it missed no data); more
        // is an older copy of the member put back (a backup, an old image): its blocks are
        // older than its siblings', so it is stale whatever its event count says.
        let expected = expected_generations(&found);
        let older_copy = |f: &Found| {
            let want = expected.get(&f.loaded.sb.member_uuid).copied().unwrap_or(0);
            (f.loaded.generation.saturating_add(1) < want).then_some(want)
        };
        if let Some(want) = found[slot0].as_ref().and_then(older_copy) {
            bail!(
                Mismatch,
                "{} is an older copy of its member (superblock generation {}, its siblings record {want}): its data is out of date; name a current member and re-add {} with `raidctl add` to rebuild it",
                path.display(),
                found[slot0].as_ref().expect("primary").loaded.generation,
                path.display()
            );
        }
        let n = sb0.layout.members;
        let mut notes: Vec<String> = split_note.into_iter().collect();
        let mut devs: Vec<Option<Arc<Dev>>> = Vec::with_capacity(count);
        let mut is_stale = vec![false; count];
        let mut dev_events = vec![0u64; count];
        for (i, f) in found.into_iter().enumerate() {
            devs.push(f.and_then(|f| {
                dev_events[i] = f.loaded.sb.events;
                if let Some(want) = older_copy(&f) {
                    is_stale[i] = true;
                    reasons[i] = Some(format!(
                        "{} is an older copy (superblock generation {}, its siblings record {want}); it must be rebuilt",
                        f.path.display(),
                        f.loaded.generation
                    ));
                    if i >= n || !matches!(entries[i].state, SlotState::Active | SlotState::Faulty) {
                        return None;
                    }
                }
                // Behind the newest superblock, which no longer lists it as active: it was
                // failed, removed or absent while the array changed. (One still listed active
                // only missed a superblock update, at a crash: it holds every write.)
                if f.loaded.sb.events < sb0.events && entries[i].state != SlotState::Active {
                    is_stale[i] = true;
                    reasons[i] = Some(format!(
                        "{} is stale: events {} behind the array's {} (failed or absent while the array changed); it must be rebuilt",
                        f.path.display(),
                        f.loaded.sb.events,
                        sb0.events
                    ));
                    if i >= n || !matches!(entries[i].state, SlotState::Active | SlotState::Faulty) {
                        return None;
                    }
                }
                let dev = Dev::new(f.member.clone(), f.path.clone(), f.loaded.sb.member_uuid, f.loaded.sb.wear.clone(), (f.loaded.generation, f.loaded.copy));
                Some(Arc::new(dev))
            }));
        }

        let mut slots: Vec<Slot> = Vec::with_capacity(n);
        for i in 0..n {
            let slot = match entries[i].state {
                SlotState::Active => {
                    let s = Slot::new(devs[i].clone());
                    if is_stale[i] {
                        s.failed.store(true, Ordering::Release);
                    }
                    s
                }
                SlotState::Faulty => {
                    let s = Slot::new(devs[i].clone());
                    s.failed.store(true, Ordering::Release);
                    if devs[i].is_some() && reasons[i].is_none() {
                        reasons[i] = Some("recorded faulty".into());
                    }
                    // `remove` leaves the slot faulty with no member: nothing was looked for.
                    if entries[i].member_uuid == [0; 16] {
                        reasons[i] = Some("removed".into());
                    }
                    s
                }
                SlotState::Rebuilding { checkpoint_row } => {
                    let s = Slot::new(None);
                    match &devs[i] {
                        Some(d) => {
                            // A re-add in progress when the record tracks this member here.
                            let readd = crate::array::readd::ReaddRecord::parse(&sb0)
                                .ok()
                                .flatten()
                                .is_some_and(|r| {
                                    r.tracked
                                        .iter()
                                        .any(|t| t.slot as usize == i && t.member_uuid == d.uuid)
                                });
                            *s.target.write().expect("fresh") = Some(Arc::new(Target {
                                dev: d.clone(),
                                kind: TargetKind::Rebuild,
                                checkpoint: AtomicU64::new(checkpoint_row),
                                durable: AtomicU64::new(checkpoint_row),
                                readd,
                            }));
                            reasons[i] = Some("being rebuilt".into());
                        }
                        None => {
                            reasons[i] = Some(format!(
                                "rebuild target {}",
                                reasons[i].clone().unwrap_or_else(|| "missing".into())
                            ))
                        }
                    }
                    s
                }
                SlotState::Spare | SlotState::Replacing { .. } => {
                    unreachable!("validated: extras follow the slots")
                }
            };
            slot.set_reason(
                reasons[i]
                    .take()
                    .or_else(|| slot.usable().is_none().then(|| "not found".into())),
            );
            slots.push(slot);
        }
        let mut spares = Vec::new();
        for i in n..count {
            let Some(d) = devs[i].clone() else {
                notes.push(format!(
                    "left out {} {}: {}",
                    entries[i].state.name(),
                    entries[i].path_hint,
                    reasons[i].clone().unwrap_or_else(|| "not found".into())
                ));
                continue;
            };
            match entries[i].state {
                SlotState::Spare => spares.push(d),
                SlotState::Replacing {
                    slot,
                    checkpoint_row,
                    old_to_slot,
                } => {
                    *slots[slot as usize].target.write().expect("fresh") = Some(Arc::new(Target {
                        dev: d,
                        kind: TargetKind::Replace { old_to_slot },
                        checkpoint: AtomicU64::new(checkpoint_row),
                        durable: AtomicU64::new(checkpoint_row),
                        readd: false,
                    }));
                }
                _ => unreachable!("validated"),
            }
        }

        let mut sb0 = sb0;
        if forced_split {
            // Ahead of the other half from now on, so that it is stale, not newer.
            sb0.events = sb0.events.max(newest) + 1;
        }
        let mut forced = Vec::new();
        if opts.force {
            let layout = crate::layout::Layout::new(&sb0.layout)?;
            let mut lost: Vec<bool> = slots.iter().map(|s| s.usable().is_none()).collect();
            let mut cands: Vec<usize> = (0..n)
                .filter(|&i| {
                    lost[i]
                        && entries[i].state == SlotState::Faulty
                        && slots[i].dev.read().expect("fresh").is_some()
                })
                .collect();
            cands.sort_by_key(|&i| std::cmp::Reverse(dev_events[i]));
            for i in cands {
                if layout.survives(&lost) {
                    break;
                }
                slots[i].failed.store(false, Ordering::Release);
                slots[i].set_reason(None);
                lost[i] = false;
                sb0.slots[i].state = SlotState::Active;
                forced.push(i);
            }
            if !forced.is_empty() {
                sb0.events += 1;
                // What the taken-back members missed is anywhere: every row is resynced.
                sb0.clean = false;
            }
        }
        let was_clean = sb0.clean;
        let array = Array::from_parts(sb0, slots, spares, opts.writable)?;
        for &i in &forced {
            notes.push(format!(
                "FORCED: slot {i} was failed (at events {}) and is taken back in by --force-assemble; writes made after it failed are missing from it and may read as old data",
                dev_events[i]
            ));
        }
        if !forced.is_empty() && opts.writable {
            // Every row resyncs: set every region's bit (the write-intent bits only: the data
            // map is the union over the members, so the taken-back member's missing bits do
            // not matter).
            drop(array.bitmap_mark_as(0..array.rows(), false)?);
        }
        array.notes.lock().expect("notes lock").extend(notes);
        if !opts.allow_failed || opts.writable {
            array
                .check_alive()
                .map_err(|e| e.context(format!("assembling {}", path.display())))?;
        }
        if opts.writable {
            let lost = array.settle_entries()?;
            // A replace whose member is gone copies from nothing: it is a rebuild of the same
            // target from here, which holds the rows below its checkpoint for the slot. Now,
            // before the resync: as a replace target it was refreshed from the missing member
            // (simulator seed 1305553: "resync after restart: slot 3 (missing) failed").
            for slot in 0..n {
                if array.slots[slot].usable().is_none()
                    && array.slots[slot]
                        .target()
                        .is_some_and(|t| t.kind != TargetKind::Rebuild)
                {
                    array.replace_source_lost(slot)?;
                }
            }
            // A degraded partial-row write cut short by a crash is completed from its journal.
            array.journal_replay()?;
            array.mark_lost_in_crash(&lost, was_clean, true)?;
            if !was_clean {
                let rows = array.dirty_rows();
                array
                    .unsynced_any
                    .store(!rows.is_empty(), std::sync::atomic::Ordering::Release);
                *array.unsynced.lock().expect("unsynced lock") = rows;
            }
        } else if !was_clean {
            // Read-only: the same marks, in memory only, so reads fail rather than guess.
            let lost: Vec<usize> = (0..n)
                .filter(|&i| {
                    entries[i].state == SlotState::Active && array.slots[i].usable().is_none()
                })
                .collect();
            array.mark_lost_in_crash(&lost, was_clean, false)?;
        }
        Ok(array)
    }

    /// After an unclean stop, for members that were in service then and are gone now: their
    /// data in the rows the write-intent bitmap names can only be computed from rows a write
    /// may have cut (new data on some members, old on others), so it goes on the bad-block
    /// list rather than be guessed (see `badblocks`), except where the checksum entries show
    /// no write was cutting a column (csum.rs, epochs). Likewise for a member failed earlier
    /// while writes were in flight, in the columns those writes were cutting (its suspect
    /// blocks, within the marked regions). The suspect record is spent either way.
    fn mark_lost_in_crash(&self, lost: &[usize], was_clean: bool, persist: bool) -> Result<()> {
        let suspect = self.bad.lock().expect("bad-block lock").suspect();
        let had_suspect = suspect.iter().any(|l| !l.is_empty());
        let parity = matches!(
            self.layout.redundancy(),
            crate::layout::Redundancy::Parity { .. }
        );
        let mut notes = Vec::new();
        if parity && !was_clean {
            let dirty: Vec<std::ops::Range<u64>> = self
                .dirty_rows()
                .into_iter()
                .map(|r| self.row_blocks(r))
                .collect();
            for (slot, slot_suspect) in suspect.iter().enumerate() {
                if self.slots[slot].usable().is_some() {
                    continue;
                }
                // Rows a rebuild target holds (below its durable checkpoint) are the slot's as
                // any member's are: a torn write there is the resync's, nothing is lost.
                let held = self.slots[slot]
                    .target()
                    .filter(|t| t.kind == TargetKind::Rebuild)
                    .map_or(0, |t| {
                        self.row_blocks(0..t.durable.load(Ordering::Acquire)).end
                    });
                let blocks: Vec<std::ops::Range<u64>> = if lost.contains(&slot) {
                    dirty.clone()
                } else {
                    slot_suspect
                        .iter()
                        .flat_map(|s| {
                            dirty
                                .iter()
                                .map(|d| s.start.max(d.start)..s.end.min(d.end))
                                .filter(|r| !r.is_empty())
                        })
                        .collect()
                };
                let marked: u64 = blocks
                    .iter()
                    .map(|b| b.start.max(held)..b.end)
                    .filter(|b| !b.is_empty())
                    .map(|b| self.mark_lost_unless_checked(slot, b))
                    .sum();
                if marked > 0 {
                    let note = format!(
                        "slot {slot} was lost with writes in flight at an unclean stop: {marked} blocks of its data, in rows being written then, cannot be rebuilt with certainty and read as errors until written again (bad-block list)"
                    );
                    if persist {
                        self.event("bad-blocks", Some(slot), note.clone());
                    }
                    notes.push(note);
                }
            }
        }
        self.notes.lock().expect("notes lock").extend(notes.clone());
        if !persist {
            return Ok(());
        }
        if had_suspect {
            self.bad.lock().expect("bad-block lock").clear_suspect();
        }
        if notes.is_empty() && !had_suspect {
            return Ok(());
        }
        self.persist()
    }

    /// Marks `slot`'s data in member blocks `blocks` (numbered as the bad-block list numbers
    /// them) lost, except what the row's redundancy proves intact: on RAID6 with only this slot
    /// missing from a row, the slot's cell is computed from P and checked against Q, 4 KiB
    /// column by column; a torn write leaves the two disagreeing in the columns it cut, and
    /// only those are marked. Elsewhere (RAID5, F1, two slots missing, a read failing) every
    /// block named is marked, as nothing can check it. Blocks where the slot holds parity do
    /// not count (parity is never read as data). Returns the data blocks marked.
    fn mark_lost_unless_checked(&self, slot: usize, blocks: std::ops::Range<u64>) -> u64 {
        let per_row = self.layout.chunk() / super::csum::BLOCK;
        let before = self.bad_block_counts()[slot];
        let mark = |b: std::ops::Range<u64>| {
            self.bad.lock().expect("bad-block lock").mark(slot, b);
        };
        let checksums = self.has_checksums();
        if self.layout.parity_count() != 2 && !checksums {
            mark(blocks);
        } else {
            let settled = checksums.then(|| self.settled_epoch());
            for row in blocks.start / per_row..blocks.end.div_ceil(per_row) {
                let base = row * per_row;
                let part = blocks.start.max(base)..blocks.end.min(base + per_row);
                let cols = if self.layout.parity_count() == 2 {
                    self.torn_columns(slot, row)
                } else {
                    None
                }
                .unwrap_or_else(|| std::iter::once(0..per_row).collect());
                // Columns whose surviving blocks all match entries a returned flush made
                // durable: no write was cutting them (csum.rs, epochs).
                let kept = settled.map(|e| self.settled_columns(slot, row, e));
                // RAID6: columns where P and Q disagree because a surviving block rotted, not
                // because a write was cut (every entry settled, one failing, recovered from
                // P and Q to match it).
                let unkept = cols
                    .iter()
                    .flat_map(|c| c.clone())
                    .any(|k| !kept.as_ref().is_some_and(|v| v[k as usize]));
                let rot_only = settled
                    .filter(|_| self.layout.parity_count() == 2 && unkept)
                    .map(|e| self.columns_intact_but_for_rot(slot, row, e));
                for c in cols {
                    for k in c {
                        if kept.as_ref().is_some_and(|v| v[k as usize])
                            || rot_only.as_ref().is_some_and(|v| v[k as usize])
                        {
                            continue;
                        }
                        let b = (base + k).max(part.start)..(base + k + 1).min(part.end);
                        if !b.is_empty() {
                            mark(b);
                        }
                    }
                }
            }
        }
        self.bad_block_counts()[slot] - before
    }

    /// RAID6, `slot` holding data in `row` and the only slot missing there: the 4 KiB columns
    /// (ranges of block indexes within the chunk) where the cell computed from P disagrees with
    /// Q. None when the row cannot be checked that way.
    fn torn_columns(&self, slot: usize, row: u64) -> Option<Vec<std::ops::Range<u64>>> {
        let slots = self.row_slots(row, 2);
        let d = slots.len() - 2;
        let pos = slots.iter().position(|&s| s == slot)?;
        if pos >= d {
            return Some(Vec::new()); // parity: nothing of the slot's data to lose
        }
        if slots
            .iter()
            .enumerate()
            .any(|(i, &s)| i != pos && self.source(s, row).is_none())
        {
            return None;
        }
        let c = self.layout.chunk() as usize;
        let mut cells: Vec<crate::buf::AlignedBuf> = slots
            .iter()
            .map(|_| crate::buf::AlignedBuf::zeroed(c))
            .collect();
        for (i, &s) in slots.iter().enumerate() {
            if i != pos {
                self.member_read(s, &mut cells[i], row, 0).ok()?;
            }
        }
        // The missing cell from P: P xor the other data.
        let (data, par) = cells.split_at_mut(d);
        data[pos].copy_from_slice(&par[0]);
        for i in (0..d).filter(|&i| i != pos) {
            let (a, b) = if i < pos {
                let (l, r) = data.split_at_mut(pos);
                (&mut r[0], &l[i])
            } else {
                let (l, r) = data.split_at_mut(i);
                (&mut l[pos], &r[0])
            };
            (self.kernel.xor_into)(a, b);
        }
        let mut p = crate::buf::AlignedBuf::zeroed(c);
        let mut q = crate::buf::AlignedBuf::zeroed(c);
        {
            let refs: Vec<&[u8]> = data.iter().map(|b| &b[..]).collect();
            (self.kernel.gen_pq)(&refs, &mut p, Some(&mut q));
        }
        let b = super::csum::BLOCK as usize;
        let mut out: Vec<std::ops::Range<u64>> = Vec::new();
        for k in 0..c / b {
            if q[k * b..(k + 1) * b] != par[1][k * b..(k + 1) * b] {
                match out.last_mut() {
                    Some(l) if l.end == k as u64 => l.end += 1,
                    _ => out.push(k as u64..k as u64 + 1),
                }
            }
        }
        Some(out)
    }

    /// After a writable assembly: records what is missing (events bumped, so absent members are
    /// recognised as stale when they return) and refreshes the path hints.
    fn settle_entries(&self) -> Result<Vec<usize>> {
        let mut changed = false;
        let mut lost = Vec::new();
        // The re-add map (before anything can clear a bit): members absent now that were in
        // service are tracked from now, tracked ones stay so, and a slot in service again (a
        // forced assembly took its member back) stops being tracked.
        let tracked = self.tracked_slots();
        let leaving: Vec<bool> = {
            let meta = self.meta.lock().expect("meta lock");
            (0..self.slots.len())
                .map(|i| meta.slots[i].state == SlotState::Active || tracked.contains(&i))
                .collect()
        };
        for (i, s) in self.slots.iter().enumerate() {
            if s.usable().is_none() && leaving[i] {
                self.track_departure(i);
            } else if s.usable().is_some() && tracked.contains(&i) {
                self.untrack(i);
            }
        }
        {
            let mut meta = self.meta.lock().expect("meta lock");
            for (i, s) in self.slots.iter().enumerate() {
                if s.usable().is_none() && meta.slots[i].state == SlotState::Active {
                    self.note_departure(&mut meta, i);
                } else if s.usable().is_some() && tracked.contains(&i) {
                    self.note_return(&mut meta, i);
                    changed = true;
                }
            }
            let mut bump = false;
            let present: Vec<[u8; 16]> = self.live_devs().iter().map(|d| d.uuid).collect();
            for (i, s) in self.slots.iter().enumerate() {
                if s.usable().is_none() && meta.slots[i].state == SlotState::Active {
                    meta.slots[i].state = SlotState::Faulty;
                    lost.push(i);
                    bump = true;
                }
                if matches!(meta.slots[i].state, SlotState::Rebuilding { .. })
                    && s.target().is_none()
                {
                    meta.slots[i].state = SlotState::Faulty;
                    bump = true;
                }
            }
            let before = meta.slots.len();
            meta.retain_extras(|e| present.contains(&e.member_uuid));
            bump |= meta.slots.len() != before;
            for d in self.live_devs() {
                let hint = crate::device::probe::stable_name(&d.path)
                    .unwrap_or_else(|| {
                        std::fs::canonicalize(&d.path).unwrap_or_else(|_| d.path.clone())
                    })
                    .display()
                    .to_string();
                if let Some(e) = meta.slots.iter_mut().find(|e| e.member_uuid == d.uuid) {
                    if hint.len() <= format::MAX_PATH_HINT && e.path_hint != hint {
                        e.path_hint = hint;
                        changed = true;
                    }
                }
            }
            if bump {
                meta.events += 1;
                changed = true;
            }
            // After an unclean stop the bits set at open clear only after a superblock update
            // since open (bitmap.rs, `persisted_from`: an image of a member taken before the
            // writes they cover must be a generation behind): one now, so they clear at the
            // first flush after the resync.
            changed |= !meta.clean && self.bitmap.is_some();
        }
        if changed {
            self.persist()?;
        }
        Ok(lost)
    }
}
