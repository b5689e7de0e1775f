//! Write-intent bitmap: one bit per region of rows, kept in every member's metadata area. A
//! region's bit is durable on the members before data or parity in it change. Writes in flight
//! are counted per region (as md's bitmap counts them): a bit is cleared only when no write to
//! its region is in flight and every write to it completed before a flush that has completed,
//! and then lazily, once the region has been idle for a while. After an unclean stop only the
//! regions with a bit set need resync. Its geometry is a compatible feature of format v1: superblock
//! extension record [`BITMAP_TAG`] (offset, bytes, rows per region).
//!
//! The data map rides along (incompatible feature [`FEATURE_DATA_MAP`], record
//! [`DATA_MAP_TAG`]): a second bit per region, right after the bitmap on every member and
//! written with it, set with the region's write-intent bit by the first write into the region,
//! and cleared only after a trim zeroed all of the region (see [`Array::bitmap_trimmed`]). A
//! region whose bit is clear holds zeros on every member (never written since `create`
//! zeroed it, or trimmed whole since): rebuild, replace and scrub skip it.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Instant;
use crate::sync::{Condvar, Mutex};

use super::{Array, Dev, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::format::{Extension, Superblock, METADATA_OFFSET};

/// Extension record tag of the bitmap geometry.
pub const BITMAP_TAG: u32 = crate::format::feature::TAG_BITMAP;
/// Compatible feature bit: the members carry a write-intent bitmap.
pub const FEATURE_BITMAP: u64 = crate::format::feature::BITMAP;
/// Extension record tag of the data map (offset, bytes).
pub const DATA_MAP_TAG: u32 = crate::format::feature::TAG_DATA_MAP;
/// Incompatible feature bit: the members carry a data map after the bitmap (an older raidctl
/// would write into a region without setting its bit, and a rebuild would then skip that data).
pub const FEATURE_DATA_MAP: u64 = crate::format::feature::DATA_MAP;
/// A region is cleared once it has had no writes for this long and a flush completed (a
/// performance choice: setting a bit again costs a bitmap write and flush; safety comes from
/// the in-flight counts).
pub const IDLE_BEFORE_CLEAR: Duration = Duration::from_secs(5);
/// When write-intent bits clear: a region idle for `idle` may clear after a flush, beyond the
/// `keep` most recently written set bits; one idle for `linger` clears whatever the count.
/// Every array runs [`ClearPolicy::AGE`] (every idle region clears): the simulator draws other
/// policies from its seed (other idle times, a few bits kept longest-idle-first), which
/// exercises more orders of clears and marks. Keeping bits set longer in production was tried
/// (issue 30: writes spread over many regions re-mark each region after it idles 5 s, a bitmap
/// write and a flush of every member, 0.07-0.10x the metadata per write without it at 1 TiB,
/// docs/performance.md) and withdrawn: after an unclean stop that loses a member, assembly lists
/// the member's data in every marked region that nothing else proves settled (all of them
/// without checksums), so each bit kept set past its flush widened that loss to data flushed
/// long before (an outside attack: 26-33 MiB of flushed data listed where the age rule listed
/// 768 KiB). Safety does not depend on the policy: a bit clears only when every write to its
/// region completed before a completed flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClearPolicy {
    /// Least idle time before a region may clear.
    pub idle: Duration,
    /// Idle time after which a region clears whatever the count.
    pub linger: Duration,
    /// Bits that may stay set while idle for less than `linger`.
    pub keep: u64,
}

impl ClearPolicy {
    /// The age rule: a region clears once idle for [`IDLE_BEFORE_CLEAR`].
    pub const AGE: ClearPolicy = ClearPolicy {
        idle: IDLE_BEFORE_CLEAR,
        linger: IDLE_BEFORE_CLEAR,
        keep: 0,
    };
}

/// The largest bitmap `create` lays out (per member; the data map and re-add map take as much
/// again each).
pub const MAX_BITMAP_BYTES: u64 = 64 << 10;

/// Where the bitmap lives and how coarse it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitmapGeometry {
    pub offset: u64,
    pub bytes: u64,
    pub region_rows: u64,
    /// The data map follows the bitmap, `bytes` long, at `offset + bytes`.
    pub data_map: bool,
    /// The re-add map follows the data map, `bytes` long, at `offset + 2 * bytes`
    /// ([`super::readd`]).
    pub readd_map: bool,
}

/// A power of two of bytes as `--bitmap-chunk` takes it: 64K, 16M, 1G, 4096.
fn pow2_size(b: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", b >> shift);
        }
    }
    b.to_string()
}

