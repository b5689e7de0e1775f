//! Re-add from the bitmap: a member that left its slot (failed, or absent at assembly) and comes
//! back holding what it held then is brought up to date by copying only the regions written
//! since it left, as md's `--re-add`. The record of who is tracked since when (incompatible
//! feature [`FEATURE_READD_MAP`], extension record [`READD_TAG`]) and the decision to trust a
//! returning member live here; the map's bits ride with the write-intent bitmap (bitmap.rs).
//!
//! The rule: while a slot is tracked, every region a write marks gets its re-add bit in the
//! same bitmap write as its write-intent bit (durable on the members before the write), the
//! regions marked when the member left are taken in at that moment, and no write-intent bit is
//! cleared before the re-add bits are durable. A region with neither bit set has had no write
//! since the member left, and no write was in flight or unflushed there when it left: the
//! member's blocks there are the array's. A member is re-added only when it is the device the
//! slot recorded (member uuid) at the superblock generation the array recorded for it when it
//! left (or one ahead: the superblock `fail` writes onto the leaving device). A write-intent bit
//! is cleared only after a superblock update that began after the region's last write
//! (bitmap.rs), so an image of the member taken before any write whose bit is gone is at least
//! one generation behind: an older copy of it, another device, or a slot whose tracking was
//! never started is rebuilt in full.

use serde::{Deserialize, Serialize};

use super::Array;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Extension, Superblock};

/// Incompatible feature bit: the members carry a re-add map after the data map (an older
/// raidctl would write without setting its bits, and a re-add would then skip what it wrote).
pub const FEATURE_READD_MAP: u64 = crate::format::feature::READD_MAP;
/// Extension record tag of the re-add map (where it lies, and the slots tracked).
pub const READD_TAG: u32 = crate::format::feature::TAG_READD_MAP;

/// The re-add map's record: its place on every member (right after the data map, with the
/// bitmap's size) and the members it keeps count for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaddRecord {
    pub offset: u64,
    pub bytes: u64,
    pub tracked: Vec<Tracked>,
}

/// A member that left its slot while the re-add map kept count of what it misses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    pub slot: u32,
    pub member_uuid: [u8; 16],
    /// Its superblock generation as the array recorded it when it left.
    pub generation: u64,
}

impl ReaddRecord {
    /// The record in `sb`, if any; a record that does not decode, or names a slot twice or
    /// one the layout lacks, is refused.
    pub fn parse(sb: &Superblock) -> Result<Option<ReaddRecord>> {
        let Some(e) = sb.extensions.iter().find(|e| e.tag == READD_TAG) else {
            return Ok(None);
        };
        let bad = |why: String| Error::new(ErrorKind::Corrupt, format!("re-add map record: {why}"));
        let rec: ReaddRecord =
            postcard::from_bytes(&e.data).map_err(|e| bad(format!("does not decode: {e}")))?;
        let members = sb.layout.members as u32;
        for (i, t) in rec.tracked.iter().enumerate() {
            if t.slot >= members {
                return Err(bad(format!(
                    "slot {} tracked, the layout has {members}",
                    t.slot
                )));
            }
            if rec.tracked[..i].iter().any(|u| u.slot == t.slot) {
                return Err(bad(format!("slot {} tracked twice", t.slot)));
            }
        }
        Ok(Some(rec))
    }

    pub fn to_extension(&self) -> Extension {
        Extension {
            tag: READD_TAG,
            data: postcard::to_stdvec(self).expect("re-add record encodes"),
        }
    }

    /// Writes the record into `sb` (replacing the one there).
    fn store(&self, sb: &mut Superblock) {
        match sb.extensions.iter_mut().find(|e| e.tag == READD_TAG) {
            Some(e) => *e = self.to_extension(),
            None => sb.extensions.push(self.to_extension()),
        }
    }
}

/// The record of `sb` (a validated superblock: it parses).
fn record(sb: &Superblock) -> Option<ReaddRecord> {
    ReaddRecord::parse(sb).ok().flatten()
}

impl Array {
    /// Slot `slot`'s member is leaving (failed now, or found absent at assembly): the re-add
    /// map starts keeping count of what it misses. Call before taking meta (the bitmap lock
    /// comes first), then [`Array::note_departure`] under meta.
    pub(crate) fn track_departure(&self, slot: usize) {
        if let Some(bm) = &self.bitmap {
            bm.track(slot, true);
        }
    }

