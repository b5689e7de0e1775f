//! Write-hole closure for parity levels: while a row is degraded, a partial-row write first
//! logs the final contents of every cell it changes (data and parity, over the written span)
//! to a one-entry journal in the metadata area of every present member, flushed, then writes in
//! place, flushes every member, then clears the entry (flushed). After a crash the entry is
//! replayed, so the row is either all old or all new and the missing member stays
//! reconstructable. Non-degraded writes are not journaled (a torn row is resynced from the
//! write-intent bitmap instead). Geometry: compatible feature [`FEATURE_JOURNAL`], superblock
//! extension [`JOURNAL_TAG`].

use std::sync::atomic::Ordering;

use super::{Array, Verified, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::format::{Extension, Superblock};

pub const JOURNAL_TAG: u32 = crate::format::feature::TAG_JOURNAL;
pub const FEATURE_JOURNAL: u64 = crate::format::feature::JOURNAL;
const MAGIC: &[u8; 8] = b"RDJOURNL";
const HEADER: usize = 4096;
const HASH_AT: usize = HEADER - 32;
/// The array's uuid in an entry (zero in entries written before it was recorded: accepted).
const ARRAY_AT: usize = HASH_AT - 16;

/// Where the journal lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalGeometry {
    pub offset: u64,
    pub bytes: u64,
}

impl JournalGeometry {
    /// One entry: a header block and one chunk per member; after `after` (the bitmap's end).
    pub fn plan(after: u64, members: u64, chunk: u64, data_offset: u64) -> Option<JournalGeometry> {
        let offset = after.div_ceil(4096) * 4096;
        let bytes = HEADER as u64 + members * chunk;
        (offset + bytes <= data_offset).then_some(JournalGeometry { offset, bytes })
    }

    pub fn to_extension(self) -> Extension {
        let mut data = self.offset.to_le_bytes().to_vec();
        data.extend_from_slice(&self.bytes.to_le_bytes());
        Extension {
            tag: JOURNAL_TAG,
            data,
        }
    }

    pub fn from_superblock(sb: &Superblock) -> Option<JournalGeometry> {
        Self::parse(sb).ok().flatten()
    }

    /// The journal recorded in a superblock: None without the feature; an error when the
    /// feature bit is set and the record is missing or does not fit (checked arithmetic).
    pub fn parse(sb: &Superblock) -> crate::error::Result<Option<JournalGeometry>> {
        if sb.compat_features & FEATURE_JOURNAL == 0 {
            return Ok(None);
        }
        let bad = |why: String| {
            crate::error::Error::new(
                crate::error::ErrorKind::Corrupt,
                format!("write-hole journal record: {why}"),
            )
        };
        let e = sb
            .extensions
            .iter()
            .find(|e| e.tag == JOURNAL_TAG)
            .ok_or_else(|| bad("feature bit set but no record".into()))?;
        if e.data.len() != 16 {
            return Err(bad(format!("{} bytes, not 16", e.data.len())));
        }
        let g = JournalGeometry {
            offset: u64::from_le_bytes(e.data[..8].try_into().expect("8 bytes")),
            bytes: u64::from_le_bytes(e.data[8..].try_into().expect("8 bytes")),
        };
        // One entry: a header and one chunk per member, as create lays it out.
        let need = (sb.layout.members as u64)
            .checked_mul(sb.layout.chunk_bytes)
            .and_then(|x| x.checked_add(HEADER as u64));
        let fits = g.offset.is_multiple_of(4096)
            && g.offset >= crate::format::METADATA_OFFSET
            && g.offset
                .checked_add(g.bytes)
                .is_some_and(|end| end <= sb.data_offset)
            && need.is_some_and(|n| g.bytes >= n && g.bytes <= n + 4096);
        if !fits {
            return Err(bad(format!(
                "offset {}, {} bytes do not fit the metadata area and the layout",
                g.offset, g.bytes
            )));
        }
        Ok(Some(g))
    }
}

/// A decoded entry: row, span start, span length, and (slot, image) pairs.
struct Entry {
    row: u64,
    within: u64,
    cells: Vec<(usize, Vec<u8>)>,
}