impl BitmapGeometry {
    /// Regions of `region_bytes` of member data when given (a power of two, at least the chunk;
    /// refused when its bitmap would pass 64 KiB or the metadata area), else of 64 MiB (coarser
    /// where the bitmap would pass 64 KiB). None: the metadata area has no room for a bitmap.
    pub fn plan(
        data_rows: u64,
        chunk: u64,
        metadata_bytes: u64,
        region_bytes: Option<u64>,
    ) -> Result<Option<BitmapGeometry>> {
        let bytes_for =
            |region_rows: u64| data_rows.div_ceil(region_rows).div_ceil(8).div_ceil(4096) * 4096;
        let region_rows = match region_bytes {
            Some(b) => {
                if !b.is_power_of_two() || b < chunk {
                    crate::bail!(
                        InvalidInput,
                        "bitmap chunk {b} bytes: it must be a power of two and at least the chunk ({chunk} bytes)"
                    );
                }
                let rows = b / chunk;
                let bytes = bytes_for(rows);
                let limit = MAX_BITMAP_BYTES.min(metadata_bytes);
                if bytes > limit {
                    let mut least = rows;
                    while bytes_for(least) > limit {
                        least *= 2;
                    }
                    crate::bail!(
                        InvalidInput,
                        "bitmap chunk {b} bytes needs a bitmap of {bytes} bytes per member, more than the {limit} it may take: use at least {}",
                        pow2_size(least * chunk)
                    );
                }
                // One region already covers every row: a larger one means nothing more (and
                // 2^63 overflows what multiplies it).
                let whole = data_rows.max(1).next_power_of_two().saturating_mul(chunk);
                if b > whole {
                    crate::bail!(
                        InvalidInput,
                        "bitmap chunk {b} bytes is larger than a member's data area ({} bytes): use at most {}",
                        data_rows * chunk,
                        pow2_size(whole)
                    );
                }
                rows
            }
            None => {
                let mut rows = ((64u64 << 20) / chunk).max(1);
                while bytes_for(rows) > MAX_BITMAP_BYTES {
                    rows *= 2;
                }
                rows
            }
        };
        let bytes = bytes_for(region_rows);
        // With the data map after it when that fits too, and the re-add map after that.
        let data_map = 2 * bytes <= metadata_bytes;
        let readd_map = data_map && 3 * bytes <= metadata_bytes;
        Ok((bytes <= metadata_bytes).then_some(BitmapGeometry {
            offset: METADATA_OFFSET,
            bytes,
            region_rows,
            data_map,
            readd_map,
        }))
    }

    pub fn to_extension(self) -> Extension {
        let mut data = Vec::with_capacity(24);
        data.extend_from_slice(&self.offset.to_le_bytes());
        data.extend_from_slice(&self.bytes.to_le_bytes());
        data.extend_from_slice(&self.region_rows.to_le_bytes());
        Extension {
            tag: BITMAP_TAG,
            data,
        }
    }

    /// The data map's record, when the array has one.
    pub fn data_map_extension(self) -> Option<Extension> {
        self.data_map.then(|| {
            let mut data = Vec::with_capacity(16);
            data.extend_from_slice(&(self.offset + self.bytes).to_le_bytes());
            data.extend_from_slice(&self.bytes.to_le_bytes());
            Extension {
                tag: DATA_MAP_TAG,
                data,
            }
        })
    }

    /// Where the bitmap (and the data map and re-add map after it) ends.
    pub fn end(&self) -> u64 {
        self.offset + self.bytes * (1 + self.data_map as u64 + self.readd_map as u64)
    }

    /// The geometry recorded in a superblock, if the feature is on and its record valid.
    pub fn from_superblock(sb: &Superblock) -> Option<BitmapGeometry> {
        Self::parse(sb).ok().flatten()
    }

