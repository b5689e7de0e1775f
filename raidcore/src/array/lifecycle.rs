//! Member lifecycle on an assembled array: fail, remove, add (rebuild target or hot spare),
//! replace, spare promotion, completion of rebuild and replace targets, and the age-driven
//! parity reshuffle of skewed arrays (the parity-heavy role moves to the most-worn survivor).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Array, Dev, Target, TargetKind};
use crate::device::Member;
use crate::error::Result;
use crate::format::{self, Probe, SlotInfo, SlotState, WearRecord};
use crate::layout::Level;

/// How a command names a member: by path or by slot number.
#[derive(Clone, Debug)]
pub enum MemberRef {
    Path(PathBuf),
    Slot(usize),
}

impl std::fmt::Display for MemberRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberRef::Path(p) => write!(f, "{}", p.display()),
            MemberRef::Slot(n) => write!(f, "slot {n}"),
        }
    }
}

impl MemberRef {
    /// A member as the control protocol names it: digits are a slot, anything else a path
    /// (absolute: the client resolved it). Never looked up in the daemon's directory.
    pub fn parse_resolved(s: &str) -> MemberRef {
        match s.parse::<usize>() {
            Ok(n) => MemberRef::Slot(n),
            Err(_) => MemberRef::Path(PathBuf::from(s)),
        }
    }

    /// "3" is a slot, anything else a path.
    pub fn parse(s: &str) -> MemberRef {
        match s.parse::<usize>() {
            Ok(n) if !Path::new(s).exists() => MemberRef::Slot(n),
            _ => MemberRef::Path(PathBuf::from(s)),
        }
    }
}

/// A change of roles the array made, for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleChange {
    pub heavy_from_slot: usize,
    pub heavy_to_slot: usize,
    pub description: String,
}

/// Where a member reference points.
enum Found {
    Slot(usize),
    Target(usize),
    Spare(usize),
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => {
            if x.file_type().is_block_device() || y.file_type().is_block_device() {
                x.rdev() == y.rdev()
                    && x.file_type().is_block_device()
                    && y.file_type().is_block_device()
            } else {
                x.dev() == y.dev() && x.ino() == y.ino()
            }
        }
        _ => a == b,
    }
}

impl Array {
    fn find(&self, m: &MemberRef) -> Result<Found> {
        match m {
            MemberRef::Slot(i) if *i < self.slots.len() => Ok(Found::Slot(*i)),
            MemberRef::Slot(i) => bail!(
                InvalidInput,
                "slot {i} does not exist (the array has {} slots)",
                self.slots.len()
            ),
            MemberRef::Path(p) => {
                for (i, s) in self.slots.iter().enumerate() {
                    if s.dev
                        .read()
                        .expect("slot lock")
                        .as_ref()
                        .is_some_and(|d| same_file(&d.path, p))
                    {
                        return Ok(Found::Slot(i));
                    }
                    if s.target().is_some_and(|t| same_file(&t.dev.path, p)) {
                        return Ok(Found::Target(i));
                    }
                }
                if let Some(j) = self
                    .spares
                    .lock()
                    .expect("spares lock")
                    .iter()
                    .position(|d| same_file(&d.path, p))
                {
                    return Ok(Found::Spare(j));
                }
                bail!(
                    InvalidInput,
                    "{} is not a member of array \"{}\"",
                    p.display(),
                    self.meta.lock().expect("meta lock").name
                )
            }
        }
    }

    /// Writes a superblock onto a device that leaves the array, recording itself as faulty, so
    /// that on its own it is refused and `add` can take it back later.
    fn release(&self, dev: &Dev, slot: usize) {
        let mut sb = self.meta.lock().expect("meta lock").clone();
        sb.slots.truncate(self.slots.len());
        sb.slots[slot] = SlotInfo {
            member_uuid: dev.uuid,
            state: SlotState::Faulty,
            path_hint: dev.path.display().to_string(),
        };
        sb.slot = slot as u32;
        sb.member_uuid = dev.uuid;
        sb.wear = dev.wear();
        let mut st = dev.sb_state.lock().expect("sb lock");
        // Best effort: the device may be the reason it leaves.
        let _ = format::write_next(dev.member.as_ref(), &sb, &mut st);
    }

