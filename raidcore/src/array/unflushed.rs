//! Writes not yet durable, and the suspect blocks of failed members: the member blocks that
//! requests are writing now, and those that completed writes changed since the last flush
//! began. When a member fails, those become its suspect blocks (a crash before they are
//! durable can leave them torn, with the failed member's data no longer computable from them);
//! each leaves the record at the first flush that begins after its write completed.
//!
//! Units: 4 KiB member blocks, numbered as the bad-block list numbers them (row x blocks per
//! chunk + block within the chunk), one number for the same column of every member of a row.
//! A write of a parity row puts at risk the columns of its parity span only (simulator seeds
//! 50 and 1080: a crash listed a lost member's whole row where a small write had cut one
//! column).
//!
//! Epochs: a counter bumped at every flush start. A write completed at epoch `c` is durable
//! once a flush that began at epoch `c` or later (bumping it) has completed. Before this,
//! suspect rows were whole bitmap regions, dropped only by a flush that began with no write in
//! flight anywhere in them, which a busy array never reached, so a crash seconds after a
//! member failure listed its whole data area as lost though every byte had been flushed
//! (issue 31, bug 3).
//!
//! The gate (issue 31: a member lost with a power cut): a flush closes it, waits until no
//! write is in flight, has the checksum stores note where the flush's records end (their
//! "cut"), and opens it again. Request writes and trims wait at the gate before they begin
//! (before any row lock), so every record of a write lands on the same side of every store's
//! cut: a flush's log pages hold all of the records of the writes it covers, and none of the
//! others (csum.rs, epochs). Writes that begin inside another's hold (a stripe-cache destage
//! from a write's eviction) and repair writes pass the gate; the drain waits for them too, and
//! once it is done no write of any kind begins until the cuts are made.
//!
//! Lock: one mutex, a leaf, held only to update the lists (never across I/O); the condition
//! variable wakes the gate's waiters and the drain.

use std::ops::Range;

use crate::sync::{Condvar, Mutex};

/// At most this many block ranges are kept per completed epoch; past it the list halves,
/// merging across its smallest gaps (a superset of the blocks at risk: it can list more,
/// never less).
const MAX_RANGES: usize = 1024;

/// Suspect blocks of one slot from one write (or one epoch's completed writes).
struct Suspect {
    slot: usize,
    rows: Vec<Range<u64>>,
    /// The write still in flight, or the epoch its rows completed in.
    until: Until,
}

#[derive(Clone, Copy, PartialEq)]
enum Until {
    Write(u64),
    Completed(u64),
}

#[derive(Default)]
struct State {
    epoch: u64,
    next_id: u64,
    /// (id, blocks not settled by the journal) of every write in flight.
    inflight: Vec<(u64, Vec<Range<u64>>)>,
    /// (epoch completed, blocks, merged and sorted) of writes done but maybe not durable.
    completed: Vec<(u64, Vec<Range<u64>>)>,
    suspects: Vec<Suspect>,
    /// A flush is draining the writes in flight: gated writes wait.
    gate: bool,
    /// The drain is done and the flush is cutting the checksum logs: every write waits, those
    /// that pass the gate too (a destage begun by another flush's write-back then would put
    /// records on both sides of the cuts; an outside review).
    cutting: bool,
}

#[derive(Default)]
pub(crate) struct Unflushed {
    st: Mutex<State>,
    /// Signalled when a write ends and when the gate opens.
    moved: Condvar,
}

/// The closed gate of a flush's drain ([`Unflushed::drain`]); it opens when dropped.
pub(crate) struct Drained<'a>(&'a Unflushed);

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        let mut st = self.0.st.lock().unwrap_or_else(|e| e.into_inner());
        st.gate = false;
        st.cutting = false;
        drop(st);
        self.0.moved.notify_all();
    }
}

/// A write in flight; its rows move to the completed list when it is dropped.
pub(crate) struct WriteTicket<'a> {
    owner: &'a Unflushed,
    id: u64,
}

impl WriteTicket<'_> {
    /// See [`Unflushed::settle`].
    pub(crate) fn settle(&self, blocks: Range<u64>) -> bool {
        self.owner.settle(self.id, blocks)
    }
}

impl Drop for WriteTicket<'_> {
    fn drop(&mut self) {
        self.owner.end(self.id);
    }
}

/// What a flush noted at its start: writes completed at this epoch or before are durable when
/// the flush is done.
pub(crate) struct FlushMark(u64);