fn encode(seq: u64, array: &[u8; 16], e: &Entry) -> Vec<u8> {
    let len = e.cells.first().map(|c| c.1.len()).unwrap_or(0);
    let mut out = vec![0u8; HEADER + e.cells.len() * len];
    out[..8].copy_from_slice(MAGIC);
    out[8..16].copy_from_slice(&seq.to_le_bytes());
    out[16..24].copy_from_slice(&e.row.to_le_bytes());
    out[24..32].copy_from_slice(&e.within.to_le_bytes());
    out[32..40].copy_from_slice(&(len as u64).to_le_bytes());
    out[40..44].copy_from_slice(&(e.cells.len() as u32).to_le_bytes());
    for (i, (slot, img)) in e.cells.iter().enumerate() {
        out[44 + i * 4..48 + i * 4].copy_from_slice(&(*slot as u32).to_le_bytes());
        out[HEADER + i * len..HEADER + (i + 1) * len].copy_from_slice(img);
    }
    out[ARRAY_AT..HASH_AT].copy_from_slice(array);
    let mut h = blake3::Hasher::new();
    h.update(&out[..HASH_AT]);
    h.update(&out[HEADER..]);
    let hash = h.finalize();
    out[HASH_AT..HEADER].copy_from_slice(hash.as_bytes());
    out
}

