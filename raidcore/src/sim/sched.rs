//! The simulator's scheduler: actors are OS threads, but only the one holding the baton runs.
//! Every member I/O and every wait for an engine lock is a yield point where the seed picks
//! who runs next, so one seed replays one interleaving exactly. Time is virtual: it advances
//! by a seeded amount at every step and jumps forward when every actor sleeps.
//!
//! Lock order: the scheduler's own mutex is a leaf; it is never held while an actor runs
//! engine code.

use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::rng::SplitMix64;

/// Why a run was stopped by the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Abort {
    /// Every actor waits for a lock another one holds.
    Deadlock(String),
    /// The run took more steps than allowed (a livelock or a job that never ends).
    Steps(u64),
}

/// Panic payload used to unwind actors when the scheduler aborts a run.
pub struct Aborted;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wait {
    /// At a yield point, ready to run.
    Ready,
    /// Tried a lock another actor holds, at this step.
    Lock(u64),
    /// Sleeping until this virtual time.
    Until(Duration),
}

struct Actor {
    name: String,
    /// Row ranges held, and the one waited for (reports only).
    rows_held: Vec<std::ops::Range<u64>>,
    row_wanted: Option<std::ops::Range<u64>>,
    prio: u64,
    wait: Option<Wait>,
    done: bool,
}

struct St {
    actors: Vec<Actor>,
    running: Option<usize>,
    rng: SplitMix64,
    steps: u64,
    max_steps: u64,
    now: Duration,
    /// Step since which every live actor waits for a lock, if they do.
    blocked_since: Option<u64>,
    abort: Option<Abort>,
    /// Where the baton went, for reports (capped).
    trace: Vec<u8>,
    started: bool,
    /// Where each lock-blocked actor waited when a deadlock was found (engine frames only).
    stuck: Vec<String>,
}

/// A seeded scheduler for one run.
pub struct Sched {
    st: Mutex<St>,
    cv: Condvar,
    seed: u64,
}

thread_local! {
    static ME: RefCell<Option<(Arc<Sched>, Option<usize>)>> = const { RefCell::new(None) };
}

/// Virtual start of time (Unix seconds) for wall-clock reads in a simulation.
pub const EPOCH_SECS: u64 = 1_750_000_000;

impl Sched {
    pub fn new(seed: u64, max_steps: u64) -> Arc<Sched> {
        Arc::new(Sched {
            st: Mutex::new(St {
                actors: Vec::new(),
                running: None,
                rng: SplitMix64(seed ^ 0x5eed_5c4e_d000_0000),
                steps: 0,
                max_steps,
                now: Duration::from_secs(1),
                blocked_since: None,
                abort: None,
                trace: Vec::new(),
                started: false,
                stuck: Vec::new(),
            }),
            cv: Condvar::new(),
            seed,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes this thread an observer of the simulation: it reads virtual time but never waits
    /// for the baton (the runner, between epochs, when no actor runs).
    pub fn observe(self: &Arc<Self>) {
        ME.with(|m| *m.borrow_mut() = Some((self.clone(), None)));
    }

    /// Leaves the simulation (the observer, at the end of a run).
    pub fn leave() {
        ME.with(|m| *m.borrow_mut() = None);
    }

    /// Registers an actor; it runs when the scheduler first hands it the baton.
    pub fn add_actor(&self, name: &str) -> usize {
        let mut st = self.lock();
        let prio = st.rng.next_u64() | 1 << 63;
        st.actors.push(Actor {
            name: name.to_string(),
            rows_held: Vec::new(),
            row_wanted: None,
            prio,
            wait: Some(Wait::Ready),
            done: false,
        });
        st.actors.len() - 1
    }

    /// Runs `f` as actor `id` on the calling thread (spawned by the runner).
    pub fn enter<R>(self: &Arc<Self>, id: usize, f: impl FnOnce() -> R) -> R {
        ME.with(|m| *m.borrow_mut() = Some((self.clone(), Some(id))));
        {
            let st = self.lock();
            let _st = self.wait_for_baton(st, id);
        }
        struct Exit<'a>(&'a Arc<Sched>, usize);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                let mut st = self.0.lock();
                st.actors[self.1].done = true;
                st.actors[self.1].wait = None;
                st.running = None;
                // It may have released what the others wait for.
                st.blocked_since = None;
                self.0.pick(&mut st);
                drop(st);
                self.0.cv.notify_all();
                ME.with(|m| *m.borrow_mut() = None);
            }
        }
        let _exit = Exit(self, id);
        f()
    }