impl Unflushed {
    /// Registers a write of `blocks`, in flight until the ticket is dropped; with `gated`,
    /// once no flush is draining (a request's own write: see the module's gate).
    pub(crate) fn begin(
        &self,
        blocks: impl IntoIterator<Item = Range<u64>>,
        gated: bool,
    ) -> WriteTicket<'_> {
        let mut st = self.st.lock().expect("unflushed lock");
        while (gated && st.gate) || st.cutting {
            st = self.moved.wait(st, &self.st).expect("unflushed lock");
        }
        let id = st.next_id;
        st.next_id += 1;
        let mut list = Vec::new();
        for r in blocks {
            add(&mut list, r);
        }
        st.inflight.push((id, list));
        WriteTicket { owner: self, id }
    }

    /// Blocks `blocks` (a row's) of the write `id` went through the write-hole journal, whose
    /// clear flushed every member first: all new and durable, they are at risk no longer,
    /// neither as the write's own nor as suspect blocks it gave a member failure that caught it
    /// in flight. Returns whether that changed the suspect blocks.
    fn settle(&self, id: u64, blocks: Range<u64>) -> bool {
        let mut st = self.st.lock().expect("unflushed lock");
        if let Some(w) = st.inflight.iter_mut().find(|w| w.0 == id) {
            w.1 = subtract(&w.1, &blocks);
        }
        let mut changed = false;
        for s in st
            .suspects
            .iter_mut()
            .filter(|s| s.until == Until::Write(id))
        {
            if s.rows
                .iter()
                .any(|r| r.start < blocks.end && blocks.start < r.end)
            {
                s.rows = subtract(&s.rows, &blocks);
                changed = true;
            }
        }
        st.suspects.retain(|s| !s.rows.is_empty());
        changed
    }

    fn end(&self, id: u64) {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = st.inflight.iter().position(|w| w.0 == id) else {
            return;
        };
        let (_, left) = st.inflight.swap_remove(p);
        if st.gate && st.inflight.is_empty() {
            self.moved.notify_all();
        }
        let e = st.epoch;
        if !left.is_empty() {
            if !matches!(st.completed.last(), Some((le, _)) if *le == e) {
                st.completed.push((e, Vec::new()));
            }
            let list = &mut st.completed.last_mut().expect("pushed").1;
            for r in left {
                add(list, r);
            }
        }
        for s in &mut st.suspects {
            if s.until == Until::Write(id) {
                s.until = Until::Completed(e);
            }
        }
    }

    /// `slot`'s member failed: every block a crash could leave torn now (writes in flight,
    /// and writes completed since the last flush began) becomes its suspect, with `extra`
    /// blocks (durable after the next flush).
    pub(crate) fn fail(&self, slot: usize, extra: Vec<Range<u64>>) {
        let mut st = self.st.lock().expect("unflushed lock");
        let e = st.epoch;
        let mut new: Vec<Suspect> = st
            .inflight
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(id, l)| Suspect {
                slot,
                rows: l.clone(),
                until: Until::Write(*id),
            })
            .chain(st.completed.iter().map(|(c, l)| Suspect {
                slot,
                rows: l.clone(),
                until: Until::Completed(*c),
            }))
            .collect();
        let mut rest = Vec::new();
        for r in extra {
            add(&mut rest, r);
        }
        if !rest.is_empty() {
            new.push(Suspect {
                slot,
                rows: rest,
                until: Until::Completed(e),
            });
        }
        st.suspects.extend(new);
    }

    /// Every slot's suspect blocks (`slots` lists), merged.
    pub(crate) fn suspects(&self, slots: usize) -> Vec<Vec<Range<u64>>> {
        let st = self.st.lock().expect("unflushed lock");
        let mut out = vec![Vec::new(); slots];
        for s in &st.suspects {
            if let Some(l) = out.get_mut(s.slot) {
                for r in &s.rows {
                    add(l, r.clone());
                }
            }
        }
        out
    }

    /// Closes the gate and waits until no write is in flight (those that began before, and
    /// those that pass the gate meanwhile); then no write begins at all, gated or not, until
    /// the guard is dropped (the flush cuts the logs meanwhile) and the gate opens. The
    /// caller must hold no write of its own, and flushes take turns (one drain at a time).
    pub(crate) fn drain(&self) -> Drained<'_> {
        let mut st = self.st.lock().expect("unflushed lock");
        st.gate = true;
        while !st.inflight.is_empty() {
            st = self.moved.wait(st, &self.st).expect("unflushed lock");
        }
        st.cutting = true;
        Drained(self)
    }

    /// Called before a flush issues its member flushes.
    pub(crate) fn flush_begin(&self) -> FlushMark {
        let mut st = self.st.lock().expect("unflushed lock");
        let e = st.epoch;
        st.epoch += 1;
        FlushMark(e)
    }

    /// Called once the flush begun with `mark` completed on every member: forgets the writes
    /// and suspect rows it made durable. Returns whether any suspect rows were dropped.
    pub(crate) fn flush_done(&self, mark: &FlushMark) -> bool {
        let mut st = self.st.lock().expect("unflushed lock");
        st.completed.retain(|(e, _)| *e > mark.0);
        let before = st.suspects.len();
        st.suspects
            .retain(|s| !matches!(s.until, Until::Completed(c) if c <= mark.0));
        st.suspects.len() != before
    }

    /// Forgets every suspect (a clean close: everything is durable).
    pub(crate) fn clear_suspects(&self) {
        self.st.lock().expect("unflushed lock").suspects.clear();
    }
}