fn decode(raw: &[u8], slots: usize, array: &[u8; 16]) -> Option<Entry> {
    if &raw[..8] != MAGIC {
        return None;
    }
    let owner = &raw[ARRAY_AT..HASH_AT];
    if owner != array && owner.iter().any(|&b| b != 0) {
        return None; // another array's entry
    }
    let u = |a: usize| u64::from_le_bytes(raw[a..a + 8].try_into().expect("8 bytes"));
    let (row, within, len) = (u(16), u(24), u(32) as usize);
    let count = u32::from_le_bytes(raw[40..44].try_into().expect("4 bytes")) as usize;
    // (Checked: a forged length whose product wraps would pass a plain bound and panic below.)
    let end = count.checked_mul(len).and_then(|b| b.checked_add(HEADER));
    if count == 0 || count > slots || 44 + count * 4 > ARRAY_AT || end.is_none_or(|e| e > raw.len())
    {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(&raw[..HASH_AT]);
    h.update(&raw[HEADER..HEADER + count * len]);
    if h.finalize().as_bytes() != &raw[HASH_AT..HEADER] {
        return None;
    }
    let cells = (0..count)
        .map(|i| {
            let slot = u32::from_le_bytes(raw[44 + i * 4..48 + i * 4].try_into().expect("4 bytes"))
                as usize;
            (slot, raw[HEADER + i * len..HEADER + (i + 1) * len].to_vec())
        })
        .collect();
    Some(Entry { row, within, cells })
}

impl Array {
    /// Logs the final contents of `cells` (slot, image over `within..`) of `row`, durably, on
    /// every present member. Returns false when the array has no journal.
    pub(crate) fn journal_write(
        &self,
        row: u64,
        within: u64,
        cells: Vec<(usize, Vec<u8>)>,
    ) -> Result<bool> {
        let Some(g) = self.journal else {
            return Ok(false);
        };
        if !self.journal_enabled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let seq = self.journal_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let uuid = self.meta.lock().expect("meta lock").array_uuid;
        let raw = encode(seq, &uuid, &Entry { row, within, cells });
        let buf = AlignedBuf::from_slice(&raw[..raw.len().min(g.bytes as usize)]);
        self.journal_put(&buf, g.offset)?;
        Ok(true)
    }

    fn journal_put(&self, buf: &[u8], offset: u64) -> Result<()> {
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(d) = s.usable() {
                let r = d
                    .member
                    .write_at(buf, offset)
                    .and_then(|_| d.member.flush());
                match r {
                    Ok(()) => d.count(WriteKind::Metadata, buf.len() as u64),
                    Err(e) => {
                        d.write_error(&e);
                        self.fail_member(i, &format!("journal write failed: {e}"))?;
                    }
                }
            }
        }
        self.check_alive()
    }

    /// Marks the entry applied (durably, so it is never replayed over later writes). Every
    /// cell the entry logged is made durable first, on every member and on the rebuild and
    /// replace targets holding the row (data and checksum log), since once the entry is gone
    /// nothing would repeat them after a crash. Members' checksum logs included: without them
    /// a crash after the clear left the row's cells newer than their entries, which the resync
    /// of a degraded row cannot tell from rot. Without that first flush, clearing member by
    /// member (write, flush) made the first members' cleared entry durable while the last
    /// members' in-place cells were still in their caches: a crash could then keep a cleared
    /// entry everywhere and lose a parity cell, and the missing member's chunk reconstructed
    /// from new data and old parity (simulator seed 74646).
    pub(crate) fn journal_clear(&self) -> Result<()> {
        let Some(g) = self.journal else { return Ok(()) };
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(d) = s.usable() {
                if let Err(e) = self.csum_sync_dev(&d).and_then(|()| d.member.flush()) {
                    d.write_error(&e);
                    self.fail_member(i, &format!("flush failed: {e}"))?;
                }
            }
            if let Some(t) = s.target() {
                if let Err(e) = self
                    .csum_sync_dev(&t.dev)
                    .and_then(|()| t.dev.member.flush())
                {
                    t.dev.write_error(&e);
                    self.fail_target(i, &format!("flush failed: {e}"))?;
                }
            }
        }
        self.journal_put(&AlignedBuf::zeroed(HEADER), g.offset)
    }

    /// Replays a journal entry left by a crash (at writable assembly). Returns whether one was.
    pub fn journal_replay(&self) -> Result<bool> {
        let Some(g) = self.journal else {
            return Ok(false);
        };
        let mut raw = AlignedBuf::zeroed(g.bytes as usize);
        let uuid = self.meta.lock().expect("meta lock").array_uuid;
        let mut entry = None;
        for s in &self.slots {
            if let Some(d) = s.usable() {
                if d.member.read_at(&mut raw, g.offset).is_ok() {
                    if let Some(e) = decode(&raw, self.slots.len(), &uuid) {
                        entry = Some(e);
                        break;
                    }
                }
            }
        }
        let Some(e) = entry else { return Ok(false) };
        for (slot, img) in &e.cells {
            if *slot < self.slots.len() {
                self.repair_write(
                    *slot,
                    Verified::journal(img),
                    e.row,
                    e.within,
                    WriteKind::Parity,
                )?;
            }
        }
        // The clear makes the replayed cells durable before it removes the entry.
        self.journal_clear()?;
        Ok(true)
    }

    /// Turns the write-hole journal off (tests that reproduce the write hole).
    pub fn set_journal_enabled(&self, on: bool) {
        self.journal_enabled.store(on, Ordering::Relaxed);
    }

    /// Whether the array has a write-hole journal.
    pub fn has_journal(&self) -> bool {
        self.journal.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by a mutation run (`count * len` for `count + len` in `decode`'s bounds check
    /// survived the seed set): an entry whose header claims cells longer than the bytes read
    /// (a damaged or forged header with a valid magic) is no entry, never a panic of the
    /// assembly that replays it. Writing it found a real one: a length whose product with the
    /// count wrapped passed the bound and the slice after it panicked.
    #[test]
    fn an_entry_claiming_more_cell_bytes_than_were_read_is_refused_not_a_panic() {
        let uuid = [3u8; 16];
        let e = Entry {
            row: 7,
            within: 0,
            cells: vec![(0, vec![1u8; 4096]), (2, vec![2u8; 4096])],
        };
        let raw = encode(1, &uuid, &e);
        assert_eq!(raw.len(), HEADER + 2 * 4096);
        let back = decode(&raw, 3, &uuid).expect("the entry as written");
        assert_eq!((back.row, back.cells.len()), (7, 2));
        // Cells of 6,000 bytes: two of them pass the 8,192 read (their sum would not).
        let mut bad = raw.clone();
        bad[32..40].copy_from_slice(&6000u64.to_le_bytes());
        assert!(decode(&bad, 3, &uuid).is_none());
        // And a length that overflows when multiplied is refused too.
        bad[32..40].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        assert!(decode(&bad, 3, &uuid).is_none());
    }
}
