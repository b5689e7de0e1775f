//! Events an array reports to whoever runs it (the daemon, an offline command): members failing,
//! the array degrading or failing, blocks going on the bad-block list. raidcore hands each one
//! to the process's event sink ([`set_sink`]; raidctl logs it and `raidctl monitor` acts on
//! it); without a sink they are dropped. The sink runs on the thread that raised the event,
//! possibly under that thread's row locks: it must be quick and never call into an array.

use std::sync::OnceLock;

use super::{Array, ArrayState};

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub array_uuid: [u8; 16],
    pub array_name: String,
    /// "member-failed", "degraded", "array-failed", "bad-blocks".
    pub kind: &'static str,
    pub slot: Option<usize>,
    /// The member device's path, when one is concerned.
    pub member: Option<String>,
    pub detail: String,
}

type Sink = Box<dyn Fn(&Event) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();

/// Sets where every array of this process sends its events (once per process).
pub fn set_sink(f: impl Fn(&Event) + Send + Sync + 'static) {
    let _ = SINK.set(Box::new(f));
}

impl Array {
    /// Raises an event.
    pub(crate) fn event(&self, kind: &'static str, slot: Option<usize>, detail: String) {
        let Some(sink) = SINK.get() else { return };
        // The slot's member, or the device being rebuilt into it.
        let member = slot.map(|s| match self.slots[s].target() {
            Some(t) if self.slots[s].usable().is_none() => t.dev.path.display().to_string(),
            _ => self.slot_path(s),
        });
        let (array_uuid, array_name) = {
            let m = self.meta.lock().expect("meta lock");
            (m.array_uuid, m.name.clone())
        };
        sink(&Event {
            array_uuid,
            array_name,
            kind,
            slot,
            member,
            detail,
        });
    }

    /// After a member left service: the state it leaves the array in, as an event.
    pub(crate) fn event_state(&self) {
        match self.state() {
            ArrayState::Failed => self.event(
                "array-failed",
                None,
                "more members are unavailable than the level tolerates; reads and writes fail"
                    .into(),
            ),
            ArrayState::Degraded => self.event(
                "degraded",
                None,
                "the array runs without full redundancy until a member is added or replaced".into(),
            ),
            _ => {}
        }
    }

    /// Raises an event from outside raidcore (a job's start or end, a scrub's result), with
    /// the array's identity filled in.
    pub fn raise(&self, kind: &'static str, slot: Option<usize>, detail: String) {
        self.event(kind, slot, detail);
    }
}