    /// Records in `meta` that slot `slot`'s member left, with the generation the array last
    /// gave it, so that it can come back by re-add (the caller called
    /// [`Array::track_departure`] first: no bitmap lock is taken under meta). Nothing without a
    /// re-add map, for a slot
    /// tracked already (it left earlier; its first departure counts), or for a member the
    /// array has no generation for.
    pub(crate) fn note_departure(&self, meta: &mut Superblock, slot: usize) {
        let Some(mut rec) = record(meta) else { return };
        if rec.tracked.iter().any(|t| t.slot as usize == slot) {
            return;
        }
        let uuid = meta.slots[slot].member_uuid;
        let Some(generation) = meta
            .member_generations()
            .into_iter()
            .find(|(u, _)| *u == uuid)
            .map(|(_, g)| g)
        else {
            return;
        };
        rec.tracked.push(Tracked {
            slot: slot as u32,
            member_uuid: uuid,
            generation,
        });
        rec.store(meta);
    }

    /// Slot `slot` has a member in sync again (a rebuild or re-add completed, or a forced
    /// assembly took its member back): the re-add map stops counting for it. Call before
    /// taking meta, then [`Array::note_return`] under meta.
    pub(crate) fn untrack(&self, slot: usize) {
        if let Some(bm) = &self.bitmap {
            bm.track(slot, false);
        }
    }

    /// Drops slot `slot` from the record in `meta`.
    pub(crate) fn note_return(&self, meta: &mut Superblock, slot: usize) {
        if let Some(mut rec) = record(meta) {
            if rec.tracked.iter().any(|t| t.slot as usize == slot) {
                rec.tracked.retain(|t| t.slot as usize != slot);
                rec.store(meta);
            }
        }
    }

    /// The slots the record tracks (at open: the bitmap starts counting for them again).
    pub(crate) fn tracked_slots(&self) -> Vec<usize> {
        let meta = self.meta.lock().expect("meta lock");
        record(&meta)
            .map(|r| r.tracked.iter().map(|t| t.slot as usize).collect())
            .unwrap_or_default()
    }

    /// Whether `member` (with its superblock `found`) may come back to its slot by re-add:
    /// `Ok(slot)` when it is the member the slot recorded, at the generation recorded when it
    /// left (or one behind), the slot is tracked and has neither a member nor a target; else
    /// why not (it is then rebuilt in full).
    pub(crate) fn readd_slot(
        &self,
        found: &crate::format::LoadedSuperblock,
    ) -> std::result::Result<usize, String> {
        let sb = &found.sb;
        let meta = self.meta.lock().expect("meta lock");
        if sb.array_uuid != meta.array_uuid {
            return Err("it is not a member of this array".into());
        }
        let Some(rec) = record(&meta) else {
            return Err("the array has no re-add map (created before it)".into());
        };
        let Some(t) = rec.tracked.iter().find(|t| t.member_uuid == sb.member_uuid) else {
            return Err("the array kept no count of what it missed".into());
        };
        let slot = t.slot as usize;
        if sb.slot as usize != slot || meta.slots[slot].member_uuid != t.member_uuid {
            return Err(format!("slot {slot} no longer records it"));
        }
        // Exactly the generation it had when it left, or one ahead: the superblock `fail`
        // writes onto the leaving device after the record was made (it says itself faulty
        // there). Not one behind (an update a crash cut short, which assembly forgives): every
        // write-intent bit is cleared only after a superblock update that followed its writes,
        // so an image of the member taken before a write whose bit is gone is at least one
        // generation behind (an outside attack re-added such a copy).
        if found.generation < t.generation {
            return Err(format!(
                "it is at superblock generation {}, the array recorded {} when it left: an older copy, or it missed the last update",
                found.generation, t.generation
            ));
        }
        if found.generation > t.generation + 1 {
            return Err(format!(
                "it is at superblock generation {}, past the {} the array recorded when it left: it was written since (a rebuild onto it, another array)",
                found.generation, t.generation
            ));
        }
        drop(meta);
        let s = &self.slots[slot];
        if s.usable().is_some() || s.target().is_some() {
            return Err(format!("slot {slot} is in use"));
        }
        if !self.bitmap.as_ref().is_some_and(|b| b.tracked(slot)) {
            return Err("the array kept no count of what it missed".into());
        }
        Ok(slot)
    }
}

