//! Persistent health facts: per-member read, write and checksum error counters, and the state of
//! the last (or an interrupted) scrub with its checkpoint. Both ride in every superblock write as
//! compatible extensions ([`COUNTERS_TAG`], [`SCRUB_TAG`], postcard-encoded); an older reader
//! keeps them unchanged.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::Array;
use crate::format::{Extension, Superblock};

/// Extension tag of the per-member error counters.
pub const COUNTERS_TAG: u32 = crate::format::feature::TAG_COUNTERS;
/// Extension tag of the scrub record.
pub const SCRUB_TAG: u32 = crate::format::feature::TAG_SCRUB;
/// Compatible feature bit: error counters are recorded.
pub const FEATURE_COUNTERS: u64 = crate::format::feature::COUNTERS;
/// Compatible feature bit: the scrub record is kept.
pub const FEATURE_SCRUB: u64 = crate::format::feature::SCRUB;

/// One member's error counters, keyed by member uuid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounters {
    pub uuid: [u8; 16],
    pub read: u64,
    pub write: u64,
    pub checksum: u64,
}

/// The last scrub, or the one in progress (interrupted runs resume from `next_row`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubRecord {
    /// Unix seconds the run started (0: never scrubbed).
    pub started: u64,
    /// Unix seconds it finished; None while it is unfinished.
    pub finished: Option<u64>,
    /// First row not yet checked by an unfinished run.
    pub next_row: u64,
    pub repair: bool,
    pub rows_checked: u64,
    pub problems: u64,
    pub repaired: u64,
    pub unrepaired: u64,
}

impl ScrubRecord {
    /// An unfinished run to resume.
    pub fn in_progress(&self) -> bool {
        self.started != 0 && self.finished.is_none()
    }
}

fn find(sb: &Superblock, tag: u32) -> Option<&[u8]> {
    sb.extensions
        .iter()
        .find(|e| e.tag == tag)
        .map(|e| &e.data[..])
}

/// The counters recorded in a superblock.
pub fn counters_of(sb: &Superblock) -> Vec<ErrorCounters> {
    if sb.compat_features & FEATURE_COUNTERS == 0 {
        return Vec::new();
    }
    find(sb, COUNTERS_TAG)
        .and_then(|d| postcard::from_bytes(d).ok())
        .unwrap_or_default()
}

/// The scrub record of a superblock.
pub fn scrub_of(sb: &Superblock) -> ScrubRecord {
    if sb.compat_features & FEATURE_SCRUB == 0 {
        return ScrubRecord::default();
    }
    find(sb, SCRUB_TAG)
        .and_then(|d| postcard::from_bytes(d).ok())
        .unwrap_or_default()
}

fn put(sb: &mut Superblock, tag: u32, feature: u64, data: Vec<u8>) {
    sb.compat_features |= feature;
    match sb.extensions.iter_mut().find(|e| e.tag == tag) {
        Some(e) => e.data = data,
        None => sb.extensions.push(Extension { tag, data }),
    }
}

/// Drops the counters, then the scrub record, from `sb` while its body would be too large to
/// write (they are kept in memory; a superblock that cannot be written would fail the member).
pub(crate) fn fit_health(sb: &mut Superblock) {
    for (tag, feature) in [(COUNTERS_TAG, FEATURE_COUNTERS), (SCRUB_TAG, FEATURE_SCRUB)] {
        let size = postcard::to_stdvec(&*sb).map(|b| b.len()).unwrap_or(0);
        if size <= crate::format::MAX_BODY {
            break;
        }
        sb.extensions.retain(|e| e.tag != tag);
        sb.compat_features &= !feature;
    }
}

impl Array {
    /// Seeds the devices' error counters from the superblock (at assembly).
    pub(crate) fn load_counters(&self, sb: &Superblock) {
        let saved = counters_of(sb);
        for d in self.live_devs() {
            if let Some(c) = saved.iter().find(|c| c.uuid == d.uuid) {
                d.read_errors.store(c.read, Ordering::Relaxed);
                d.write_errors.store(c.write, Ordering::Relaxed);
                d.csum_errors.store(c.checksum, Ordering::Relaxed);
            }
        }
    }

    /// Puts the current counters (of devices that have any) and the scrub record into the
    /// superblock about to be written. They never make a superblock too large to write: if the
    /// body would pass the limit, the counters, then the scrub record, stay in memory only.
    pub(crate) fn store_health(&self, sb: &mut Superblock) {
        let counters: Vec<ErrorCounters> = self
            .live_devs()
            .iter()
            .map(|d| ErrorCounters {
                uuid: d.uuid,
                read: d.read_errors.load(Ordering::Relaxed),
                write: d.write_errors.load(Ordering::Relaxed),
                checksum: d.csum_errors.load(Ordering::Relaxed),
            })
            .filter(|c| c.read + c.write + c.checksum > 0)
            .collect();
        if !counters.is_empty() || sb.compat_features & FEATURE_COUNTERS != 0 {
            let data = postcard::to_stdvec(&counters).expect("counters encode");
            put(sb, COUNTERS_TAG, FEATURE_COUNTERS, data);
        }
        let rec = self.scrub_record.lock().expect("scrub lock").clone();
        if rec.started != 0 {
            let data = postcard::to_stdvec(&rec).expect("scrub record encodes");
            put(sb, SCRUB_TAG, FEATURE_SCRUB, data);
        }
        fit_health(sb);
    }

    /// The last scrub, or the unfinished one.
    pub fn scrub_record(&self) -> ScrubRecord {
        self.scrub_record.lock().expect("scrub lock").clone()
    }

    /// Replaces the scrub record (persisted with the next superblock write).
    pub fn set_scrub_record(&self, rec: ScrubRecord) {
        *self.scrub_record.lock().expect("scrub lock") = rec;
    }
}
