//! Creating an array: safety checks on every member before anything is written (duplicates,
//! mounts and other users, file systems, other arrays), geometry, zeroing the data area so
//! parity starts consistent, discarding the overprovisioned tail, and the first superblocks.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;

use super::csum::{CsumAlgo, CsumGeometry};
use super::{now, Array, Dev, Slot};
use crate::device::{probe, FileMember, Member, OpenMode};
use crate::error::{Error, Result};
use crate::format::{self, plan_geometry, Probe, SlotInfo, SlotState, Superblock, WearRecord};
use crate::layout::{Layout, LayoutParams};

/// What to create.
#[derive(Clone, Debug)]
pub struct CreateSpec {
    pub name: String,
    pub layout: LayoutParams,
    /// Percent of each member left unused (and discarded) at the tail.
    pub overprovision_pct: f64,
    /// Rated endurance per member in bytes, in member order (empty: unknown).
    pub endurance_bytes: Vec<Option<u64>>,
    /// Seconds between wear history samples.
    pub history_interval: u64,
    /// Keep a checksum of every 4 KiB block with this hash (verified on read and by scrub);
    /// None: no checksums.
    pub checksums: Option<CsumAlgo>,
    /// Bytes of member data per write-intent bit (md's bitmap chunk): a power of two, at least
    /// the chunk. None: 64 MiB, coarser where the bitmap would pass 64 KiB. A smaller one bounds
    /// what an unclean stop puts at risk more tightly (the resync, and without checksums what a
    /// member lost with a power cut costs, cover the regions marked at the cut) and costs more
    /// bitmap writes (the first write into each clean region).
    pub bitmap_chunk: Option<u64>,
}

/// Checks every member path before anything is written: no duplicates, nothing mounted or held
/// (refused even with `force`), no file system, partition table or array signature (refused
/// unless `force`).
pub fn preflight(paths: &[PathBuf], force: bool) -> Result<()> {
    let mut ids = HashSet::new();
    for p in paths {
        let name = p.display();
        let meta = std::fs::metadata(p).map_err(|e| Error::io(e, "stat", &name.to_string(), 0))?;
        let id = if meta.file_type().is_block_device() {
            (u64::MAX, meta.rdev())
        } else {
            (meta.dev(), meta.ino())
        };
        if !ids.insert(id) {
            bail!(InvalidInput, "{name} is given twice (duplicate member)");
        }
        if let Some(why) = probe::in_use(p) {
            bail!(Busy, "{why}; refusing to use it (not even with --force)");
        }
    }
    for p in paths {
        let name = p.display();
        let m = FileMember::open(p, OpenMode::Read)?;
        match format::probe(&m)? {
            Probe::NotMember => {}
            Probe::Valid(l) if !force => bail!(
                InUse,
                "{name} holds slot {} of raidctl array \"{}\" ({}); use --force to overwrite it",
                l.sb.slot,
                l.sb.name,
                uuid::Uuid::from_bytes(l.sb.array_uuid).hyphenated()
            ),
            Probe::Corrupt(_) if !force => {
                bail!(
                    InUse,
                    "{name} holds a damaged raidctl superblock; use --force to overwrite it"
                )
            }
            _ => {}
        }
        let sigs = probe::foreign_signatures(&m, Some(p));
        if !sigs.is_empty() && !force {
            bail!(
                InUse,
                "{name} holds {}; use --force to overwrite it",
                sigs.join(", ")
            );
        }
    }
    Ok(())
}

