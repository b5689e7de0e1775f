//! Writes not yet durable, row by row: the rows requests are writing now, and the rows that
//! completed writes changed since the last flush began. A member failure asks which rows are
//! at risk (a crash before they are durable can leave them torn, with the failed member's data
//! no longer computable from them) and gets a fence; a flush tells which fences are passed.
//!
//! Epochs: a counter bumped at every flush start and every fence. A write is tagged with the
//! epoch it began in (while in flight) and with the epoch it completed in (once done). A flush
//! that began at epoch `e` makes durable every write that completed at `e` or before; the rows
//! of a fence `f` (writes begun at `f` or before) are durable after a flush that began when
//! none of them was in flight any more. So a busy array clears its suspect rows at the first
//! flush after the writes caught by the failure finish, whatever else is in flight (before
//! this, suspect rows were whole bitmap regions cleared only at a flush that found no write in
//! flight anywhere in them, which a busy array never reached: issue 31, bug 3).
//!
//! Lock: one mutex, a leaf, held only to update the lists (never across I/O).

use std::ops::Range;

use crate::sync::Mutex;

/// At most this many row ranges are kept per completed epoch; past it the two nearest merge
/// (a wider set only delays nothing and loses nothing: it is a superset of the rows at risk).
const MAX_RANGES: usize = 4096;

#[derive(Default)]
struct State {
    epoch: u64,
    next_id: u64,
    /// (id, epoch begun, rows) of every write in flight.
    inflight: Vec<(u64, u64, Range<u64>)>,
    /// (epoch completed, rows, merged and sorted) of writes done but maybe not durable.
    completed: Vec<(u64, Vec<Range<u64>>)>,
}

#[derive(Default)]
pub(crate) struct Unflushed {
    st: Mutex<State>,
}

/// A write in flight; its rows move to the completed list when it is dropped.
pub(crate) struct WriteTicket<'a> {
    owner: &'a Unflushed,
    id: u64,
}

impl Drop for WriteTicket<'_> {
    fn drop(&mut self) {
        self.owner.end(self.id);
    }
}

/// What a flush noted at its start: see [`Unflushed::flush_done`].
pub(crate) struct FlushMark {
    /// Writes completed at this epoch or before are durable when the flush is done.
    done_upto: u64,
    /// Fences below this are durable when the flush is done (no write begun at or before them
    /// was in flight at the flush's start).
    fences_below: u64,
}

impl Unflushed {
    /// Registers a write of `rows`, in flight until the ticket is dropped.
    pub(crate) fn begin(&self, rows: Range<u64>) -> WriteTicket<'_> {
        let mut st = self.st.lock().expect("unflushed lock");
        let id = st.next_id;
        st.next_id += 1;
        let e = st.epoch;
        st.inflight.push((id, e, rows));
        WriteTicket { owner: self, id }
    }

    fn end(&self, id: u64) {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = st.inflight.iter().position(|w| w.0 == id) else {
            return;
        };
        let (_, _, rows) = st.inflight.swap_remove(p);
        let e = st.epoch;
        match st.completed.last_mut() {
            Some((le, list)) if *le == e => add(list, rows),
            _ => st.completed.push((e, vec![rows])),
        }
    }

    /// The rows a crash could leave torn now (writes in flight, and writes completed since the
    /// last flush began), and a fence: once [`Unflushed::flush_done`] reports it passed, they
    /// are durable.
    pub(crate) fn at_risk(&self) -> (Vec<Range<u64>>, u64) {
        let mut st = self.st.lock().expect("unflushed lock");
        let mut rows: Vec<Range<u64>> = Vec::new();
        for (_, _, r) in &st.inflight {
            add(&mut rows, r.clone());
        }
        for (_, l) in &st.completed {
            for r in l {
                add(&mut rows, r.clone());
            }
        }
        let fence = st.epoch;
        st.epoch += 1;
        (rows, fence)
    }

    /// Called before a flush issues its member flushes.
    pub(crate) fn flush_begin(&self) -> FlushMark {
        let mut st = self.st.lock().expect("unflushed lock");
        let e = st.epoch;
        st.epoch += 1;
        let oldest = st.inflight.iter().map(|w| w.1).min().unwrap_or(e + 1);
        FlushMark {
            done_upto: e,
            fences_below: oldest,
        }
    }

    /// Called once the flush begun with `mark` completed on every member: forgets the writes
    /// it made durable. Returns the bound below which fences are passed.
    pub(crate) fn flush_done(&self, mark: &FlushMark) -> u64 {
        let mut st = self.st.lock().expect("unflushed lock");
        st.completed.retain(|(e, _)| *e > mark.done_upto);
        mark.fences_below
    }
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
        let k = (1..list.len())
            .min_by_key(|&k| list[k].start - list[k - 1].end)
            .expect("more than one range");
        list[k - 1].end = list[k].end;
        list.remove(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_at_risk_are_the_writes_in_flight_and_those_completed_since_the_last_flush() {
        let u = Unflushed::default();
        let a = u.begin(0..2);
        drop(a);
        let m = u.flush_begin();
        let b = u.begin(10..11);
        u.flush_done(&m);
        // 0..2 completed before the flush began: durable.
        assert_eq!(u.at_risk().0, vec![10..11]);
        drop(b);
        let c = u.begin(4..5);
        assert_eq!(u.at_risk().0, vec![4..5, 10..11]);
        drop(c);
        let m = u.flush_begin();
        u.flush_done(&m);
        assert!(u.at_risk().0.is_empty());
    }

    #[test]
    fn a_fence_passes_at_the_first_flush_after_its_writes_finish_despite_later_writes() {
        let u = Unflushed::default();
        let old = u.begin(0..1);
        let (rows, fence) = u.at_risk();
        assert_eq!(rows, vec![0..1]);
        let later = u.begin(5..6);
        // The write caught by the fence is still in flight: not passed.
        let m = u.flush_begin();
        assert!(u.flush_done(&m) <= fence);
        drop(old);
        // A later write still in flight does not hold the fence back.
        let m = u.flush_begin();
        assert!(u.flush_done(&m) > fence);
        drop(later);
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