    /// The device a member reference names (a slot's member, a target, a spare).
    fn dev_of(&self, m: &MemberRef) -> Result<Arc<Dev>> {
        let d = match self.find(m)? {
            Found::Slot(i) => self.slots[i].dev.read().expect("slot lock").clone(),
            Found::Target(i) => self.slots[i].target().map(|t| t.dev.clone()),
            Found::Spare(j) => self.spares.lock().expect("spares lock").get(j).cloned(),
        };
        d.ok_or_else(|| {
            crate::Error::new(
                crate::ErrorKind::InvalidInput,
                format!("{m} has no device in the array now"),
            )
        })
    }

    /// Resets the read, write and checksum error counters of one member, or of every member
    /// (`zpool clear`): after the cause was dealt with, new errors stand out again. The bad
    /// blocks stay listed (their contents are still lost). Returns the counters cleared as
    /// (read, write, checksum) sums; persisted.
    pub fn clear_errors(&self, m: Option<&MemberRef>) -> Result<(u64, u64, u64)> {
        let devs = match m {
            Some(m) => vec![self.dev_of(m)?],
            None => self.live_devs(),
        };
        let mut sum = (0, 0, 0);
        for d in devs {
            sum.0 += d.read_errors.swap(0, Ordering::Relaxed);
            d.read_errors_open.store(0, Ordering::Relaxed);
            sum.1 += d.write_errors.swap(0, Ordering::Relaxed);
            sum.2 += d.csum_errors.swap(0, Ordering::Relaxed);
        }
        self.meta.lock().expect("meta lock").events += 1;
        self.persist()?;
        Ok(sum)
    }

    /// Sets a member's rated endurance (bytes written over its life), as `add --endurance`
    /// would have; persisted in its superblock.
    pub fn set_endurance(&self, m: &MemberRef, bytes: u64) -> Result<()> {
        let d = self.dev_of(m)?;
        d.wear_base.lock().expect("wear lock").endurance_bytes = Some(bytes);
        self.meta.lock().expect("meta lock").events += 1;
        self.persist()
    }

    /// Marks a member faulty by request. Refused when the array would not survive it.
    pub fn fail(&self, m: &MemberRef) -> Result<usize> {
        match self.find(m)? {
            Found::Slot(i) => {
                if self.slots[i].usable().is_none() {
                    bail!(InvalidInput, "slot {i} is already unavailable");
                }
                let mut lost = self.lost();
                lost[i] = true;
                if !self.layout.survives(&lost) {
                    bail!(
                        InvalidInput,
                        "failing slot {i} would fail the array: {} tolerates {} unavailable members",
                        self.layout.level().name(),
                        self.layout.tolerance()
                    );
                }
                let dev = self.slots[i]
                    .dev
                    .read()
                    .expect("slot lock")
                    .clone()
                    .expect("usable");
                self.fail_member(i, "failed by request")?;
                self.release(&dev, i);
                Ok(i)
            }
            Found::Target(i) => {
                self.fail_target(i, "failed by request")?;
                Ok(i)
            }
            Found::Spare(j) => {
                let d = self.spares.lock().expect("spares lock").remove(j);
                self.drop_entry(&d.uuid);
                self.wipe(&d);
                self.persist()?;
                Ok(usize::MAX)
            }
        }
    }

    fn drop_entry(&self, uuid: &[u8; 16]) {
        let mut meta = self.meta.lock().expect("meta lock");
        meta.retain_extras(|e| e.member_uuid != *uuid);
        meta.events += 1;
    }