impl Array {
    /// `add` of `member`: when it is the slot's own member come back and the re-add map vouches
    /// for it ([`Array::readd_slot`]), it becomes its slot's target as it is (its data,
    /// checksum area, wear counters and member uuid kept; its journal emptied), and the rebuild
    /// copies only what it missed. `None` when it is not (it joins as a new device); a member
    /// of this array refused says why in a `re-add-refused` event.
    pub(crate) fn readd(
        &self,
        member: &std::sync::Arc<dyn crate::device::Member>,
        path: &std::path::Path,
        endurance: Option<u64>,
    ) -> Result<Option<usize>> {
        let found = match crate::format::probe(member.as_ref()) {
            Ok(crate::format::Probe::Valid(l)) => l,
            _ => return Ok(None),
        };
        let slot = match self.readd_slot(&found) {
            Ok(s) => s,
            Err(why) => {
                if found.sb.array_uuid == self.meta.lock().expect("meta lock").array_uuid {
                    self.event(
                        "re-add-refused",
                        None,
                        format!("{}: {why}; it is rebuilt in full", path.display()),
                    );
                }
                return Ok(None);
            }
        };
        if member.len() < self.meta.lock().expect("meta lock").data_end() {
            return Ok(None);
        }
        if let Some(g) = self.journal {
            // An entry it kept from before it left must never be replayed.
            member
                .write_zeroes(g.offset, 4096)
                .and_then(|()| member.flush())
                .map_err(|e| e.context(format!("clearing the journal of {}", path.display())))?;
        }
        let mut wear = found.sb.wear.clone();
        if endurance.is_some() {
            wear.endurance_bytes = endurance;
        }
        let hint = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dev = std::sync::Arc::new(super::Dev::new(
            member.clone(),
            hint,
            found.sb.member_uuid,
            wear,
            (found.generation, found.copy),
        ));
        // Worth it only when it keeps more data than it has to give zero entries (regions
        // trimmed whole while it was away, or every region when the map could not be read):
        // a new device gets its whole checksum area zeroed at once and empty regions as holes.
        // (A damaged page of its checksum table is repaired as on any member: scrub.)
        if let Some(bm) = &self.bitmap {
            let (zeroed, kept) = bm.readd_counts();
            if self.csum_geo.is_some() && zeroed > kept {
                self.event(
                    "re-add-refused",
                    Some(slot),
                    format!(
                        "{}: {zeroed} regions it may miss hold no data now, more than the {kept} it would keep; it is rebuilt in full",
                        path.display()
                    ),
                );
                return Ok(None);
            }
        }
        {
            let mut meta = self.meta.lock().expect("meta lock");
            meta.events += 1;
            meta.slots[slot] = crate::format::SlotInfo {
                member_uuid: dev.uuid,
                state: crate::format::SlotState::Rebuilding { checkpoint_row: 0 },
                path_hint: dev.path.display().to_string(),
            };
        }
        *self.slots[slot].target.write().expect("slot lock") =
            Some(std::sync::Arc::new(super::Target {
                dev,
                kind: super::TargetKind::Rebuild,
                checkpoint: std::sync::atomic::AtomicU64::new(0),
                durable: std::sync::atomic::AtomicU64::new(0),
                readd: true,
            }));
        let missed = self.readd_missed_rows();
        self.event(
            "member-re-added",
            Some(slot),
            format!(
                "{} returns to slot {slot}: {missed} of {} rows changed since it left and are copied",
                path.display(),
                self.data_rows
            ),
        );
        self.bitmap_rewrite()?;
        self.persist()?;
        Ok(Some(slot))
    }

    /// Rows a re-added member may miss (regions with a re-add or write-intent bit set).
    pub(crate) fn readd_missed_rows(&self) -> u64 {
        let mut row = 0;
        let mut missed = 0;
        while row < self.data_rows {
            let held = self.held_rows_from(row, self.data_rows - row);
            if held > row {
                row = held;
                continue;
            }
            let per = self.bitmap_region_rows().unwrap_or(self.data_rows);
            let end = ((row / per + 1) * per).min(self.data_rows);
            missed += end - row;
            row = end;
        }
        missed
    }