impl Array {
    /// Creates an array over `paths` after [`preflight`]. Returns it open for writing.
    /// `progress(done, total)` is called as the members are prepared (zeroing can take a while on
    /// block devices without a fast write-zeroes).
    pub fn create(
        paths: &[PathBuf],
        spec: &CreateSpec,
        force: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Array> {
        let layout = Layout::new(&spec.layout)?;
        if paths.len() != layout.members() {
            bail!(
                InvalidInput,
                "{} members given for a layout of {}",
                paths.len(),
                layout.members()
            );
        }
        if spec.name.len() > format::MAX_NAME {
            bail!(
                InvalidInput,
                "array name is longer than {} bytes",
                format::MAX_NAME
            );
        }
        // The name goes into mail headers, terminals and logs: no control characters (a
        // newline in it once added a Bcc: to the monitor's mail).
        // Nor characters that reorder or break a line where it is shown (bidirectional
        // overrides, zero-width and line separators), nor only spaces.
        let hidden = |c: char| {
            c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        };
        if spec.name.trim().is_empty() || spec.name.chars().any(hidden) {
            bail!(
                InvalidInput,
                "array name {:?} must hold a visible character and no control or layout characters (newlines, tabs, escapes, bidirectional overrides, zero-width or line separators)",
                spec.name
            );
        }
        if !spec.endurance_bytes.is_empty() && spec.endurance_bytes.len() != paths.len() {
            bail!(
                InvalidInput,
                "{} endurance values for {} members",
                spec.endurance_bytes.len(),
                paths.len()
            );
        }
        preflight(paths, force)?;
        let mut members: Vec<(PathBuf, Arc<dyn Member>)> = Vec::new();
        for p in paths {
            let m = FileMember::open(p, OpenMode::Write)?;
            let hint = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if hint.display().to_string().len() > format::MAX_PATH_HINT {
                bail!(
                    InvalidInput,
                    "member path {} is longer than {} bytes",
                    hint.display(),
                    format::MAX_PATH_HINT
                );
            }
            members.push((hint, Arc::new(m)));
        }
        Array::create_on(members, spec, progress)
    }

    /// Creates an array on already opened members (any backend). No signature checks.
    pub fn create_on(
        members: Vec<(PathBuf, Arc<dyn Member>)>,
        spec: &CreateSpec,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Array> {
        let layout = Layout::new(&spec.layout)?;
        if members.len() != layout.members() {
            bail!(
                InvalidInput,
                "{} members given for a layout of {}",
                members.len(),
                layout.members()
            );
        }
        let (small_i, smallest) = members
            .iter()
            .enumerate()
            .map(|(i, (_, m))| (i, m.len()))
            .min_by_key(|&(_, l)| l)
            .expect("at least two members");
        // Room for the journal and the checksum area on top of the usual metadata reserve.
        let chunk = layout.chunk();
        let journal = if layout.parity_count() > 0 {
            4096 + layout.members() as u64 * chunk
        } else {
            0
        };
        let sums = match spec.checksums {
            Some(algo) => CsumGeometry::for_rows(0, smallest / chunk, chunk, algo).bytes(),
            None => 0,
        };
        let geo = plan_geometry(smallest, chunk, spec.overprovision_pct, journal + sums)
            .map_err(|e| e.context(format!("member {}", members[small_i].0.display())))?;
        let array_uuid = *uuid::Uuid::new_v4().as_bytes();
        let uuids: Vec<[u8; 16]> = members
            .iter()
            .map(|_| *uuid::Uuid::new_v4().as_bytes())
            .collect();
        let t = now();
        let mut sb = Superblock {
            array_uuid,
            name: spec.name.clone(),
            layout: layout.params(),
            member_uuid: uuids[0],
            slot: 0,
            slots: members
                .iter()
                .zip(&uuids)
                .map(|((p, _), u)| SlotInfo {
                    member_uuid: *u,
                    state: SlotState::Active,
                    path_hint: p.display().to_string(),
                })
                .collect(),
            events: 1,
            member_bytes: smallest,
            metadata_offset: geo.metadata_offset,
            metadata_bytes: geo.metadata_bytes,
            data_offset: geo.data_offset,
            data_rows: geo.data_rows,
            array_bytes: layout.logical_chunks(geo.data_rows) * layout.chunk(),
            created: t,
            updated: t,
            clean: true,
            wear: WearRecord::default(),
            write_mix: Default::default(),
            history_interval: spec.history_interval,
            compat_features: 0,
            incompat_features: 0,
            extensions: Vec::new(),
        };
        let mut meta_end = format::METADATA_OFFSET;
        // RAID0 without checksums has nothing a resync could do (no redundancy, no entries) and
        // nothing to rebuild: no bitmap (its first write into each region costs a bitmap write
        // and a flush of every member) and so no data map.
        let resync_has_work =
            layout.level() != crate::layout::Level::Raid0 || spec.checksums.is_some();
        if !resync_has_work && spec.bitmap_chunk.is_some() {
            bail!(
                InvalidInput,
                "a bitmap chunk was given, but RAID0 without checksums keeps no write-intent bitmap (a resync would have nothing to do)"
            );
        }
        if let Some(geo) = resync_has_work
            .then(|| {
                super::bitmap::BitmapGeometry::plan(
                    sb.data_rows,
                    layout.chunk(),
                    sb.metadata_bytes,
                    spec.bitmap_chunk,
                )
            })
            .transpose()?
            .flatten()
        {
            sb.compat_features |= super::bitmap::FEATURE_BITMAP;
            sb.extensions.push(geo.to_extension());
            // The data map starts empty: create zeroes every row below.
            if let Some(map) = geo.data_map_extension() {
                sb.incompat_features |= super::bitmap::FEATURE_DATA_MAP;
                sb.extensions.push(map);
            }
            // The re-add map starts empty, tracking nobody.
            if geo.readd_map {
                sb.incompat_features |= super::readd::FEATURE_READD_MAP;
                sb.extensions.push(
                    super::readd::ReaddRecord {
                        offset: geo.offset + 2 * geo.bytes,
                        bytes: geo.bytes,
                        tracked: Vec::new(),
                    }
                    .to_extension(),
                );
            }
            meta_end = geo.end();
        }
        if layout.parity_count() > 0 {
            let n = layout.members() as u64;
            if let Some(j) =
                super::journal::JournalGeometry::plan(meta_end, n, layout.chunk(), sb.data_offset)
            {
                sb.compat_features |= super::journal::FEATURE_JOURNAL;
                sb.extensions.push(j.to_extension());
                meta_end = j.offset + j.bytes;
            }
        }
        if let Some(algo) = spec.checksums {
            let g = CsumGeometry::for_rows(meta_end, sb.data_rows, chunk, algo);
            if g.end() > sb.data_offset {
                bail!(
                    InvalidInput,
                    "members are too small for the checksum area ({} bytes); use --no-checksums",
                    g.bytes()
                );
            }
            sb.incompat_features |= g.incompat_bits();
            sb.extensions.push(g.to_extension());
        }
        sb.validate()?;
        // Zero metadata and data (holes or write-zeroes: parity of zeros is zero, so every row
        // starts consistent), then discard the tail. The first 4 KiB are never touched.
        const STEP: u64 = 1 << 30;
        let span = geo.tail_offset - format::SB_A_OFFSET;
        let total = span * members.len() as u64;
        let mut done = 0;
        progress(0, total);
        for (p, m) in &members {
            let ctx = |e: Error| e.context(format!("preparing {}", p.display()));
            let mut pos = format::SB_A_OFFSET;
            while pos < geo.tail_offset {
                let n = (geo.tail_offset - pos).min(STEP);
                m.write_zeroes(pos, n).map_err(ctx)?;
                pos += n;
                done += n;
                progress(done, total);
            }
            if m.len() > geo.tail_offset {
                if let Err(e) = m.discard(geo.tail_offset, m.len() - geo.tail_offset) {
                    // Discard is advisory: devices without it keep the tail as it is.
                    let unsupported = matches!(
                        e.raw_os_error(),
                        Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL)
                    );
                    if !unsupported {
                        return Err(ctx(e));
                    }
                }
            }
        }
        let mut slots = Vec::with_capacity(members.len());
        for (i, (p, m)) in members.into_iter().enumerate() {
            let wear = WearRecord {
                endurance_bytes: spec.endurance_bytes.get(i).copied().flatten(),
                ..WearRecord::default()
            };
            let s = Slot::new(Some(Arc::new(Dev::new(m, p, uuids[i], wear, (0, 1)))));
            slots.push(s);
        }
        let array = Array::from_parts(sb, slots, Vec::new(), true)?;
        // Both copies valid from the start: generation 1 in A, 2 in B.
        array.persist()?;
        array.persist()?;
        Ok(array)
    }
}