    /// Zeroes both superblock copies of a device leaving as a spare (it held no data).
    fn wipe(&self, d: &Dev) {
        let zeros = crate::buf::AlignedBuf::zeroed(2 * format::SB_SIZE);
        let _ = d
            .member
            .write_at(&zeros, format::SB_A_OFFSET)
            .and_then(|_| d.member.flush());
    }

    /// Drops a faulty, missing or spare member (or a rebuild/replace target) from the array.
    pub fn remove(&self, m: &MemberRef) -> Result<()> {
        match self.find(m)? {
            Found::Slot(i) => {
                let s = &self.slots[i];
                if s.usable().is_some() {
                    bail!(
                        InvalidInput,
                        "slot {i} is active: fail it first (raidctl fail)"
                    );
                }
                if s.target().is_some() {
                    bail!(
                        InvalidInput,
                        "slot {i} is being rebuilt; remove its rebuild target instead"
                    );
                }
                let old = s.dev.write().expect("slot lock").take();
                {
                    let mut meta = self.meta.lock().expect("meta lock");
                    meta.slots[i] = SlotInfo {
                        member_uuid: [0; 16],
                        state: SlotState::Faulty,
                        path_hint: String::new(),
                    };
                    meta.events += 1;
                }
                s.set_reason(Some("removed".into()));
                // The members that stay learn of it first: a crash between the two writes must
                // not leave the leaving member with the newest superblock (it would be the
                // authority at assembly, and it lists itself out).
                self.persist()?;
                if let Some(d) = old {
                    self.release(&d, i);
                }
                Ok(())
            }
            Found::Target(i) => self.fail_target(i, "removed by request"),
            Found::Spare(j) => {
                let d = self.spares.lock().expect("spares lock").remove(j);
                self.drop_entry(&d.uuid);
                self.wipe(&d);
                self.persist()
            }
        }
    }

    /// The slot holding the most parity in a skewed array (a unique largest weight), if any.
    pub fn heavy_slot(&self) -> Option<usize> {
        if self.layout.level() != Level::F1 {
            return None;
        }
        let w = self.layout.weights();
        let max = *w.iter().max()?;
        (w.iter().filter(|&&x| x == max).count() == 1 && w.iter().any(|&x| x < max))
            .then(|| w.iter().position(|&x| x == max).expect("max exists"))
    }