    /// True when slot `slot` is being re-added (its own member is the target).
    pub fn slot_readding(&self, slot: usize) -> bool {
        self.slots[slot].target().is_some_and(|t| t.readd)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use crate::array::{Array, AssembleOptions, CreateSpec};
    use crate::device::Member;
    use crate::jobs::{rebuild, scrub};
    use crate::layout::{LayoutParams, Level};
    use crate::rng::SplitMix64;
    use crate::sim::member::{SimMember, Store};

    const MEMBER: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// Four sparse 1 GiB members (16 bitmap regions of 64 MiB each), RAID5, 64 KiB chunks.
    fn setup(checksums: bool) -> (Store, Vec<Arc<SimMember>>, Array) {
        setup_level(Level::Raid5, checksums)
    }

    fn setup_level(level: Level, checksums: bool) -> (Store, Vec<Arc<SimMember>>, Array) {
        let power = Arc::new(AtomicBool::new(true));
        let store = Store::default();
        let sims: Vec<Arc<SimMember>> = (0..4)
            .map(|i| {
                let p = format!("/d/m{i}");
                let m = Arc::new(SimMember::new(
                    &p,
                    crate::sim::member::Image::zeroed(MEMBER),
                    power.clone(),
                ));
                store.insert(Path::new(&p), m.clone());
                m
            })
            .collect();
        let spec = CreateSpec {
            name: "t".into(),
            layout: LayoutParams::with_defaults(level, 4, 64 << 10),
            overprovision_pct: 0.0,
            endurance_bytes: vec![],
            history_interval: crate::format::DEFAULT_HISTORY_INTERVAL,
            checksums: checksums.then_some(crate::array::csum::CsumAlgo::default()),
            bitmap_chunk: None,
        };
        let members = sims
            .iter()
            .enumerate()
            .map(|(i, m)| {
                (
                    PathBuf::from(format!("/d/m{i}")),
                    m.clone() as Arc<dyn Member>,
                )
            })
            .collect();
        let a = Array::create_on(members, &spec, &mut |_, _| {}).unwrap();
        (store, sims, a)
    }

    /// 1 MiB of `fill` at array offset `off`.
    fn put(a: &Array, off: u64, fill: u8) {
        a.write(&vec![fill; MIB as usize], off).unwrap();
    }

    fn check(a: &Array, off: u64, fill: u8) {
        let mut got = vec![0u8; MIB as usize];
        a.read(&mut got, off).unwrap();
        assert!(
            got.iter().all(|&b| b == fill),
            "array offset {off}: {:#04x}, want {fill:#04x}",
            got[0]
        );
    }

    /// Flushes, then lets the write-intent bits clear (a superblock update after the writes
    /// first).
    fn settle(a: &Array) {
        a.flush().unwrap();
        a.persist().unwrap();
        a.bitmap_clear(crate::clock::Instant::now(), true).unwrap();
    }

    fn rebuild_all(a: &Array) -> Vec<rebuild::PassReport> {
        rebuild::run(a, &Default::default(), &mut |_, _, _| {}).unwrap()
    }

    /// Every MiB written reads back, a scrub finds nothing, and so with each other member
    /// failed in turn (the re-added member's blocks then feed every reconstruction; read-only
    /// opens, so the failures stay in memory).
    fn verify_everywhere(store: &Store, written: &[(u64, u8)]) {
        let open = |writable| {
            Array::open_from(
                store,
                Path::new("/d/m1"),
                &AssembleOptions {
                    writable,
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let b = open(true);
        let rows = std::iter::once(0..b.rows()).collect::<Vec<_>>();
        let rep = scrub::run(
            &b,
            &rows,
            scrub::Mode::Scrub { repair: false },
            None,
            &mut |_, _| {},
        )
        .unwrap();
        assert!(rep.problems.is_empty(), "scrub: {:?}", rep.problems);
        for &(off, fill) in written {
            check(&b, off, fill);
        }
        b.close().unwrap();
        for gone in [0usize, 2, 3] {
            let b = open(false);
            b.fail_member(gone, "test: read through the others")
                .unwrap();
            for &(off, fill) in written {
                check(&b, off, fill);
            }
        }
    }

    /// Issue 29, item 3: a member failed for a moment was rebuilt in full. Now it comes back
    /// by re-add and only the regions written since it left are copied (two of sixteen here,
    /// their write-intent bits cleared meanwhile), the rest kept, and every byte reads right
    /// through the member afterwards.
    #[test]
    fn a_member_failed_for_a_moment_is_re_added_copying_only_the_regions_written_since() {
        let (store, _sims, a) = setup(true);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        let mut written: Vec<(u64, u8)> = (0..12).map(|r| (r * region, 0x10 + r as u8)).collect();
        for &(off, fill) in &written {
            put(&a, off, fill);
        }
        // A superblock update after the writes lets their bits clear.
        settle(&a);
        a.fail_member(1, "test: pulled").unwrap();
        // Written while it is out: regions 3 and 7 change.
        for (i, r) in [3u64, 7].into_iter().enumerate() {
            written[r as usize] = (r * region, 0xa0 + i as u8);
            put(&a, r * region, 0xa0 + i as u8);
        }
        // Their write-intent bits clear while it is out: the re-add map must still hold them.
        settle(&a);
        assert!(a.dirty_rows().is_empty());
        let path = PathBuf::from("/d/m1");
        let m = a.take_failed(&path).expect("the failed member");
        a.add(m, &path, None).unwrap();
        assert!(a.slot_readding(1), "slot 1 is re-added, not rebuilt");
        let reps = rebuild_all(&a);
        let held: u64 = reps.iter().map(|r| r.held_rows).sum();
        let bytes: u64 = reps.iter().map(|r| r.bytes_written).sum();
        let per = a.bitmap_region_rows().unwrap();
        assert_eq!(
            held,
            a.rows() - 2 * per,
            "all but the two regions written are kept"
        );
        assert!(
            bytes <= 2 * per * (64 << 10),
            "{bytes} bytes written to the re-added member, two regions hold {}",
            2 * per * (64 << 10)
        );
        assert!(a.slot_usable(1));
        a.close().unwrap();
        verify_everywhere(&store, &written);
    }

    /// Found by a mutation run (`&` for `^` in `Bitmap::readd_counts` survived the seed set):
    /// a member away while a client discarded ten regions that hold no data (a file system's
    /// discard at mkfs: a trim while degraded unmaps nothing, but marks what it covers) would
    /// get zero entries for more regions than it keeps data in: it is rebuilt in full, never
    /// re-added, and every byte reads right.
    #[test]
    fn a_member_away_while_empty_regions_were_discarded_is_rebuilt_not_re_added() {
        let (store, _sims, a) = setup(true);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        let written: Vec<(u64, u8)> = (0..2).map(|r| (r * region, 0x10 + r as u8)).collect();
        for &(off, fill) in &written {
            put(&a, off, fill);
        }
        settle(&a);
        a.fail_member(1, "test: pulled").unwrap();
        a.trim(4 * region, 10 * region).unwrap();
        settle(&a);
        let path = PathBuf::from("/d/m1");
        let m = a.take_failed(&path).expect("the failed member");
        a.add(m, &path, None).unwrap();
        assert!(
            !a.slot_readding(1),
            "10 empty regions to zero against 2 kept: rebuilt in full"
        );
        rebuild_all(&a);
        assert!(a.slot_usable(1));
        a.close().unwrap();
        verify_everywhere(&store, &written);
    }

    /// The same for a member absent when the array was assembled (a cable, a late disk): the
    /// regions written while it was away are copied, nothing else.
    #[test]
    fn a_member_absent_at_assembly_is_re_added_copying_only_the_regions_written_since() {
        let (store, sims, a) = setup(false);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        let mut written: Vec<(u64, u8)> = (0..12).map(|r| (r * region, 0x10 + r as u8)).collect();
        for &(off, fill) in &written {
            put(&a, off, fill);
        }
        a.close().unwrap();
        // Assembled without m1.
        let without = Store::default();
        for i in [0usize, 2, 3] {
            without.insert(Path::new(&format!("/d/m{i}")), sims[i].clone());
        }
        let opts = AssembleOptions {
            writable: true,
            ..Default::default()
        };
        let b = Array::open_from(&without, Path::new("/d/m0"), &opts).unwrap();
        assert!(!b.slot_usable(1));
        written[5] = (5 * region, 0xee);
        put(&b, 5 * region, 0xee);
        b.close().unwrap();
        // Back with every member: m1 is stale, and re-added.
        let c = Array::open_from(&store, Path::new("/d/m0"), &opts).unwrap();
        assert!(!c.slot_usable(1), "m1 is stale");
        let path = PathBuf::from("/d/m1");
        let m = c.take_failed(&path).expect("the stale member");
        c.add(m, &path, None).unwrap();
        assert!(c.slot_readding(1));
        let reps = rebuild_all(&c);
        let per = c.bitmap_region_rows().unwrap();
        assert_eq!(
            reps.iter().map(|r| r.held_rows).sum::<u64>(),
            c.rows() - per,
            "one region copied"
        );
        c.close().unwrap();
        verify_everywhere(&store, &written);
    }

    /// An older copy of the member (an image taken before later writes reached it) carries its
    /// uuid but not its generation: it is rebuilt in full, never re-added.
    #[test]
    fn an_older_copy_of_a_member_is_rebuilt_in_full_never_re_added() {
        let (store, sims, a) = setup(true);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        put(&a, 0, 0x11);
        a.flush().unwrap();
        let old = Arc::new(SimMember::new(
            "/d/old",
            sims[1].crash_image(&mut SplitMix64(1), 100),
            Arc::new(AtomicBool::new(true)),
        ));
        // Later writes reach m1, their bits clear, and a superblock update follows.
        put(&a, 2 * region, 0x22);
        a.flush().unwrap();
        a.bitmap_clear(crate::clock::Instant::now(), true).unwrap();
        for _ in 0..2 {
            a.set_endurance(&crate::array::MemberRef::parse("/d/m0"), 1 << 40)
                .unwrap();
        }
        a.fail_member(1, "test: pulled").unwrap();
        let path = PathBuf::from("/d/old");
        store.insert(&path, old.clone());
        a.add(old, &path, None).unwrap();
        assert!(!a.slot_readding(1), "an older copy must not be re-added");
        let reps = rebuild_all(&a);
        assert_eq!(reps.iter().map(|r| r.held_rows).sum::<u64>(), 0);
        check(&a, 2 * region, 0x22);
        a.fail_member(0, "test").unwrap();
        check(&a, 2 * region, 0x22);
        check(&a, 0, 0x11);
    }

    /// A RAID6 with two members out: one comes back, one is replaced by a new device. The
    /// rebuild ran both in one pass, which skips rows only when every target holds them: the
    /// member that came back was rewritten in full (and, with checksums, got a zero entry for
    /// every empty block: a 1 TiB simulator seed took 74 s). Re-added members now go in a pass
    /// of their own.
    #[test]
    fn a_member_re_added_beside_a_new_device_copies_only_what_it_missed() {
        let (_store, _sims, a) = setup_level(Level::Raid6, true);
        let region = a.bitmap_region_rows().unwrap() * 2 * (64 << 10);
        for r in 0..6u64 {
            put(&a, r * region, 0x30 + r as u8);
        }
        a.flush().unwrap();
        a.persist().unwrap();
        a.bitmap_clear(crate::clock::Instant::now(), true).unwrap();
        a.fail_member(1, "test: pulled").unwrap();
        a.fail_member(2, "test: dead").unwrap();
        put(&a, 4 * region, 0xee);
        a.flush().unwrap();
        let p1 = PathBuf::from("/d/m1");
        let m1 = a.take_failed(&p1).expect("m1");
        a.add(m1, &p1, None).unwrap();
        let fresh = Arc::new(SimMember::new(
            "/d/new",
            crate::sim::member::Image::zeroed(MEMBER),
            Arc::new(AtomicBool::new(true)),
        ));
        a.add(fresh, Path::new("/d/new"), None).unwrap();
        assert!(a.slot_readding(1) && !a.slot_readding(2));
        let reps = rebuild_all(&a);
        let per = a.bitmap_region_rows().unwrap();
        let held: u64 = reps.iter().map(|r| r.held_rows).sum();
        assert_eq!(
            held,
            a.rows() - per,
            "slot 1 copies only the region written: {reps:?}"
        );
        a.fail_member(0, "test").unwrap();
        a.fail_member(3, "test").unwrap();
        for r in 0..6u64 {
            check(&a, r * region, if r == 4 { 0xee } else { 0x30 + r as u8 });
        }
    }

    /// An image of member `i` as it is now (what `cp` of its device gives).
    fn image(sims: &[Arc<SimMember>], i: usize) -> Arc<SimMember> {
        Arc::new(SimMember::new(
            "/d/img",
            sims[i].crash_image(&mut SplitMix64(1), 100),
            Arc::new(AtomicBool::new(true)),
        ))
    }

    /// Overwrites 1 MiB at `off` with 0x22, lets its write-intent bit clear if it may, pulls
    /// member 1 and adds `old` (an image of it) in its place.
    fn return_image(a: &Array, old: Arc<SimMember>, off: u64) {
        put(a, off, 0x22);
        a.flush().unwrap();
        a.bitmap_clear(crate::clock::Instant::now(), true).unwrap();
        a.fail_member(1, "test: pulled").unwrap();
        a.add(old, Path::new("/d/img"), None).unwrap();
    }

    /// Outside attack: an image of a member taken while the array was stopped, one superblock
    /// generation behind when the member left (one session's dirty mark), was re-added as the
    /// member: the write of that session had its bit cleared after 5 s idle, nothing copied
    /// it, and reads returned the old data with exit 0. Now an image behind the recorded
    /// generation is rebuilt in full.
    #[test]
    fn an_image_one_generation_behind_is_rebuilt_in_full_never_re_added() {
        let (_store, sims, a) = setup(true);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        put(&a, 2 * region, 0x11);
        a.flush().unwrap();
        a.mark_clean().unwrap();
        let old = image(&sims, 1);
        // One session: the first write marks the array dirty (a generation), then the write.
        return_image(&a, old, 2 * region);
        assert!(
            !a.slot_readding(1),
            "an image one generation behind was re-added"
        );
        rebuild_all(&a);
        a.fail_member(0, "test: read through the rebuilt member")
            .unwrap();
        check(&a, 2 * region, 0x22);
    }

    /// The same attack at the same generation: an image taken after the last superblock
    /// update, then a write, then its region idle and flushed. Its write-intent bit used to
    /// clear (nothing else bumped the generation), and the image, at the generation the array
    /// recorded, was re-added without it. A bit now clears only after a superblock update that
    /// began after the region's last write: here it stays set, and the re-add copies the region.
    #[test]
    fn a_write_after_an_image_at_the_same_generation_is_copied_on_re_add() {
        let (_store, sims, a) = setup(true);
        let region = a.bitmap_region_rows().unwrap() * 3 * (64 << 10);
        put(&a, 2 * region, 0x11);
        a.flush().unwrap();
        a.set_endurance(&crate::array::MemberRef::parse("/d/m0"), 1 << 40)
            .unwrap();
        let old = image(&sims, 1);
        return_image(&a, old, 2 * region);
        assert!(
            a.slot_readding(1),
            "the image is at the recorded generation"
        );
        let reps = rebuild_all(&a);
        assert!(
            reps.iter().map(|r| r.held_rows).sum::<u64>() < a.rows(),
            "the region written after the image is copied"
        );
        a.fail_member(0, "test: read through the re-added member")
            .unwrap();
        check(&a, 2 * region, 0x22);
    }

    /// A forged re-add record is refused as corrupt, never trusted: without its bit, its bit
    /// without it, in the wrong place, or naming a slot the layout lacks or twice.
    #[test]
    fn forged_re_add_records_are_refused() {
        use super::{ReaddRecord, Tracked, FEATURE_READD_MAP, READD_TAG};
        let (_, _, a) = setup(false);
        let sb = a.superblock();
        assert!(sb.validate().is_ok());
        let refused = |sb: &crate::format::Superblock, why: &str| {
            let e = sb.validate().expect_err(why).to_string();
            assert!(e.contains(why), "{e}");
        };
        let mut no_bit = sb.clone();
        no_bit.incompat_features &= !FEATURE_READD_MAP;
        refused(&no_bit, "without incompat bit");
        let mut no_rec = sb.clone();
        no_rec.extensions.retain(|e| e.tag != READD_TAG);
        refused(&no_rec, "no re-add map record");
        let rec = ReaddRecord::parse(&sb).unwrap().unwrap();
        let with = |r: ReaddRecord| {
            let mut x = sb.clone();
            r.store(&mut x);
            x
        };
        refused(
            &with(ReaddRecord {
                offset: rec.offset + 4096,
                ..rec.clone()
            }),
            "right after the data map",
        );
        let t = Tracked {
            slot: 4,
            member_uuid: [1; 16],
            generation: 3,
        };
        refused(
            &with(ReaddRecord {
                tracked: vec![t],
                ..rec.clone()
            }),
            "slot 4 tracked, the layout has 4",
        );
        let t0 = Tracked { slot: 1, ..t };
        refused(
            &with(ReaddRecord {
                tracked: vec![t0, t0],
                ..rec.clone()
            }),
            "slot 1 tracked twice",
        );
        let mut garbage = sb.clone();
        for e in garbage.extensions.iter_mut() {
            if e.tag == READD_TAG {
                e.data = vec![0xff; 3];
            }
        }
        refused(&garbage, "does not decode");
    }
}