    /// The geometry recorded in a superblock: None without the feature; an error when the
    /// feature bit is set and the record is missing or does not fit (checked arithmetic: a
    /// crafted record is refused, never trusted).
    pub fn parse(sb: &Superblock) -> crate::error::Result<Option<BitmapGeometry>> {
        let data_map = sb.incompat_features & FEATURE_DATA_MAP != 0;
        let readd_map = sb.incompat_features & super::readd::FEATURE_READD_MAP != 0;
        if !data_map && sb.extensions.iter().any(|e| e.tag == DATA_MAP_TAG) {
            crate::bail!(
                Corrupt,
                "a data map record (extension tag {DATA_MAP_TAG}) without incompat bit {FEATURE_DATA_MAP}"
            );
        }
        if readd_map && !data_map {
            crate::bail!(
                Corrupt,
                "incompat bit {} (re-add map) is set without the data map",
                super::readd::FEATURE_READD_MAP
            );
        }
        if !readd_map
            && sb
                .extensions
                .iter()
                .any(|e| e.tag == super::readd::READD_TAG)
        {
            crate::bail!(
                Corrupt,
                "a re-add map record (extension tag {}) without incompat bit {}",
                super::readd::READD_TAG,
                super::readd::FEATURE_READD_MAP
            );
        }
        if sb.compat_features & FEATURE_BITMAP == 0 {
            if data_map {
                crate::bail!(
                    Corrupt,
                    "incompat bit {FEATURE_DATA_MAP} (data map) is set without the write-intent bitmap"
                );
            }
            return Ok(None);
        }
        let bad = |why: &str| {
            crate::error::Error::new(
                crate::error::ErrorKind::Corrupt,
                format!("write-intent bitmap record: {why}"),
            )
        };
        let e = sb
            .extensions
            .iter()
            .find(|e| e.tag == BITMAP_TAG)
            .ok_or_else(|| bad("feature bit set but no record"))?;
        if e.data.len() != 24 {
            return Err(bad(&format!("{} bytes, not 24", e.data.len())));
        }
        let u =
            |i: usize| u64::from_le_bytes(e.data[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let g = BitmapGeometry {
            offset: u(0),
            bytes: u(1),
            region_rows: u(2),
            data_map,
            readd_map,
        };
        let fits = g.offset >= METADATA_OFFSET
            && g.bytes.is_multiple_of(4096)
            && g.bytes > 0
            && g.bytes <= 1 << 20
            && g.offset
                .checked_add(g.bytes)
                .and_then(|end| end.checked_add(if data_map { g.bytes } else { 0 }))
                .and_then(|end| end.checked_add(if readd_map { g.bytes } else { 0 }))
                .is_some_and(|end| end <= sb.data_offset)
            && g.region_rows > 0
            && sb.data_rows.div_ceil(g.region_rows) <= g.bytes * 8;
        if !fits {
            return Err(bad(&format!(
                "offset {}, {} bytes, {} rows per region do not fit the metadata area",
                g.offset, g.bytes, g.region_rows
            )));
        }
        if data_map {
            let rec = sb
                .extensions
                .iter()
                .find(|e| e.tag == DATA_MAP_TAG)
                .ok_or_else(|| bad("data map feature bit set but no data map record"))?;
            let want = g.data_map_extension().expect("data map").data;
            if rec.data != want {
                return Err(bad(&format!(
                    "the data map record ({} bytes) is not the {} bytes right after the bitmap at offset {}",
                    rec.data.len(),
                    g.bytes,
                    g.offset + g.bytes
                )));
            }
        }
        if readd_map {
            let rec = super::readd::ReaddRecord::parse(sb)?
                .ok_or_else(|| bad("re-add map feature bit set but no re-add map record"))?;
            if (rec.offset, rec.bytes) != (g.offset + 2 * g.bytes, g.bytes) {
                return Err(bad(&format!(
                    "the re-add map record (offset {}, {} bytes) is not the {} bytes right after the data map at offset {}",
                    rec.offset,
                    rec.bytes,
                    g.bytes,
                    g.offset + 2 * g.bytes
                )));
            }
        }
        Ok(Some(g))
    }

    pub fn regions(&self, data_rows: u64) -> u64 {
        data_rows.div_ceil(self.region_rows)
    }
}

/// Run-time bitmap state.
///
/// Marks commit as a group (as md's bitmap does at an unplug): a writer sets its bits in
/// memory under the lock and, when they are not yet durable, either writes the bitmap itself
/// (to every member at once, then flushed) or waits for the write in progress and then the
/// next, which carries every bit set meanwhile. The lock is never held during member I/O, so
/// writers whose bits are durable already, and marks arriving during a write, do not queue
/// behind it one write each. One bitmap write at a time (`writing`), so writes land in order.
pub(crate) struct Bitmap {
    pub(crate) geo: BitmapGeometry,
    state: Mutex<State>,
    /// Signalled when a bitmap write ends.
    written: Condvar,
    activity: Vec<Activity>,
}

struct State {
    /// When bits clear ([`Array::set_clear_policy`]).
    policy: ClearPolicy,
    /// Bits as the engine wants them (set by marks, cleared by clears), as on the members: the
    /// write-intent bits, then (with a data map) the data map's bits from byte `geo.bytes`.
    bits: Vec<u8>,
    /// Bits known durable on the members: a bit set here was written and flushed. (A bit
    /// cleared here may still be set on a member: harmless, it costs a needless resync.)
    durable: Vec<u8>,
    /// A bitmap write is in progress (by whichever writer set this).
    writing: bool,
    /// Regions a trim zeroed whole, with no other write in flight or begun since it marked
    /// them: (region, its mark count then, when the trim was done). Their data map bits clear
    /// after a flush that began later, if nothing marked them since.
    trims: Vec<(u64, u64, Instant)>,
    /// Slots whose member left with the re-add map keeping count of what it misses (empty:
    /// none; the map's bits are then not kept up to date). See [`super::readd`].
    tracking: Vec<usize>,
    /// The area as the last bitmap write left it, and the devices (by uuid) it reached whole:
    /// the next write sends these only the 4 KiB pages that changed since, and any other
    /// device (one that joined since, or none yet at open) the whole area. Cleared when a
    /// device joins ([`Array::bitmap_rewrite`]): that write goes whole to every device.
    on_members: Option<(Vec<u8>, Vec<[u8; 16]>)>,
}

/// A region's write activity, updated without the bitmap lock when a write completes.
#[derive(Default)]
struct Activity {
    /// When the last write into the region started or completed (clock nanoseconds + 1; 0:
    /// never).
    last_write: AtomicU64,
    /// Writes in flight into the region.
    inflight: AtomicU32,
    /// Marks of the region so far (counted under the bitmap lock): a trim that returns the
    /// region to empty checks that no other write marked it since the trim did.
    marks: AtomicU64,
    /// The region's bit was set at open and no write touched it since, nor was it cleared: a
    /// resync may still be settling it (read without the bitmap lock by a member failure).
    stale: AtomicBool,
}

impl Activity {
    fn touch(&self, now: Instant) {
        self.stale.store(false, Ordering::Release);
        self.last_write.store(now.nanos() + 1, Ordering::Release);
    }

    fn last(&self) -> Option<Instant> {
        match self.last_write.load(Ordering::Acquire) {
            0 => None,
            n => Some(Instant::from_nanos(n - 1)),
        }
    }
}

/// Writes in flight into some regions: they count until this is dropped (when the write
/// completed), so their bits stay set.
pub(crate) struct BitmapHold<'a> {
    bm: &'a Bitmap,
    regions: std::ops::RangeInclusive<u64>,
}

impl Drop for BitmapHold<'_> {
    fn drop(&mut self) {
        // No lock: the clear reads the count after the time (release, then acquire).
        let now = Instant::now();
        for r in self.regions.clone() {
            let a = &self.bm.activity[r as usize];
            a.touch(now);
            a.inflight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Bitmap {
    /// `bits` as the engine starts with them; `durable` those known on every member (the
    /// bits as read, or fewer: a bit set here but not there is written before any write
    /// relies on it).
    pub(crate) fn new(
        geo: BitmapGeometry,
        regions: u64,
        bits: Vec<u8>,
        durable: Vec<u8>,
    ) -> Bitmap {
        let set = |r: u64| {
            bits.get((r / 8) as usize)
                .is_some_and(|b| b & (1 << (r % 8)) != 0)
        };
        let activity = (0..regions)
            .map(|r| Activity {
                stale: AtomicBool::new(set(r)),
                ..Activity::default()
            })
            .collect();
        Bitmap {
            geo,
            state: Mutex::new(State {
                policy: ClearPolicy::AGE,
                durable,
                bits,
                writing: false,
                trims: Vec::new(),
                tracking: Vec::new(),
                on_members: None,
            }),
            written: Condvar::new(),
            activity,
        }
    }

    /// Sets when bits clear.
    pub(crate) fn set_policy(&self, policy: ClearPolicy) {
        self.state.lock().expect("bitmap lock").policy = policy;
    }

    /// True when the region holding `row` has its bit set.
    pub(crate) fn row_dirty(&self, row: u64) -> bool {
        let r = row / self.geo.region_rows;
        let st = self.state.lock().expect("bitmap lock");
        st.bits
            .get((r / 8) as usize)
            .is_some_and(|b| b & (1 << (r % 8)) != 0)
    }

    /// Where region `r`'s data map bit lies in the bits, if there is a data map.
    fn map_bit(&self, r: u64) -> Option<(usize, u8)> {
        self.geo
            .data_map
            .then(|| ((self.geo.bytes + r / 8) as usize, 1u8 << (r % 8)))
    }

    /// Where region `r`'s re-add map bit lies in the bits, if there is a re-add map.
    fn missed_bit(&self, r: u64) -> Option<(usize, u8)> {
        self.geo
            .readd_map
            .then(|| ((2 * self.geo.bytes + r / 8) as usize, 1u8 << (r % 8)))
    }

    /// Starts (`on`) or stops keeping count, in the re-add map, of the regions slot `slot`'s
    /// member misses. Starting takes in every region marked now (writes in flight, or not yet
    /// durable everywhere, when the member left); from then on every mark sets the region's
    /// re-add bit with its write-intent bit, durable before the write, and no write-intent bit
    /// is cleared before the re-add bits are durable. When no slot is tracked any more the map
    /// is emptied (written with the next bitmap write). False without a re-add map.
    pub(crate) fn track(&self, slot: usize, on: bool) -> bool {
        if !self.geo.readd_map {
            return false;
        }
        let mut st = self.state.lock().expect("bitmap lock");
        let bytes = self.geo.bytes as usize;
        if on {
            if !st.tracking.contains(&slot) {
                st.tracking.push(slot);
            }
            let (intent, rest) = st.bits.split_at_mut(bytes);
            for (m, b) in rest[bytes..2 * bytes].iter_mut().zip(intent.iter()) {
                *m |= b;
            }
        } else {
            st.tracking.retain(|&s| s != slot);
            if st.tracking.is_empty() {
                st.bits[2 * bytes..3 * bytes].fill(0);
            }
        }
        true
    }

    /// True while slot `slot`'s member is tracked in the re-add map.
    pub(crate) fn tracked(&self, slot: usize) -> bool {
        self.state
            .lock()
            .expect("bitmap lock")
            .tracking
            .contains(&slot)
    }

    /// A re-added member may miss region `r`: its re-add bit or its write-intent bit is set.
    fn may_miss(&self, st: &State, r: u64) -> bool {
        self.missed_bit(r)
            .is_some_and(|(byte, bit)| st.bits[byte] & bit != 0)
            || st.bits[(r / 8) as usize] & (1 << (r % 8)) != 0
    }

    /// Regions a re-added member would get zero entries in (it may miss them, and they hold
    /// no data now: trimmed whole while it was away), and regions holding data it keeps as
    /// they are. Without a data map every region holds data.
    pub(crate) fn readd_counts(&self) -> (u64, u64) {
        let st = self.state.lock().expect("bitmap lock");
        let (mut zeroed, mut kept) = (0, 0);
        for r in 0..self.activity.len() as u64 {
            let missed = self.may_miss(&st, r);
            let data = self
                .map_bit(r)
                .is_none_or(|(byte, bit)| st.bits[byte] & bit != 0);
            match (missed, data) {
                (true, false) => zeroed += 1,
                (false, true) => kept += 1,
                _ => {}
            }
        }
        (zeroed, kept)
    }

    /// The first region from `r` (below `limit`) that a re-added member may miss (`missed`:
    /// its re-add bit or its write-intent bit set) or that it holds (not `missed`), or
    /// `limit`. Without a re-add map every region may be missed.
    fn next_readd(&self, r: u64, limit: u64, missed: bool) -> u64 {
        let limit = limit.min(self.activity.len() as u64);
        if !self.geo.readd_map {
            return if missed { r.min(limit) } else { limit };
        }
        let st = self.state.lock().expect("bitmap lock");
        (r..limit)
            .find(|&r| self.may_miss(&st, r) == missed)
            .unwrap_or(limit)
    }

    /// The first region from `r` (below `limit`) that may hold data (`holding`) or that the
    /// data map shows empty (not `holding`), or `limit`. Without a data map every region may
    /// hold data.
    fn next_region(&self, r: u64, limit: u64, holding: bool) -> u64 {
        let limit = limit.min(self.activity.len() as u64);
        if !self.geo.data_map {
            return if holding { r.min(limit) } else { limit };
        }
        let st = self.state.lock().expect("bitmap lock");
        (r..limit)
            .find(|&r| {
                let (byte, bit) = self.map_bit(r).expect("data map");
                (st.bits[byte] & bit != 0) == holding
            })
            .unwrap_or(limit)
    }

    /// Regions holding data, by the data map (None without one).
    pub(crate) fn data_regions(&self) -> Option<Vec<u64>> {
        self.geo.data_map.then(|| {
            let st = self.state.lock().expect("bitmap lock");
            (0..self.activity.len() as u64)
                .filter(|&r| {
                    let (byte, bit) = self.map_bit(r).expect("data map");
                    st.bits[byte] & bit != 0
                })
                .collect()
        })
    }

    /// Regions whose bit is set.
    pub(crate) fn dirty_regions(&self) -> Vec<u64> {
        let st = self.state.lock().expect("bitmap lock");
        (0..self.activity.len() as u64)
            .filter(|&r| st.bits[(r / 8) as usize] & (1 << (r % 8)) != 0)
            .collect()
    }
}

impl Array {
    /// Writes the bitmap area as `bits` to every live device (flushed with `flush`): to a
    /// device that holds `prev`'s area, only the 4 KiB pages that differ from it (a mark
    /// changes one or two: at 1 TiB members the area is three pages, sent whole on every mark
    /// before); to any other, the whole area. Returns the devices that now hold `bits` whole.
    fn write_bitmap(
        &self,
        bits: &[u8],
        flush: bool,
        prev: Option<&(Vec<u8>, Vec<[u8; 16]>)>,
    ) -> Result<Vec<[u8; 16]>> {
        let Some(bm) = &self.bitmap else {
            return Ok(Vec::new());
        };
        const PAGE: usize = 4096;
        let mut buf = AlignedBuf::zeroed((bm.geo.end() - bm.geo.offset) as usize);
        buf[..bits.len()].copy_from_slice(bits);
        // Runs of changed pages (page index ranges), against the area as last written.
        let pages = buf.len().div_ceil(PAGE);
        let changed: Vec<Range<usize>> = match prev {
            None => std::iter::once(0..pages).collect(),
            Some((old, _)) => {
                let differs = |p: usize| {
                    let r = p * PAGE..((p + 1) * PAGE).min(buf.len());
                    let o = |i: usize| old.get(i).copied().unwrap_or(0);
                    r.clone().any(|i| buf[i] != o(i))
                };
                let mut runs: Vec<Range<usize>> = Vec::new();
                for p in (0..pages).filter(|&p| differs(p)) {
                    match runs.last_mut() {
                        Some(r) if r.end == p => r.end = p + 1,
                        _ => runs.push(p..p + 1),
                    }
                }
                runs
            }
        };
        let holds = |d: &Dev| prev.is_some_and(|(_, ids)| ids.contains(&d.uuid));
        let whole: Vec<Range<usize>> = std::iter::once(0..pages).collect();
        let devs = self.live_devs();
        // Every member at once (one write and flush each, in parallel where they wait on
        // devices): a mark waits for the slowest member, not for the sum of them.
        let results = self.on_each_dev(&devs, |d| {
            let runs: &[Range<usize>] = if holds(d) { &changed } else { &whole };
            for r in runs {
                let bytes = &buf[r.start * PAGE..(r.end * PAGE).min(buf.len())];
                d.member
                    .write_at(bytes, bm.geo.offset + (r.start * PAGE) as u64)?;
                d.count(WriteKind::Metadata, bytes.len() as u64);
            }
            if flush {
                d.member.flush()?;
            }
            Ok(())
        });
        let mut reached = Vec::new();
        for (d, r) in devs.iter().zip(results) {
            match r {
                Ok(()) => reached.push(d.uuid),
                Err(e) => {
                    d.write_error(&e);
                    self.fail_dev(d, &format!("bitmap write failed: {e}"))?;
                }
            }
        }
        self.check_alive()?;
        Ok(reached)
    }

    /// Writes the bitmap as it is in memory once no other bitmap write is in progress
    /// (`st` is the bitmap lock's guard, released during the write and returned taken again).
    /// The bits it clears leave `durable` when it begins; the bits it sets join it when it
    /// completes, if flushed.
    fn commit_bitmap<'a>(
        &'a self,
        bm: &'a Bitmap,
        mut st: std::sync::MutexGuard<'a, State>,
        flush: bool,
    ) -> (std::sync::MutexGuard<'a, State>, Result<()>) {
        while st.writing {
            st = bm.written.wait(st, &bm.state).expect("bitmap lock");
        }
        st.writing = true;
        let bits = st.bits.clone();
        // Bits this write clears stop counting as durable now, before the lock is released:
        // a mark arriving during the write must not take them as set on the members.
        for (d, b) in st.durable.iter_mut().zip(&bits) {
            *d &= *b;
        }
        // Taken for the write: if it fails, the next one sends every device the whole area.
        let prev = st.on_members.take();
        drop(st);
        let r = self.write_bitmap(&bits, flush, prev.as_ref());
        let mut st = bm.state.lock().expect("bitmap lock");
        st.writing = false;
        let r = r.map(|reached| st.on_members = Some((bits.clone(), reached)));
        if r.is_ok() && flush {
            // (No clear ran in between: one write at a time.)
            for (d, b) in st.durable.iter_mut().zip(&bits) {
                *d |= *b;
            }
        }
        bm.written.notify_all();
        (st, r)
    }

    /// Makes the bits of every region touching `rows` durable before those rows change, and
    /// counts a write in flight there until the returned hold is dropped. `data` false for
    /// changes that leave zeros where there were zeros (a trim, a forced assembly's resync
    /// marks): they need the write-intent bits but not the data map's.
    pub(crate) fn bitmap_mark_as(
        &self,
        rows: Range<u64>,
        data: bool,
    ) -> Result<Option<BitmapHold<'_>>> {
        let Some(bm) = &self.bitmap else {
            return Ok(None);
        };
        let first = rows.start / bm.geo.region_rows;
        let mut st = bm.state.lock().expect("bitmap lock");
        let last = (rows.end.saturating_sub(1) / bm.geo.region_rows)
            .min(bm.activity.len() as u64 - 1)
            .max(first);
        let now = Instant::now();
        for r in first..=last {
            let a = &bm.activity[r as usize];
            a.touch(now);
            a.inflight.fetch_add(1, Ordering::AcqRel);
            a.marks.fetch_add(1, Ordering::AcqRel);
        }
        // Counted before the bits are written: a hold dropped on an error below uncounts.
        let hold = BitmapHold {
            bm,
            regions: first..=last,
        };
        // The write-intent bits and the data map's: every bit this write needs (no allocation:
        // this runs on every write).
        let tracking = !st.tracking.is_empty();
        let needed = || {
            (first..=last).flat_map(move |r| {
                std::iter::once(((r / 8) as usize, 1u8 << (r % 8)))
                    .chain(bm.map_bit(r).filter(|_| data))
                    .chain(bm.missed_bit(r).filter(|_| tracking))
            })
        };
        for (byte, bit) in needed() {
            st.bits[byte] |= bit;
        }
        // Until every bit of these regions is durable: written by this writer, or by a write
        // that began after another writer set them (the group). While a write is in progress,
        // wait for it and look again: the next one carries every bit set meanwhile, and only
        // one of the writers waiting for it writes it (committing after every wait made each
        // mark a bitmap write and flush of its own: 9,964 commits for 9,964 marks at queue
        // depth 16 over 1 TiB members).
        let durable = |st: &State| needed().all(|(byte, bit)| st.durable[byte] & bit != 0);
        while !durable(&st) {
            if st.writing {
                st = bm.written.wait(st, &bm.state).expect("bitmap lock");
                continue;
            }
            let (g, r) = self.commit_bitmap(bm, st, true);
            st = g;
            r?;
        }
        drop(st);
        Ok(Some(hold))
    }

    /// The door of every request write to member rows (a write, a trim, a stripe-cache
    /// destage): the regions' bits are durable before it returns, and the member blocks it
    /// may change (`blocks`, within `rows`: [`Array::write_blocks`]) count as not yet durable
    /// (`unflushed`) from now until a flush that begins after the hold is dropped.
    pub(crate) fn begin_write(
        &self,
        rows: Range<u64>,
        blocks: Vec<Range<u64>>,
    ) -> Result<super::WriteHold<'_>> {
        self.begin_write_as(rows, blocks, true, true)
    }