/// `list` without `cut`.
fn subtract(list: &[Range<u64>], cut: &Range<u64>) -> Vec<Range<u64>> {
    let mut out = Vec::with_capacity(list.len() + 1);
    for r in list {
        if r.start < cut.end && cut.start < r.end {
            out.extend(
                [r.start..cut.start, cut.end..r.end]
                    .into_iter()
                    .filter(|x| !x.is_empty()),
            );
        } else {
            out.push(r.clone());
        }
    }
    out
}

/// Adds `r` to a sorted list of disjoint ranges, merging, and keeps it within [`MAX_RANGES`].
fn add(list: &mut Vec<Range<u64>>, r: Range<u64>) {
    if r.is_empty() {
        return;
    }
    let i = list.partition_point(|x| x.end < r.start);
    let mut j = i;
    let mut m = r;
    while j < list.len() && list[j].start <= m.end {
        m.start = m.start.min(list[j].start);
        m.end = m.end.max(list[j].end);
        j += 1;
    }
    list.splice(i..j, std::iter::once(m));
    if list.len() > MAX_RANGES {
        // Halve it: merge across every gap up to the median one (a superset). One pass per
        // MAX_RANGES / 2 additions, where merging the nearest two on every addition past the
        // bound scanned the whole list each time: with 4 KiB blocks rather than rows, random
        // writes between flushes kept the list at the bound.
        let mut gaps: Vec<u64> = list.windows(2).map(|w| w[1].start - w[0].end).collect();
        let k = gaps.len() / 2;
        let cut = *gaps.select_nth_unstable(k).1;
        let mut out: Vec<Range<u64>> = Vec::with_capacity(MAX_RANGES);
        let mut merged = 0;
        for r in list.drain(..) {
            match out.last_mut() {
                Some(l) if r.start - l.end <= cut && merged <= k => {
                    l.end = r.end;
                    merged += 1;
                }
                _ => out.push(r),
            }
        }
        *list = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::iter::once;

    /// Once a flush's drain is done, even a write that passes the gate (a destage, a repair)
    /// waits until the flush has cut the checksum logs: begun between two stores' cuts, its
    /// records would lie on both sides of the flush (the `cutting` state; a mutant without it
    /// survived the rest of the suite).
    #[test]
    fn a_write_that_passes_the_gate_still_waits_while_a_flush_cuts_the_logs() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let u = Unflushed::default();
        let began = AtomicBool::new(false);
        let cut = u.drain();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let t = u.begin(once(0..1), false);
                began.store(true, Ordering::SeqCst);
                drop(t);
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                !began.load(Ordering::SeqCst),
                "a write began while the flush was cutting the logs"
            );
            drop(cut);
            h.join().expect("writer");
        });
        assert!(began.load(Ordering::SeqCst));
        // And the drain waits for a write that passed the gate before it closed.
        let t = u.begin(once(2..3), false);
        std::thread::scope(|s| {
            let h = s.spawn(|| drop(u.drain()));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!h.is_finished(), "the drain ended with a write in flight");
            drop(t);
            h.join().expect("drain");
        });
    }

    #[test]
    fn a_failure_suspects_the_writes_in_flight_and_those_completed_since_the_last_flush() {
        let u = Unflushed::default();
        drop(u.begin(once(0..2), false));
        let m = u.flush_begin();
        let b = u.begin(once(10..11), false);
        u.flush_done(&m);
        drop(u.begin(once(4..5), false));
        // 0..2 completed before the flush began: durable, never suspect.
        u.fail(1, Vec::new());
        assert_eq!(u.suspects(3), vec![vec![], vec![4..5, 10..11], vec![]]);
        drop(b);
        let m = u.flush_begin();
        assert!(u.flush_done(&m));
        assert_eq!(u.suspects(3), vec![Vec::<Range<u64>>::new(); 3]);
    }

    #[test]
    fn each_write_leaves_the_record_at_the_first_flush_after_it_completed() {
        let u = Unflushed::default();
        let early = u.begin(once(0..1), false);
        let slow = u.begin(once(7..8), false);
        u.fail(2, Vec::new());
        drop(early);
        // A write caught by the failure still in flight keeps only its own rows suspect.
        let m = u.flush_begin();
        assert!(u.flush_done(&m));
        assert_eq!(u.suspects(3)[2], vec![7..8]);
        // It completes during a flush that began before: that flush does not cover it.
        let m = u.flush_begin();
        drop(slow);
        assert!(!u.flush_done(&m));
        assert_eq!(u.suspects(3)[2], vec![7..8]);
        // Writes begun after the failure are not its suspects.
        let later = u.begin(once(20..21), false);
        let m = u.flush_begin();
        assert!(u.flush_done(&m));
        assert!(u.suspects(3)[2].is_empty());
        drop(later);
    }

    /// Mutation gaps (issue 31): a write that completed after a flush began was merged into
    /// the older epoch's list (`end`'s epoch guard made true), or every completed list was
    /// dropped by a flush (`flush_done`'s comparison reversed): either way a write not yet
    /// durable was no longer suspect when a member failed.
    #[test]
    fn a_write_completed_after_a_flush_began_stays_suspect_after_that_flush() {
        let u = Unflushed::default();
        drop(u.begin(once(0..1), false));
        let m = u.flush_begin();
        drop(u.begin(once(10..11), false));
        assert!(!u.flush_done(&m));
        u.fail(0, Vec::new());
        assert_eq!(u.suspects(1), vec![vec![10..11]]);
        // The next flush makes it durable.
        let m = u.flush_begin();
        assert!(u.flush_done(&m));
        assert_eq!(u.suspects(1), vec![Vec::<Range<u64>>::new()]);
    }

    /// Mutation gap (issue 31): the extra rows of a failure (dirty regions recorded before
    /// the array was opened) were never made suspect when the check was reversed.
    #[test]
    fn a_failure_suspects_its_extra_rows_until_the_next_flush() {
        let u = Unflushed::default();
        u.fail(1, vec![30..32, 5..7, 6..8]);
        assert_eq!(u.suspects(2), vec![vec![], vec![5..8, 30..32]]);
        let m = u.flush_begin();
        assert!(u.flush_done(&m));
        assert_eq!(u.suspects(2), vec![Vec::<Range<u64>>::new(); 2]);
    }

    /// Simulator seed 1080: a row written through the write-hole journal is durable when its
    /// write returns from it, and leaves the rows a member failure suspects, in flight or done.
    #[test]
    fn a_journaled_row_is_never_suspect() {
        let u = Unflushed::default();
        let w = u.begin(once(0..3), false);
        u.fail(0, Vec::new());
        assert!(w.settle(1..2), "the failure's suspect blocks shrink");
        u.fail(1, Vec::new());
        assert_eq!(u.suspects(2), vec![vec![0..1, 2..3], vec![0..1, 2..3]]);
        drop(w);
        let done = u.begin(once(5..6), false);
        assert!(!done.settle(5..6), "no suspect blocks");
        drop(done);
        u.fail(1, Vec::new());
        assert_eq!(u.suspects(2)[1], vec![0..1, 2..3]);
    }

    #[test]
    fn the_list_stays_bounded_and_only_widens() {
        let mut l = Vec::new();
        for i in 0..(MAX_RANGES as u64 + 100) {
            add(&mut l, i * 3..i * 3 + 1);
        }
        assert!(l.len() <= MAX_RANGES);
        for i in 0..(MAX_RANGES as u64 + 100) {
            assert!(l.iter().any(|r| r.start <= i * 3 && i * 3 < r.end));
        }
        assert!(l.windows(2).all(|w| w[0].end < w[1].start));
    }
}