    /// Hands the baton to the first actor and waits until every actor is done. Returns the
    /// abort reason if the scheduler stopped the run.
    pub fn run_until_done(&self) -> Option<Abort> {
        let mut st = self.lock();
        st.started = true;
        self.pick(&mut st);
        self.cv.notify_all();
        loop {
            if st.actors.iter().all(|a| a.done) {
                return st.abort.clone();
            }
            let steps = st.steps;
            let (g, timeout) = self
                .cv
                .wait_timeout(st, Duration::from_secs(60))
                .unwrap_or_else(|e| e.into_inner());
            st = g;
            if timeout.timed_out() && st.steps == steps && !st.actors.iter().all(|a| a.done) {
                // An actor blocks outside the scheduler's view: a real hang. Nothing can
                // unwind it, so the process stops with the facts.
                let who: Vec<String> = st
                    .actors
                    .iter()
                    .filter(|a| !a.done)
                    .map(|a| format!("{} ({:?})", a.name, a.wait))
                    .collect();
                eprintln!(
                    "simulator watchdog: seed {}: no progress for 60 s at step {} (running: {:?}; waiting: {})",
                    self.seed,
                    st.steps,
                    st.running.map(|i| st.actors[i].name.clone()),
                    who.join(", ")
                );
                std::process::abort();
            }
        }
    }

    /// Chooses the next actor to run (if none runs) and advances time.
    fn pick(&self, st: &mut St) {
        if st.running.is_some() || !st.started {
            return;
        }
        loop {
            let live: Vec<usize> = (0..st.actors.len())
                .filter(|&i| !st.actors[i].done && st.actors[i].wait.is_some())
                .collect();
            if live.is_empty() {
                return;
            }
            let (now, steps) = (st.now, st.steps);
            // A lock-blocked actor may retry once someone else has run since it blocked.
            let mut cands: Vec<usize> = live
                .iter()
                .copied()
                .filter(|&i| match st.actors[i].wait {
                    Some(Wait::Ready) => true,
                    Some(Wait::Lock(at)) => at < steps,
                    Some(Wait::Until(t)) => t <= now,
                    None => false,
                })
                .collect();
            let free = cands
                .iter()
                .any(|&i| !matches!(st.actors[i].wait, Some(Wait::Lock(_))));
            let mut forced = None;
            if free {
                st.blocked_since = None;
            } else {
                // Every actor that can run waits for a lock: each retries in turn, oldest
                // attempt first (a holder may have let go since). Only when all of them failed
                // again since this began does time jump to the next sleeper's wake-up (a sleeper
                // may hold the lock); with no sleeper, nobody can release anything.
                let since = *st.blocked_since.get_or_insert(steps);
                let at = |i: usize| match st.actors[i].wait {
                    Some(Wait::Lock(a)) => a,
                    _ => u64::MAX,
                };
                if live.iter().all(|&i| at(i) >= since) {
                    let wake = live
                        .iter()
                        .filter_map(|&i| match st.actors[i].wait {
                            Some(Wait::Until(t)) => Some(t),
                            _ => None,
                        })
                        .min();
                    if let Some(t) = wake {
                        st.now = t.max(st.now);
                        st.blocked_since = None;
                        continue;
                    }
                    if st.abort.is_none() {
                        let names: Vec<String> =
                            live.iter().map(|&i| st.actors[i].name.clone()).collect();
                        st.abort = Some(Abort::Deadlock(names.join(", ")));
                    }
                }
                forced = live.iter().copied().min_by_key(|&i| at(i));
                cands = live;
            }
            st.steps += 1;
            if st.steps > st.max_steps && st.abort.is_none() {
                st.abort = Some(Abort::Steps(st.steps));
            }
            // PCT-like: the highest priority runs; now and then one is demoted, and now and
            // then the choice is uniform, so long runs of one actor and fine interleavings
            // both occur.
            let r = st.rng.next_u64();
            let chosen = if let Some(f) = forced {
                f
            } else if r.is_multiple_of(5) {
                cands[(r >> 8) as usize % cands.len()]
            } else {
                *cands
                    .iter()
                    .max_by_key(|&&i| st.actors[i].prio)
                    .expect("non-empty")
            };
            if (r >> 40).is_multiple_of(23) {
                let p = st.rng.next_u64() >> 1;
                st.actors[chosen].prio = p;
            }
            // Time passes for work, not for retrying a lock (a retry is not I/O).
            let dt = Duration::from_micros(st.rng.below(20_000));
            if !matches!(st.actors[chosen].wait, Some(Wait::Lock(_))) {
                st.now += dt;
            }
            if st.trace.len() < 1 << 16 {
                st.trace.push(chosen as u8);
            }
            st.actors[chosen].wait = None;
            st.running = Some(chosen);
            return;
        }
    }

