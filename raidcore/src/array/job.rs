//! The engine's job API: the one door through which the drivers in `jobs/` (rebuild, replace,
//! scrub, resync) reach an array. They plan passes, move and record checkpoints, pace
//! themselves and report; every read or write of a member cell, and every checksum entry, is
//! the engine's, done here by the row work of `refill.rs` and `check.rs` through the row
//! executor (`row.rs`). `jobs/` imports nothing else of `array/`, and calls on [`Array`] only
//! the methods [`DRIVER_METHODS`] lists (the test below holds it to that).

use std::sync::atomic::Ordering;

use super::Array;

pub(crate) use super::check::{
    check_tables, halted as scrub_halted, repair_tables, report_listed_losses,
    run_rows as scrub_rows,
};
pub use super::check::{Mode, Problem, ScrubOptions, ScrubReport};
pub(crate) use super::health::ScrubRecord;
pub use super::now_secs;
pub use super::pace::DEFAULT_MIN_RATE;
pub(crate) use super::pace::{batch_rows, BatchPace, RateLimit, SLOW_BATCH};
pub(crate) use super::refill::{
    fill_batch as rebuild_batch, make_targets_durable, poison as settle_rebuilt, read_for_replace,
    refresh_replace_targets, write_rebuilt, write_replace_batch, zero_targets, Damage,
};
pub(crate) use super::{RowGuard, Target, TargetKind};

/// The methods of [`Array`] a driver may call besides the functions above: geometry, the job
/// slot, the row locks, the maps that say which rows to skip, the targets' lifecycle, the
/// superblocks, events and the scrub record. None of them reads or writes a member cell.
pub const DRIVER_METHODS: &[&str] = &[
    "complete_target",
    "target_failure",
    "data_rows_from",
    "empty_rows_from",
    "event",
    "flush",
    "held_rows_from",
    "is_writable",
    "job_slot",
    "layout",
    "missed_rows_from",
    "pending_targets",
    "persist",
    "promote_spares",
    "replace_source_lost",
    "requests_served",
    "resync_settled",
    "row_locks",
    "rows",
    "scrub_record",
    "set_scrub_record",
    "slot_readding",
    "slot_target",
];

impl Array {
    /// Why the targets of `slots` that are no longer attached failed, one line each (the
    /// device, the operation and offset where it failed), for the error a pass stops with:
    /// the reason is otherwise only in the event log, and a later `status` reads the failed
    /// device as merely stale.
    pub(crate) fn target_failure(&self, slots: &[usize]) -> String {
        let why: Vec<String> = slots
            .iter()
            .filter_map(|&s| {
                let reason = self.slots[s].reason.lock().expect("reason lock").clone();
                reason.map(|r| format!("slot {s}: {r}"))
            })
            .collect();
        if why.is_empty() {
            "the target was detached (see status)".into()
        } else {
            why.join("; ")
        }
    }
}

impl Target {
    /// Moves the in-memory checkpoint to `row` (never back). Call with rows up to `row`
    /// written to the target and still locked.
    pub(crate) fn move_checkpoint(&self, row: u64) {
        self.checkpoint.fetch_max(row, Ordering::AcqRel);
    }

    /// Rows below this are in sync and flushed (what the superblocks record).
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// A pass starts from the durable checkpoint: rows past it are redone.
    pub(crate) fn redo_from_durable(&self) {
        self.checkpoint.store(self.durable(), Ordering::Release);
    }

    /// The slot's own member come back (re-add).
    pub(crate) fn is_readd(&self) -> bool {
        self.readd
    }

    /// Rebuild or replace.
    pub(crate) fn kind(&self) -> TargetKind {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::DRIVER_METHODS;

    /// The drivers' sources, as the compiler sees them.
    const DRIVERS: &[(&str, &str)] = &[
        ("jobs/mod.rs", include_str!("../jobs/mod.rs")),
        ("jobs/rebuild.rs", include_str!("../jobs/rebuild.rs")),
        ("jobs/scrub.rs", include_str!("../jobs/scrub.rs")),
    ];

    /// Calls `NAME(` on a receiver named `array` in `src`.
    fn array_calls(src: &str) -> Vec<String> {
        let mut calls = Vec::new();
        for (i, _) in src.match_indices("array") {
            let before = src[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = src[i + "array".len()..].trim_start();
            let Some(rest) = rest.strip_prefix('.') else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if rest[name.len()..].starts_with('(') {
                calls.push(name);
            }
        }
        calls
    }

    /// jobs/ reaches the engine through this module only: no other path into `array/`, and no
    /// method of the array beyond the drivers' list (member I/O, checksum entries and row work
    /// are the engine's: issue 31, one row executor).
    #[test]
    fn jobs_use_the_job_api_only() {
        for (file, src) in DRIVERS {
            for line in src.lines().filter(|l| l.contains("crate::array::")) {
                let line = line.trim();
                let ok = line.starts_with("use crate::array::job::")
                    || line.starts_with("pub use crate::array::job::")
                    || line == "use crate::array::Array;";
                assert!(ok, "{file} reaches into array/ past the job API: {line}");
            }
            for name in array_calls(src) {
                assert!(
                    DRIVER_METHODS.contains(&name.as_str()),
                    "{file} calls array.{name}(), which is not in the job API"
                );
            }
            // A target's device and checkpoints only through the job API's methods.
            for field in ["dev", "checkpoint", "durable", "readd", "kind"] {
                for (i, _) in src.match_indices(&format!(".{field}")) {
                    let after = src[i + 1 + field.len()..].chars().next();
                    assert!(
                        after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '('),
                        "{file} reads a target's field .{field} past the job API"
                    );
                }
            }
        }
    }

    /// The check above sees calls: a member read written into a driver is found.
    #[test]
    fn the_job_api_check_finds_a_member_read() {
        let calls = array_calls("let x = pass.array.member_read(slot, buf);\narray .rows()");
        assert_eq!(calls, ["member_read", "rows"]);
        assert!(!DRIVER_METHODS.contains(&"member_read"));
    }
}