    /// [`Array::begin_write`] of a stripe-cache destage: it passes a flush's gate (an eviction
    /// destages inside a write's own hold, which the flush's drain waits for; unflushed.rs).
    pub(crate) fn begin_destage(
        &self,
        rows: Range<u64>,
        blocks: Vec<Range<u64>>,
    ) -> Result<super::WriteHold<'_>> {
        self.begin_write_as(rows, blocks, true, false)
    }

    /// [`Array::begin_write`] of a trim: it leaves zeros where the data map says zeros, so it
    /// does not set the map's bits.
    pub(crate) fn begin_trim(&self, rows: Range<u64>) -> Result<super::WriteHold<'_>> {
        let blocks = self.row_blocks(rows.clone());
        self.begin_write_as(rows, std::iter::once(blocks), false, true)
    }

    fn begin_write_as(
        &self,
        rows: Range<u64>,
        blocks: impl IntoIterator<Item = Range<u64>>,
        data: bool,
        gated: bool,
    ) -> Result<super::WriteHold<'_>> {
        let ticket = self.unflushed.begin(blocks, gated);
        let bitmap = self.bitmap_mark_as(rows, data)?;
        Ok(super::WriteHold {
            _bitmap: bitmap,
            rows: ticket,
        })
    }

    /// Writes the bits as they are to every live device (flushed): called when a device joins
    /// (a rebuild or replace target, a spare). A mark writes the bitmap only when a bit changes,
    /// so a device joining while a bit is set would otherwise never receive it, and once the
    /// members that hold it leave, assembly (the union over the usable members) finds the
    /// region clean after an unclean stop and skips its resync.
    pub(crate) fn bitmap_rewrite(&self) -> Result<()> {
        let Some(bm) = &self.bitmap else {
            return Ok(());
        };
        // Through the one writer: a mark that commits after this writes to the new device too.
        // The whole area to every device: a member coming back (re-added under its uuid) may
        // hold what another assembly wrote while it was away, not the last write here.
        let mut st = bm.state.lock().expect("bitmap lock");
        while st.writing {
            st = bm.written.wait(st, &bm.state).expect("bitmap lock");
        }
        st.on_members = None;
        let (st, r) = self.commit_bitmap(bm, st, true);
        drop(st);
        r
    }

    /// After a completed flush that started at `flush_start`: clears regions with no write in
    /// flight whose writes all completed before it and before a superblock update began, as
    /// the [`ClearPolicy`] says (every one, with no wait, when `all`, at clean close).
    pub(crate) fn bitmap_clear(&self, flush_start: Instant, all: bool) -> Result<()> {
        let Some(bm) = &self.bitmap else {
            return Ok(());
        };
        let mut st = bm.state.lock().expect("bitmap lock");
        // A member being tracked must find every region it misses in the re-add map once
        // write-intent bits clear: the map's bits are durable (written and flushed) first.
        if !st.tracking.is_empty() {
            let bytes = bm.geo.bytes as usize;
            let pending = |st: &State| {
                st.bits[2 * bytes..3 * bytes]
                    .iter()
                    .zip(&st.durable[2 * bytes..3 * bytes])
                    .any(|(b, d)| b & !d != 0)
            };
            while pending(&st) {
                let (g, r) = self.commit_bitmap(bm, st, true);
                st = g;
                r?;
            }
        }
        let mut changed = false;
        // Regions a trim returned to empty: their zeros are durable now if the trim was done
        // before this flush began; cleared only if no write marked them since (marks happen
        // under the lock held here) and none is in flight.
        let mut trims = std::mem::take(&mut st.trims);
        trims.retain(|&(r, marks, done)| {
            let a = &bm.activity[r as usize];
            if a.marks.load(Ordering::Acquire) != marks {
                return false;
            }
            if done >= flush_start || a.inflight.load(Ordering::Acquire) != 0 {
                return true;
            }
            let (byte, bit) = bm.map_bit(r).expect("trims only with a data map");
            if st.bits[byte] & bit != 0 {
                st.bits[byte] &= !bit;
                changed = true;
            }
            false
        });
        st.trims = trims;
        // A superblock update that began after a region's last write (its generation bump
        // tells an image of a member taken before the write from the member: readd.rs).
        let persisted = match self.persisted_from.load(Ordering::Acquire) {
            0 => None,
            n => Some(Instant::from_nanos(n - 1)),
        };
        let policy = st.policy;
        let set_bit = |st: &State, r: usize| st.bits[r / 8] & (1u8 << (r % 8)) != 0;
        // Regions that may clear now, with their last write (None: none since open, as old as
        // can be); those idle past `linger` clear whatever the count.
        let mut may: Vec<(usize, Option<Instant>)> = Vec::new();
        let mut set = 0u64;
        for r in 0..bm.activity.len() {
            if !set_bit(&st, r) {
                continue;
            }
            set += 1;
            // Marks happen under the lock held here; a completing write only lowers the count.
            let a = &bm.activity[r];
            let inflight = a.inflight.load(Ordering::Acquire);
            let last = a.last();
            // At a clean close (`all`, no write in flight or able to start) every write
            // completed before the flush and before the superblock update that precedes this,
            // even one whose clock reading equals theirs (the simulator's virtual clock can give
            // them one instant: such bits stayed set through the close).
            let durable =
                inflight == 0 && last.is_none_or(|t| t < flush_start || (all && t == flush_start));
            let idle = all || last.is_none_or(|t| t.elapsed() >= policy.idle);
            let recorded = persisted.is_some_and(|p| last.is_none_or(|t| t < p || (all && t == p)));
            if durable && idle && recorded {
                may.push((r, last));
            }
        }
        // Everything at a clean close; else what lingered, then the least recently written
        // until no more than `keep` bits are set (sorted only then: this runs at every flush).
        let lingered = |last: Option<Instant>| last.is_none_or(|t| t.elapsed() >= policy.linger);
        let (mut clear, mut rest): (Vec<_>, Vec<_>) = may
            .into_iter()
            .partition(|&(_, last)| all || lingered(last));
        let over = (set - clear.len() as u64).saturating_sub(policy.keep) as usize;
        if over > 0 {
            rest.sort_unstable_by_key(|&(r, last)| (last, r));
            clear.extend(rest.into_iter().take(over));
        }
        for (r, _) in clear {
            bm.activity[r].stale.store(false, Ordering::Release);
            st.bits[r / 8] &= !(1u8 << (r % 8));
            changed = true;
        }
        if changed {
            // A lost clear only costs a needless resync of that region: no flush needed.
            let (st, r) = self.commit_bitmap(bm, st, false);
            drop(st);
            r?;
        }
        Ok(())
    }

    /// Sets when write-intent bits clear (the simulator draws it from its seed; tests
    /// narrow it). No effect without a bitmap.
    pub fn set_clear_policy(&self, policy: ClearPolicy) {
        if let Some(bm) = &self.bitmap {
            bm.set_policy(policy);
        }
    }

    /// The clear policy in force, if the array keeps a bitmap.
    pub fn clear_policy(&self) -> Option<ClearPolicy> {
        let bm = self.bitmap.as_ref()?;
        Some(bm.state.lock().expect("bitmap lock").policy)
    }

    /// Called by a trim right after it marked `rows` (before it changes any of them): the
    /// regions inside `rows` with no other write in flight, and their mark counts (nothing
    /// without a data map). Writes that completed before this landed before the trim's unmaps.
    pub(crate) fn bitmap_trim_begin(&self, rows: &Range<u64>) -> Vec<(u64, u64)> {
        let Some(bm) = self.bitmap.as_ref().filter(|b| b.geo.data_map) else {
            return Vec::new();
        };
        let _st = bm.state.lock().expect("bitmap lock");
        (rows.start.div_ceil(bm.geo.region_rows)..bm.activity.len() as u64)
            .take_while(|&r| self.region_rows(bm, r).end <= rows.end)
            .filter_map(|r| {
                let a = &bm.activity[r as usize];
                // The trim's own write is the one in flight.
                (a.inflight.load(Ordering::Acquire) == 1)
                    .then(|| (r, a.marks.load(Ordering::Acquire)))
            })
            .collect()
    }

    /// Called by a trim when it is done, before its hold is dropped: of the regions
    /// [`Array::bitmap_trim_begin`] returned, those whose rows lie inside `zeroed` (rows every
    /// member, and every target holding them, now reads as zeros) and that no other write
    /// marked since become empty again after the next flush (see [`Array::bitmap_clear`]).
    pub(crate) fn bitmap_trimmed(&self, begun: &[(u64, u64)], zeroed: &[Range<u64>]) {
        let Some(bm) = &self.bitmap else {
            return;
        };
        let now = Instant::now();
        let mut st = bm.state.lock().expect("bitmap lock");
        for &(r, marks) in begun {
            let rows = self.region_rows(bm, r);
            let whole = zeroed
                .iter()
                .any(|z| z.start <= rows.start && rows.end <= z.end);
            if whole && bm.activity[r as usize].marks.load(Ordering::Acquire) == marks {
                st.trims.retain(|t| t.0 != r);
                st.trims.push((r, marks, now));
            }
        }
    }

    /// Rows of the regions marked at open that no write touched since and that were not
    /// cleared (a resync may still be settling them), without taking the bitmap lock (a
    /// member may fail while the bitmap itself is being written). Every row without a bitmap.
    pub(crate) fn stale_dirty_rows(&self) -> Vec<Range<u64>> {
        let Some(bm) = &self.bitmap else {
            return std::iter::once(0..self.data_rows).collect();
        };
        (0..bm.activity.len() as u64)
            .filter(|&r| bm.activity[r as usize].stale.load(Ordering::Acquire))
            .map(|r| self.region_rows(bm, r))
            .collect()
    }

    /// A resync went over `ranges` (rows) to the end: the stale regions they cover whole are
    /// settled. The blocks it wrote count as written ([`Array::repair_write`]), so a member
    /// failure before the next flush still suspects those; nothing else of the crash is left
    /// in them.
    /// Before, a region stayed stale until its bit was cleared, and a member failing
    /// meanwhile made every row of it suspect, so a crash then listed the member's data there
    /// as lost though the resync and a flush had settled it (simulator seeds 725 and 112).
    pub(crate) fn resync_settled(&self, ranges: &[Range<u64>]) {
        let Some(bm) = &self.bitmap else {
            return;
        };
        let mut ranges = ranges.to_vec();
        ranges.sort_by_key(|x| x.start);
        for r in 0..bm.activity.len() as u64 {
            let a = &bm.activity[r as usize];
            if !a.stale.load(Ordering::Acquire) {
                continue;
            }
            let rows = self.region_rows(bm, r);
            let mut at = rows.start;
            for x in &ranges {
                if x.start <= at && at < x.end {
                    at = x.end;
                }
            }
            if at < rows.end {
                continue;
            }
            a.stale.store(false, Ordering::Release);
        }
    }

    /// False only when the data map shows that no row of `rows` was written since `create`
    /// (they hold zeros on every member). Rows a write is about to change count as holding
    /// data from the moment it marks them, before it touches a member; a caller that skips
    /// rows on this answer holds their row locks, so no write lands there meanwhile.
    pub fn rows_hold_data(&self, rows: Range<u64>) -> bool {
        !rows.is_empty() && self.empty_rows_from(rows.start, rows.end - rows.start) < rows.end
    }

    /// The end of the run of rows from `from`, at most `max` of them, that the data map shows
    /// empty; `from` when row `from` may hold data (always, without a data map). The same
    /// rule as [`Array::rows_hold_data`] for callers that skip them.
    pub fn empty_rows_from(&self, from: u64, max: u64) -> u64 {
        self.rows_run(from, max, false)
    }

    /// The end of the run of rows from `from`, at most `max` of them, that may hold data.
    pub fn data_rows_from(&self, from: u64, max: u64) -> u64 {
        self.rows_run(from, max, true)
    }

    fn rows_run(&self, from: u64, max: u64, holding: bool) -> u64 {
        self.region_run(from, max, holding, |bm, r, limit| {
            bm.next_region(r, limit, !holding)
        })
    }

    /// The end of a run of rows from `from`, at most `max` of them: where `next` (the first
    /// region from a region, below a limit, that ends the run) says, clamped to the rows
    /// asked for; without a bitmap the run is all of them (`whole`) or none.
    fn region_run(
        &self,
        from: u64,
        max: u64,
        whole: bool,
        next: impl Fn(&Bitmap, u64, u64) -> u64,
    ) -> u64 {
        let end = from.saturating_add(max).min(self.data_rows);
        if from >= end {
            return from;
        }
        let Some(bm) = &self.bitmap else {
            return if whole { end } else { from };
        };
        let per = bm.geo.region_rows;
        let r = next(bm, from / per, (end - 1) / per + 1);
        (r * per).clamp(from, end)
    }

    /// The end of the run of rows from `from`, at most `max` of them, that a re-added member
    /// holds as they are (regions with neither a re-add bit nor a write-intent bit set:
    /// nothing was written there since it left); `from` when it may miss row `from` (always,
    /// without a re-add map). A caller that skips them holds their row locks, so no write
    /// lands there meanwhile (a write marks its regions before it takes its row locks).
    pub(crate) fn held_rows_from(&self, from: u64, max: u64) -> u64 {
        self.region_run(from, max, false, |bm, r, limit| {
            bm.next_readd(r, limit, true)
        })
    }

    /// The end of the run of rows from `from`, at most `max` of them, that a re-added member
    /// may miss (the rows [`Array::held_rows_from`] does not skip); `from` + `max` (within the
    /// array) without a re-add map.
    pub(crate) fn missed_rows_from(&self, from: u64, max: u64) -> u64 {
        self.region_run(from, max, true, |bm, r, limit| {
            bm.next_readd(r, limit, false)
        })
    }

    /// Bytes of the array's capacity in regions that hold data, and the capacity, when the
    /// array has a data map.
    pub fn data_map_usage(&self) -> Option<(u64, u64)> {
        let bm = self.bitmap.as_ref()?;
        let rows: u64 = bm
            .data_regions()?
            .into_iter()
            .map(|r| {
                let rows = self.region_rows(bm, r);
                rows.end - rows.start
            })
            .sum();
        Some((
            self.layout.logical_chunks(rows) * self.layout.chunk(),
            self.size,
        ))
    }

    /// Rows of the regions whose bit is set (what an unclean stop may have left inconsistent).
    pub fn dirty_rows(&self) -> Vec<Range<u64>> {
        match &self.bitmap {
            None => std::iter::once(0..self.data_rows).collect(),
            Some(bm) => bm
                .dirty_regions()
                .into_iter()
                .map(|r| self.region_rows(bm, r))
                .collect(),
        }
    }

    fn region_rows(&self, bm: &Bitmap, r: u64) -> Range<u64> {
        r * bm.geo.region_rows..((r + 1) * bm.geo.region_rows).min(self.data_rows)
    }

    /// The bitmap's rows per region, if the array has a bitmap.
    pub fn bitmap_region_rows(&self) -> Option<u64> {
        self.bitmap.as_ref().map(|b| b.geo.region_rows)
    }
}