    fn wait_for_baton<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, St>,
        id: usize,
    ) -> std::sync::MutexGuard<'a, St> {
        while st.running != Some(id) {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.abort.is_some() && !std::thread::panicking() {
            if matches!(st.abort, Some(Abort::Deadlock(_))) {
                let bt = std::backtrace::Backtrace::force_capture().to_string();
                let frames: Vec<&str> = bt
                    .lines()
                    .filter(|l| {
                        l.contains("raidcore::")
                            && !l.contains("raidcore::sim::sched")
                            && !l.contains("raidcore::sync")
                    })
                    .map(|l| l.trim())
                    .take(8)
                    .collect();
                let a = &st.actors[id];
                let line = format!(
                    "{} (waits for rows {:?}, holds {:?}): {}",
                    a.name,
                    a.row_wanted,
                    a.rows_held,
                    frames.join(" <- ")
                );
                st.stuck.push(line);
            }
            drop(st);
            std::panic::resume_unwind(Box::new(Aborted));
        }
        st
    }

    fn park(&self, id: usize, wait: Wait) {
        let mut st = self.lock();
        debug_assert_eq!(st.running, Some(id));
        let wait = match wait {
            Wait::Lock(_) => Wait::Lock(st.steps),
            w => w,
        };
        st.actors[id].wait = Some(wait);
        st.running = None;
        self.pick(&mut st);
        self.cv.notify_all();
        let _st = self.wait_for_baton(st, id);
    }

    /// A digest of the interleaving so far (equal seeds give equal digests).
    pub fn trace_digest(&self) -> (u64, u64) {
        let st = self.lock();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in &st.trace {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        (st.steps, h)
    }

    /// Where the actors of a deadlocked run waited.
    pub fn stuck(&self) -> Vec<String> {
        self.lock().stuck.clone()
    }

    /// Row-lock slots still recorded as held by actors that ended (a leaked guard).
    pub fn leaked(&self) -> String {
        let st = self.lock();
        st.actors
            .iter()
            .filter(|a| a.done && !a.rows_held.is_empty())
            .map(|a| format!("; {} ended holding rows {:?}", a.name, a.rows_held))
            .collect()
    }

    pub fn steps(&self) -> u64 {
        self.lock().steps
    }

    pub fn now(&self) -> Duration {
        self.lock().now
    }

    /// Stops the run: every actor unwinds at its next yield point.
    pub fn abort(&self, why: Abort) {
        let mut st = self.lock();
        st.abort.get_or_insert(why);
    }
}

fn current() -> Option<(Arc<Sched>, Option<usize>)> {
    ME.with(|m| m.borrow().clone())
}

/// True when the calling thread is an actor of a simulation (engine code then runs its work
/// on this thread instead of helper threads, so the scheduler sees all of it).
pub fn is_actor() -> bool {
    ME.with(|m| matches!(&*m.borrow(), Some((_, Some(_)))))
}

/// True when the calling thread takes part in a simulation: an actor, or the runner observing
/// one (between epochs: the resync after a restart, the scrubs and rebuild of the final
/// checks). Engine jobs then do all their work on the calling thread: a helper thread is no
/// part of the simulation (the scheduler does not see it, its clock is the real one) and
/// helpers racing each other would make a seed's outcome depend on the OS's timing.
pub fn in_simulation() -> bool {
    ME.with(|m| m.borrow().is_some())
}

/// A yield point (member I/O): another actor may run before this one continues.
pub fn yield_now() {
    if let Some((s, Some(id))) = current() {
        s.park(id, Wait::Ready);
    }
}

/// Called when an actor changed what a condition variable's waiters wait for (its notify): a
/// waiter that last checked before is not yet stuck, so the count of failed retries that
/// declares a deadlock starts over. Without it, a waiter that checked, then the actor that
/// ended its wait (itself forced from a lock wait, which the scheduler does not see succeed),
/// then every actor blocked again read as a deadlock (a flush's drain and a write ending).
pub fn progress() {
    if let Some((s, Some(_))) = current() {
        s.lock().blocked_since = None;
    }
}

/// Called by a lock that another actor holds: lets others run before the next try. Returns
/// false outside a simulation (the caller then blocks as usual).
pub fn lock_blocked() -> bool {
    match current() {
        Some((s, Some(id))) => {
            s.park(id, Wait::Lock(0));
            true
        }
        _ => false,
    }
}

/// Virtual time now, when the thread takes part in a simulation.
pub fn virtual_now() -> Option<Duration> {
    current().map(|(s, _)| s.now())
}

/// Sleeps in virtual time (an actor) and returns true, or returns false outside a simulation.
pub fn sleep(d: Duration) -> bool {
    match current() {
        Some((s, Some(id))) => {
            let until = s.now() + d;
            s.park(id, Wait::Until(until));
            true
        }
        Some((_, None)) => true,
        None => false,
    }
}

/// The scheduler step and the calling actor's name ("runner" between epochs), for debug output.
pub fn debug_where() -> String {
    match current() {
        Some((s, id)) => {
            let st = s.lock();
            let who = id.map_or("runner".to_string(), |i| st.actors[i].name.clone());
            format!("[{}] {who}", st.steps)
        }
        None => "[-]".to_string(),
    }
}

/// Records that the calling actor waits for `rows` (deadlock reports).
pub fn note_wait(rows: &std::ops::Range<u64>) {
    if let Some((s, Some(id))) = current() {
        s.lock().actors[id].row_wanted = Some(rows.clone());
    }
}

/// Records that the calling actor took (`held`) or released `rows`.
pub fn note_rows(rows: &std::ops::Range<u64>, held: bool) {
    if let Some((s, Some(id))) = current() {
        let mut st = s.lock();
        let a = &mut st.actors[id];
        if held {
            a.rows_held.push(rows.clone());
            a.row_wanted = None;
        } else if let Some(p) = a.rows_held.iter().position(|x| x == rows) {
            a.rows_held.swap_remove(p);
        }
    }
}