    /// The usable slot (other than `except`, without a target) whose member is the most worn:
    /// by SMART percent used when every candidate has a recorded SMART sample, else by bytes the
    /// array wrote to it. Returns the slot and the bytes written.
    fn most_worn(&self, except: usize) -> Option<(usize, u64)> {
        let cands: Vec<(usize, WearRecord)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(i, s)| *i != except && s.target().is_none())
            .filter_map(|(i, s)| s.usable().map(|d| (i, d.wear())))
            .collect();
        let smart = |w: &WearRecord| w.history.iter().rev().find_map(|h| h.smart_used_pct);
        if !cands.is_empty() && cands.iter().all(|(_, w)| smart(w).is_some()) {
            return cands
                .iter()
                .max_by(|a, b| {
                    smart(&a.1)
                        .partial_cmp(&smart(&b.1))
                        .unwrap_or(std::cmp::Ordering::Equal)
                        .then(b.0.cmp(&a.0))
                })
                .map(|(i, w)| (*i, w.total()));
        }
        cands
            .iter()
            .map(|(i, w)| (*i, w.total()))
            .max_by_key(|&(i, w)| (w, std::cmp::Reverse(i)))
    }

    /// Prepares a device that joins the array: checks its size and continues its superblock
    /// generations so the new identity always wins over anything it held before.
    fn join(
        &self,
        member: Arc<dyn Member>,
        path: &Path,
        endurance: Option<u64>,
    ) -> Result<Arc<Dev>> {
        let need = self.meta.lock().expect("meta lock").data_end();
        if member.len() < need {
            bail!(
                InvalidInput,
                "{} has {} bytes; the array needs {need} per member",
                path.display(),
                member.len()
            );
        }
        let state = match format::probe(member.as_ref())? {
            Probe::Valid(l) => (l.generation, l.copy),
            _ => (0, 1),
        };
        if let Some(g) = self.csum_geo {
            // A fresh checksum area: every entry is filled in as the rebuild writes its rows.
            member.write_zeroes(g.offset, g.bytes()).map_err(|e| {
                e.context(format!("clearing the checksum area of {}", path.display()))
            })?;
        }
        if let Some(g) = self.journal {
            // An empty journal: an entry the device kept from before (it failed in the middle of
            // a journaled write, or comes from another array) must never be replayed here.
            member
                .write_zeroes(g.offset, 4096)
                .and_then(|()| member.flush())
                .map_err(|e| e.context(format!("clearing the journal of {}", path.display())))?;
        }
        let wear = WearRecord {
            endurance_bytes: endurance,
            ..WearRecord::default()
        };
        let hint = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Arc::new(Dev::new(
            member,
            hint,
            *uuid::Uuid::new_v4().as_bytes(),
            wear,
            state,
        )))
    }

    /// Makes `dev` the rebuild target of slot `slot`, which has no usable member. The
    /// parity-heavy slot of a skewed array is rebuilt in place like any other: redundancy
    /// comes back in one pass. (Moving the role to the most-worn survivor first, as a replace
    /// does, would copy that survivor to `dev` and then rebuild the survivor: two passes with
    /// the array degraded throughout.) [`Array::heavy_role_note`] says where the role stays.
    fn assign(&self, slot: usize, dev: Arc<Dev>) {
        let mut meta = self.meta.lock().expect("meta lock");
        meta.events += 1;
        meta.slots[slot] = SlotInfo {
            member_uuid: dev.uuid,
            state: SlotState::Rebuilding { checkpoint_row: 0 },
            path_hint: dev.path.display().to_string(),
        };
        *self.slots[slot].target.write().expect("slot lock") =
            Some(new_target(dev, TargetKind::Rebuild));
    }

    /// For a rebuild of the parity-heavy slot of a skewed array while another member has
    /// worn more: the role stays in the slot (on the new device), and how to move it.
    pub fn heavy_role_note(&self, slot: usize) -> Option<String> {
        if self.heavy_slot() != Some(slot) {
            return None;
        }
        let (s, worn) = self.most_worn(slot)?;
        Some(format!(
            "slot {slot} is the parity-heavy slot: it is rebuilt first, so redundancy returns in one pass, and the role stays on the new device; the most-worn member is slot {s} ({worn} bytes written by the array): `raidctl replace` of slot {slot} onto another device moves the role there with redundancy kept"
        ))
    }

    /// Adds a device: it becomes the rebuild target of a slot without a usable member, or a hot
    /// spare. Returns the slot it will fill (None for a spare).
    pub fn add(
        &self,
        member: Arc<dyn Member>,
        path: &Path,
        endurance: Option<u64>,
    ) -> Result<Option<usize>> {
        if !self.writable {
            bail!(InvalidInput, "array is open read-only");
        }
        if let Some(slot) = self.readd(&member, path, endurance)? {
            return Ok(Some(slot));
        }
        let dev = self.join(member, path, endurance)?;
        let free = (0..self.slots.len())
            .find(|&i| self.slots[i].usable().is_none() && self.slots[i].target().is_none());
        let result = match free {
            Some(i) => {
                self.assign(i, dev);
                Some(i)
            }
            None => {
                {
                    let mut meta = self.meta.lock().expect("meta lock");
                    meta.slots.push(SlotInfo {
                        member_uuid: dev.uuid,
                        state: SlotState::Spare,
                        path_hint: dev.path.display().to_string(),
                    });
                    meta.events += 1;
                }
                self.spares.lock().expect("spares lock").push(dev);
                None
            }
        };
        self.bitmap_rewrite()?;
        self.persist()?;
        Ok(result)
    }

    /// Starts replacing a live member with a new device; the old member keeps serving until the
    /// copy is complete (redundancy is never reduced). Returns any role change.
    pub fn replace(
        &self,
        old: &MemberRef,
        member: Arc<dyn Member>,
        path: &Path,
        endurance: Option<u64>,
        keep_roles: bool,
    ) -> Result<Option<RoleChange>> {
        if !self.writable {
            bail!(InvalidInput, "array is open read-only");
        }
        let Found::Slot(h) = self.find(old)? else {
            bail!(InvalidInput, "only a slot's active member can be replaced");
        };
        if self.slots[h].usable().is_none() {
            bail!(
                InvalidInput,
                "slot {h} has no active member to copy from: use raidctl add to rebuild it"
            );
        }
        if self.slots[h].target().is_some() {
            bail!(
                InvalidInput,
                "slot {h} already has a rebuild or replace in progress"
            );
        }
        let dev = self.join(member, path, endurance)?;
        let reshuffle = if keep_roles || self.heavy_slot() != Some(h) {
            None
        } else {
            self.most_worn(h)
        };
        let (slot, old_to, change) = match reshuffle {
            Some((s, worn)) => (
                s,
                Some(h as u32),
                Some(RoleChange {
                    heavy_from_slot: h,
                    heavy_to_slot: s,
                    description: format!(
                        "the parity-heavy role moves to the most-worn member (slot {s}, {worn} bytes written by the array): the new device takes over slot {s}, then that member takes over slot {h}"
                    ),
                }),
            ),
            None => (h, None, None),
        };
        {
            let mut meta = self.meta.lock().expect("meta lock");
            meta.slots.push(SlotInfo {
                member_uuid: dev.uuid,
                state: SlotState::Replacing {
                    slot: slot as u32,
                    checkpoint_row: 0,
                    old_to_slot: old_to,
                },
                path_hint: dev.path.display().to_string(),
            });
            meta.events += 1;
        }
        *self.slots[slot].target.write().expect("slot lock") = Some(new_target(
            dev,
            TargetKind::Replace {
                old_to_slot: old_to,
            },
        ));
        self.bitmap_rewrite()?;
        self.persist()?;
        Ok(change)
    }

    /// Puts hot spares to work on slots without a usable member.
    pub fn promote_spares(&self) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        if !self.writable {
            return Ok(out);
        }
        for i in 0..self.slots.len() {
            if self.slots[i].usable().is_some() || self.slots[i].target().is_some() {
                continue;
            }
            let Some(dev) = self.spares.lock().expect("spares lock").pop() else {
                break;
            };
            {
                let mut meta = self.meta.lock().expect("meta lock");
                meta.retain_extras(|e| e.member_uuid != dev.uuid);
            }
            self.assign(i, dev);
            out.push(i);
        }
        if !out.is_empty() {
            self.persist()?;
        }
        Ok(out)
    }

    /// Slots with a rebuild or replace target, and whether it is a rebuild.
    pub fn pending_targets(&self) -> Vec<(usize, bool)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.target().map(|t| (i, t.kind == TargetKind::Rebuild)))
            .collect()
    }

    /// Makes a finished target the slot's member; for a replace, the old member leaves or moves
    /// on to the slot the reshuffle named.
    pub(crate) fn complete_target(&self, slot: usize) -> Result<()> {
        // Exclusive: no request runs while the slot's device and target change, so a write
        // reaches either the old member and the target (still below its checkpoint) or the
        // new member, never only the device that is leaving.
        let _cfg = self.config.write().unwrap_or_else(|e| e.into_inner());
        let s = &self.slots[slot];
        let Some(t) = s.target() else { return Ok(()) };
        // A target not yet in sync (a replace turned into a rebuild under the job's feet, at
        // checkpoint 0) is never promoted: it stays pending for the next pass.
        if t.checkpoint.load(Ordering::Acquire) < self.data_rows {
            return Ok(());
        }
        // A flush that ends on the target too, before the swap: the flushes before ended their
        // records on the member that leaves (or on none), so once the new member is the slot's
        // a crash would leave no proof that any of them returned, and every entry since the
        // last fold would count as unsettled (simulator seed 45006795: a power cut right after
        // a replace, with another slot lost, listed blocks no write had touched). A returned
        // flush settles every one before it. Made before the swap, so that a target failing
        // in it is dropped and the old member keeps the slot (an outside attack: made after,
        // the failure cost the replace's healthy old member).
        if self.csum_geo.is_some() && self.writable {
            self.sync_devices(false)?;
            if !s.target().is_some_and(|now| Arc::ptr_eq(&now, &t)) {
                return Ok(());
            }
        }
        // The slot is in sync again: the re-add map stops counting for it (before meta; any
        // failure from here on starts it again).
        self.untrack(slot);
        let old = match t.kind {
            TargetKind::Rebuild => None,
            TargetKind::Replace { old_to_slot } => {
                Some((s.dev.read().expect("slot lock").clone(), old_to_slot))
            }
        };
        {
            let mut meta = self.meta.lock().expect("meta lock");
            meta.retain_extras(|e| e.member_uuid != t.dev.uuid);
            self.note_return(&mut meta, slot);
            meta.slots[slot] = SlotInfo {
                member_uuid: t.dev.uuid,
                state: SlotState::Active,
                path_hint: t.dev.path.display().to_string(),
            };
            meta.events += 1;
        }
        *s.dev.write().expect("slot lock") = Some(t.dev.clone());
        *s.target.write().expect("slot lock") = None;
        s.failed.store(false, Ordering::Release);
        s.set_reason(None);
        if let Some((Some(old), old_to)) = old {
            match old_to {
                Some(h) => {
                    let h = h as usize;
                    let hs = &self.slots[h];
                    let mut meta = self.meta.lock().expect("meta lock");
                    if hs.usable().is_some() {
                        meta.slots.push(SlotInfo {
                            member_uuid: old.uuid,
                            state: SlotState::Replacing {
                                slot: h as u32,
                                checkpoint_row: 0,
                                old_to_slot: None,
                            },
                            path_hint: old.path.display().to_string(),
                        });
                        *hs.target.write().expect("slot lock") =
                            Some(new_target(old, TargetKind::Replace { old_to_slot: None }));
                    } else {
                        meta.slots[h] = SlotInfo {
                            member_uuid: old.uuid,
                            state: SlotState::Rebuilding { checkpoint_row: 0 },
                            path_hint: old.path.display().to_string(),
                        };
                        *hs.target.write().expect("slot lock") =
                            Some(new_target(old, TargetKind::Rebuild));
                    }
                }
                None => {
                    // Persist first so the array no longer lists it, then release it.
                    self.persist()?;
                    self.release(&old, slot);
                    return Ok(());
                }
            }
        }
        self.persist()
    }
}

fn new_target(dev: Arc<Dev>, kind: TargetKind) -> Arc<Target> {
    Arc::new(Target {
        dev,
        kind,
        readd: false,
        checkpoint: AtomicU64::new(0),
        durable: AtomicU64::new(0),
    })
}

impl Array {
    /// Takes a failed or stale member out of its slot so it can be added back (re-added
    /// members are rebuilt, never trusted). Returns the open device if `path` is one.
    pub fn take_failed(&self, path: &Path) -> Option<Arc<dyn Member>> {
        for s in &self.slots {
            if s.usable().is_some() {
                continue;
            }
            let mut dev = s.dev.write().expect("slot lock");
            if dev.as_ref().is_some_and(|d| same_file(&d.path, path)) {
                let d = dev.take().expect("checked");
                drop(dev);
                s.set_reason(Some(format!("{} is being re-added", d.path.display())));
                return Some(d.member.clone());
            }
        }
        None
    }
}
