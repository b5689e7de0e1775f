//! One simulated run: a seeded array, epochs of concurrent actors (clients on disjoint ranges,
//! a lifecycle actor that fails, breaks, adds, replaces and rebuilds members, a scrub actor),
//! power cuts and clean restarts between epochs, and the final checks: every byte reads back as
//! the model says, healthy and degraded, and scrub --repair settles to a clean second scrub.

#![allow(clippy::single_range_in_vec_init)] // one range of rows is a meaningful list here

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::member::{Faults, SimMember, Store};
use super::model::Model;
use super::sched::{Abort, Aborted, Sched};
use crate::array::csum::CsumAlgo;
use crate::array::{ArrayState, AssembleOptions, CreateSpec, MemberRef};
use crate::device::Member;
use crate::error::ErrorKind;
use crate::jobs::rebuild::{self, RebuildOptions};
use crate::jobs::scrub::{self, Mode};
use crate::layout::{f1_weights, LayoutParams, Level};
use crate::rng::SplitMix64;
use crate::Array;

/// Seeds the random stream of checksum table damage (apart from every other draw).
const TABLE_DAMAGE_STREAM: u64 = 0x7ab1_e0da_3a6e_0001;

/// What a run is made of, drawn from the seed.
#[derive(Clone, Debug)]
pub struct Spec {
    pub params: LayoutParams,
    pub rows: u64,
    pub checksums: Option<CsumAlgo>,
    pub stripe_cache: usize,
    pub clients: usize,
    pub epochs: usize,
    /// Lifecycle events and jobs are drawn more often (a run about rebuilds).
    pub busy_lifecycle: bool,
    pub scrubber: bool,
    /// Checksum table pages get damaged now and then (their own hash then fails): reads and
    /// scrub must go on by redundancy, never return wrong data nor fail good data. Drawn from
    /// a stream of its own, so every other choice of a seed is what it was before.
    pub table_damage: bool,
}

impl Spec {
    pub fn draw(seed: u64) -> Spec {
        let mut r = SplitMix64(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0xa11ce);
        let (level, n) = match r.below(12) {
            0 => (Level::Raid1, 2 + r.below(2) as usize),
            1 | 2 => (Level::Raid10, 2 + r.below(3) as usize),
            3..=5 => (Level::Raid5, 3 + r.below(3) as usize),
            6 | 7 => (Level::F1, 3 + r.below(3) as usize),
            _ => (Level::Raid6, 4 + r.below(3) as usize),
        };
        let chunk = [4096u64, 8192, 16384, 65536][r.below(4) as usize];
        let mut params = LayoutParams::with_defaults(level, n, chunk);
        if level == Level::F1 {
            params.weights = f1_weights(n, r.below(n as u64) as usize, 1 + r.below(2) as u32);
        }
        if level == Level::Raid10 {
            params.copies = 2 + r.below((n as u64).min(3) - 1) as usize;
        }
        let rows = ((256u64 << 10) / chunk).max(8) + r.below(16);
        Spec {
            params,
            rows,
            checksums: match r.below(4) {
                0 => None,
                1 => Some(CsumAlgo::Blake3),
                _ => Some(CsumAlgo::default()),
            },
            stripe_cache: if r.below(3) == 0 { 0 } else { 1 << 20 },
            clients: 1 + r.below(2) as usize,
            epochs: 1 + r.below(3) as usize,
            busy_lifecycle: r.below(2) == 0,
            scrubber: r.below(2) == 0,
            table_damage: SplitMix64(seed ^ TABLE_DAMAGE_STREAM).below(3) == 0,
        }
    }

    pub fn describe(&self) -> String {
        let p = &self.params;
        format!(
            "{} N={}{} chunk={}K rows={} checksums={} stripe-cache={} clients={} epochs={}{}{}{}",
            p.level.name(),
            p.members,
            if p.level == Level::Raid10 {
                format!(" K={}", p.copies)
            } else if p.level == Level::F1 {
                format!(" weights={:?}", p.weights)
            } else {
                String::new()
            },
            p.chunk_bytes >> 10,
            self.rows,
            self.checksums.map(|c| c.name()).unwrap_or("none"),
            self.stripe_cache,
            self.clients,
            self.epochs,
            if self.busy_lifecycle {
                " lifecycle"
            } else {
                ""
            },
            if self.scrubber { " scrubber" } else { "" },
            if self.table_damage && self.checksums.is_some() {
                " table-damage"
            } else {
                ""
            },
        )
    }
}

/// A run that passed.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub spec: String,
    pub steps: u64,
    /// Digest of every scheduling decision: equal for equal seeds.
    pub digest: u64,
    pub power_cuts: usize,
}

/// A run that failed: the seed replays it.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub spec: String,
    pub what: String,
    pub log: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} ({}): {}", self.seed, self.spec, self.what)?;
        writeln!(f, "last events:")?;
        for l in &self.log {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

const DATA_OFFSET_GUESS: u64 = 2 << 20;
const LOG_LINES: usize = 3000;

/// Shared by the actors of one run.
struct World {
    store: Store,
    model: Mutex<Model>,
    power: Mutex<Arc<AtomicBool>>,
    /// Scheduler step at which the power goes (u64::MAX: not in this epoch).
    cut_at: AtomicU64,
    log: Mutex<VecDeque<String>>,
    failed: Mutex<Option<String>>,
    next_member: AtomicU64,
    member_bytes: u64,
    /// A slow member was injected: request latency says nothing about the engine then.
    slow: AtomicBool,
}

impl World {
    fn note(&self, sched: &Sched, s: String) {
        let mut l = self.log.lock().expect("log lock");
        if l.len() >= LOG_LINES {
            l.pop_front();
        }
        l.push_back(format!("[{}] {s}", sched.steps()));
    }

    fn fail(&self, s: String) {
        self.failed.lock().expect("fail lock").get_or_insert(s);
    }

    fn failed(&self) -> bool {
        self.failed.lock().expect("fail lock").is_some()
    }

    fn power_on(&self) -> bool {
        self.power
            .lock()
            .expect("power lock")
            .load(Ordering::SeqCst)
    }

    fn new_member(&self) -> (PathBuf, Arc<SimMember>) {
        let i = self.next_member.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(format!("/sim/m{i}"));
        let m = Arc::new(SimMember::new(
            &path.display().to_string(),
            vec![0; self.member_bytes as usize],
            self.power.lock().expect("power lock").clone(),
        ));
        self.store.insert(&path, m.clone());
        (path, m)
    }
}

/// Runs seed `seed`.
pub fn run(seed: u64) -> Result<Report, Failure> {
    run_spec(seed, Spec::draw(seed))
}

/// Runs seed `seed` as it ran when it was named a regression test: without the event kinds
/// added to the simulator since (checksum table damage), so the test keeps replaying the run
/// that found its bug.
pub fn run_as_named(seed: u64) -> Result<Report, Failure> {
    let mut spec = Spec::draw(seed);
    spec.table_damage = false;
    run_spec(seed, spec)
}

fn run_spec(seed: u64, spec: Spec) -> Result<Report, Failure> {
    let desc = spec.describe();
    let sched = Sched::new(seed, 2_000_000);
    sched.observe();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_inner(seed, &spec, &sched)
    }));
    Sched::leave();
    let (world, res) = match out {
        Ok(x) => x,
        Err(p) => {
            let what = panic_text(&p);
            return Err(Failure {
                seed,
                spec: desc,
                what: format!("panic in the run: {what}"),
                log: vec![],
            });
        }
    };
    let log: Vec<String> = world
        .log
        .lock()
        .expect("log lock")
        .iter()
        .cloned()
        .collect();
    match res {
        Ok(cuts) => {
            let (steps, digest) = sched.trace_digest();
            Ok(Report {
                seed,
                spec: desc,
                steps,
                digest,
                power_cuts: cuts,
            })
        }
        Err(what) => Err(Failure {
            seed,
            spec: desc,
            what,
            log,
        }),
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if p.downcast_ref::<Aborted>().is_some() {
        "aborted by the scheduler".into()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "panic".into()
    }
}

fn run_inner(seed: u64, spec: &Spec, sched: &Arc<Sched>) -> (Arc<World>, Result<usize, String>) {
    let c = spec.params.chunk_bytes;
    let member_bytes = DATA_OFFSET_GUESS + spec.rows * c;
    let world = Arc::new(World {
        store: Store::default(),
        model: Mutex::new(Model::new(0)),
        power: Mutex::new(Arc::new(AtomicBool::new(true))),
        cut_at: AtomicU64::new(u64::MAX),
        log: Mutex::new(VecDeque::new()),
        failed: Mutex::new(None),
        next_member: AtomicU64::new(0),
        member_bytes,
        slow: AtomicBool::new(false),
    });
    let r = (|| -> Result<usize, String> {
        let mut rng = SplitMix64(seed);
        let members: Vec<(PathBuf, Arc<dyn Member>)> = (0..spec.params.members)
            .map(|_| {
                let (p, m) = world.new_member();
                (p, m as Arc<dyn Member>)
            })
            .collect();
        let cs = CreateSpec {
            name: "sim".into(),
            layout: spec.params.clone(),
            overprovision_pct: 0.0,
            endurance_bytes: vec![],
            history_interval: 86_400,
            checksums: spec.checksums,
        };
        let mut array =
            Array::create_on(members, &cs, &mut |_, _| {}).map_err(|e| format!("create: {e}"))?;
        array
            .set_stripe_cache(spec.stripe_cache)
            .map_err(|e| e.to_string())?;
        *world.model.lock().expect("model lock") = Model::new(array.size());
        let mut cuts = 0;
        for epoch in 0..spec.epochs {
            let cut = rng.below(100) < 45;
            let base = sched.steps();
            world.cut_at.store(
                if cut {
                    base + 20 + rng.below(1500)
                } else {
                    u64::MAX
                },
                Ordering::SeqCst,
            );
            epoch_run(&world, &array, spec, sched, seed ^ (epoch as u64) << 32)?;
            if let Some(f) = world.failed.lock().expect("fail lock").clone() {
                return Err(f);
            }
            let was_cut = !world.power_on();
            world.cut_at.store(u64::MAX, Ordering::SeqCst);
            if was_cut {
                cuts += 1;
                world.note(sched, format!("epoch {epoch}: power cut; restart"));
                drop(array);
                // Every member keeps its durable image and some of what was unflushed.
                let keep = [0u64, 50, 100][rng.below(3) as usize];
                let power = Arc::new(AtomicBool::new(true));
                *world.power.lock().expect("power lock") = power.clone();
                for p in world.store.paths() {
                    let old = world.store.get(&p).expect("listed");
                    let img = old.crash_image(&mut rng, keep);
                    let m = Arc::new(SimMember::new(&p.display().to_string(), img, power.clone()));
                    m.set_faults(Faults {
                        dead: old.faults().dead,
                        ..Faults::default()
                    });
                    world.store.insert(&p, m);
                }
                array = reopen(&world, sched)?;
                let (got, bad) = read_image(&array, "read after restart")?;
                world
                    .model
                    .lock()
                    .expect("model lock")
                    .after_crash(&got, &bad)?;
                let rep = scrub::run(
                    &array,
                    &[0..array.rows()],
                    Mode::Scrub { repair: false },
                    None,
                    &mut |_, _| {},
                )
                .map_err(|e| format!("scrub after restart: {e}"))?;
                if !rep.problems.is_empty() {
                    return Err(format!(
                        "after the power cut and resync, scrub finds {} problems, first: {:?}",
                        rep.problems.len(),
                        rep.problems[0]
                    ));
                }
            } else if rng.below(2) == 0 {
                world.note(sched, format!("epoch {epoch}: clean stop; restart"));
                array.close().map_err(|e| format!("close: {e}"))?;
                world.model.lock().expect("model lock").clean_stop();
                array = reopen(&world, sched)?;
            }
        }
        final_checks(&world, &array, spec, sched, &mut rng)?;
        Ok(cuts)
    })();
    (world, r)
}

/// Reads the whole array. Blocks on its bad-block list fail to read (that is their point):
/// they are left zero and returned apart, after checking that each follows a crash that lost
/// a member (the model knows which blocks a crash may have lost).
fn read_image(a: &Array, what: &str) -> Result<(Vec<u8>, Vec<u64>), String> {
    let size = a.size() as usize;
    let mut got = vec![0u8; size];
    match a.read(&mut got, 0) {
        Ok(()) => return Ok((got, Vec::new())),
        Err(e) if e.kind() == ErrorKind::BadBlock => {}
        Err(e) => return Err(format!("{what}: {e}")),
    }
    let mut bad = Vec::new();
    for off in (0..size as u64).step_by(4096) {
        let len = 4096.min(size - off as usize);
        let out = &mut got[off as usize..off as usize + len];
        match a.read(out, off) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::BadBlock => {
                out.fill(0);
                bad.push(off);
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    Ok((got, bad))
}

/// Checks a whole-array image from [`read_image`] against the model: bad blocks must be ones
/// a crash lost.
fn check_image(w: &World, got: &[u8], bad: &[u64], what: &str) -> Result<(), String> {
    let mut m = w.model.lock().expect("model lock");
    let mut from = 0usize;
    for &o in bad {
        let o = o as usize;
        let len = 4096.min(got.len() - o);
        if !m.was_lost(o as u64, len) {
            return Err(format!(
                "{what}: 4 KiB block {} is on the bad-block list, but no crash lost it",
                o / 4096
            ));
        }
        m.check_read(from as u64, &got[from..o])
            .map_err(|e| format!("{what}: {e}"))?;
        from = o + len;
    }
    m.check_read(from as u64, &got[from..])
        .map_err(|e| format!("{what}: {e}"))
}

/// Assembles the array from the store the way `raidctl` does: name a member (a stale one is
/// refused, so try the next), resync after an unclean stop, promote spares.
fn reopen(world: &World, sched: &Arc<Sched>) -> Result<Array, String> {
    let opts = AssembleOptions {
        writable: true,
        ..Default::default()
    };
    let mut why = Vec::new();
    for p in world.store.paths() {
        match Array::open_from(&world.store, &p, &opts) {
            Ok(a) => {
                if !a.superblock().clean {
                    scrub::run(&a, &a.dirty_rows(), Mode::Resync, None, &mut |_, _| {})
                        .map_err(|e| format!("resync after restart: {e}"))?;
                }
                a.promote_spares(false)
                    .map_err(|e| format!("promote spares: {e}"))?;
                world.note(sched, format!("reassembled from {}", p.display()));
                return Ok(a);
            }
            Err(e) => why.push(format!("{}: {e}", p.display())),
        }
    }
    Err(format!(
        "no member assembles the array: {}; superblocks: {}",
        why.join("; "),
        superblock_summary(world)
    ))
}

/// Each member's newest superblock in one line: events and the role of every slot it lists.
fn superblock_summary(world: &World) -> String {
    let mut out = Vec::new();
    for p in world.store.paths() {
        let Some(m) = world.store.get(&p) else {
            continue;
        };
        let line = match crate::format::probe(m.as_ref()) {
            Ok(crate::format::Probe::Valid(l)) => {
                let roles: Vec<String> =
                    l.sb.slots
                        .iter()
                        .map(|e| format!("{}={:?}", e.path_hint, e.state))
                        .collect();
                format!(
                    "events {} gen {} slot {} [{}]",
                    l.sb.events,
                    l.generation,
                    l.sb.slot,
                    roles.join(" ")
                )
            }
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("{e}"),
        };
        out.push(format!("{}: {line}", p.display()));
    }
    out.join("; ")
}

fn epoch_run(
    world: &Arc<World>,
    array: &Array,
    spec: &Spec,
    sched: &Arc<Sched>,
    seed: u64,
) -> Result<(), String> {
    let size = array.size();
    let mut rng = SplitMix64(seed ^ 0xe90c);
    // Client ranges: contiguous, split at byte offsets that are not row-aligned.
    let mut cuts: Vec<u64> = (1..spec.clients).map(|_| rng.below(size)).collect();
    cuts.sort_unstable();
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(size);
    let mut actors: Vec<(usize, Box<dyn FnOnce() + Send + '_>)> = Vec::new();
    for k in 0..spec.clients {
        let (lo, hi) = (bounds[k], bounds[k + 1]);
        if hi <= lo {
            continue;
        }
        let id = sched.add_actor(&format!("client{k}"));
        let seed = rng.next_u64();
        let w = world.clone();
        let s = sched.clone();
        actors.push((id, Box::new(move || client(&w, array, &s, k, lo..hi, seed))));
    }
    let id = sched.add_actor("lifecycle");
    let lseed = rng.next_u64();
    let (w, s) = (world.clone(), sched.clone());
    actors.push((id, Box::new(move || lifecycle(&w, array, spec, &s, lseed))));
    if spec.scrubber {
        let id = sched.add_actor("scrubber");
        let sseed = rng.next_u64();
        let (w, s) = (world.clone(), sched.clone());
        actors.push((id, Box::new(move || scrubber(&w, array, &s, sseed))));
    }
    let abort = std::thread::scope(|sc| {
        for (id, f) in actors {
            let s = sched.clone();
            let w = world.clone();
            sc.spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.enter(id, f)));
                if let Err(p) = r {
                    if p.downcast_ref::<Aborted>().is_none() {
                        w.fail(format!("actor {id} panicked: {}", panic_text(&p)));
                    }
                }
            });
        }
        sched.run_until_done()
    });
    match abort {
        Some(Abort::Deadlock(who)) => Err(format!(
            "deadlock: every actor waits for a lock ({who}); where: {}",
            sched.stuck().join(" | ")
        ) + &sched.leaked()),
        Some(Abort::Steps(n)) => Err(format!(
            "no end after {n} scheduler steps (livelock or hang)"
        )),
        None => Ok(()),
    }
}

/// Checks the power after an operation: false once it is cut (the epoch is over; nothing
/// completed after the cut counts as acknowledged).
fn cut_now(w: &World, sched: &Sched) -> bool {
    if !w.power_on() {
        return true;
    }
    if sched.steps() >= w.cut_at.load(Ordering::SeqCst) {
        w.power
            .lock()
            .expect("power lock")
            .store(false, Ordering::SeqCst);
        w.note(sched, "power cut".into());
        return true;
    }
    false
}

/// The longest a client request may wait in virtual time (the engine promises one small batch).
const MAX_REQUEST_WAIT: Duration = Duration::from_secs(10);

fn client(w: &World, a: &Array, sched: &Sched, k: usize, range: std::ops::Range<u64>, seed: u64) {
    let mut r = SplitMix64(seed);
    let chunk = a.layout().chunk();
    let row = chunk * a.layout().data_per_row().max(1) as u64;
    let span = range.end - range.start;
    let ops = 15 + r.below(40);
    for i in 0..ops {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        let len = match r.below(6) {
            0 => 1 + r.below(600),
            1 => 4096 * (1 + r.below(4)),
            2 => 1 + r.below(3 * chunk),
            3 => row * (1 + r.below(2)),
            _ => 1 + r.below(2 * chunk),
        }
        .min(span);
        let mut off = range.start + r.below(span - len + 1);
        if r.below(3) == 0 {
            // Aligned starts too (whole blocks, chunks, rows).
            let a = [4096, chunk, row][r.below(3) as usize];
            let al = off / a * a;
            if al >= range.start {
                off = al;
            }
        }
        let t0 = crate::clock::Instant::now();
        let what = r.below(20);
        let outcome = match what {
            0..=8 => {
                let fua = r.below(4) == 0;
                let fill = (r.next_u64() as u8) | 1;
                let mut data = vec![fill; len as usize];
                data[0] = i as u8;
                w.model
                    .lock()
                    .expect("model lock")
                    .begin_write(off, data.len());
                // Writes completed before the FUA write's flush began (taken when it begins:
                // other clients' writes that complete while it runs are not covered).
                let mut flush_seq = None;
                let res = a.write(&data, off).and_then(|()| {
                    if fua {
                        flush_seq = Some(w.model.lock().expect("model lock").flush_begin());
                        a.flush()
                    } else {
                        Ok(())
                    }
                });
                let cut = cut_now(w, sched);
                let ok = res.is_ok() && !cut;
                {
                    let mut m = w.model.lock().expect("model lock");
                    m.end_write(off, &data, ok);
                    if let (true, Some(s)) = (ok, flush_seq) {
                        // A FUA write is durable, with everything completed before its flush.
                        m.flush_end_with(s, off, data.len());
                    }
                }
                w.note(
                    sched,
                    format!(
                        "client{k} write{} {len} at {off}: {:?}",
                        if fua { "+fua" } else { "" },
                        err_of(&res)
                    ),
                );
                if let Err(e) = res {
                    // A write of part of a block a crash lost cannot be merged with the rest.
                    let lost_block = e.kind() == ErrorKind::BadBlock
                        && w.model.lock().expect("model lock").was_lost(
                            off / 4096 * 4096,
                            ((off + len).div_ceil(4096) * 4096).min(a.size()) as usize
                                - (off / 4096 * 4096) as usize,
                        );
                    if !cut && !lost_block && a.state() != ArrayState::Failed {
                        w.fail(format!(
                            "client{k}: write of {len} at {off} failed while the array is {}: {e}",
                            a.state().name()
                        ));
                    }
                }
                Ok(())
            }
            9..=14 => {
                let mut got = vec![0u8; len as usize];
                let res = a.read(&mut got, off);
                let cut = cut_now(w, sched);
                w.note(
                    sched,
                    format!("client{k} read {len} at {off}: {:?}", err_of(&res)),
                );
                match res {
                    Ok(()) if !cut => w.model.lock().expect("model lock").check_read(off, &got),
                    Ok(()) => Ok(()),
                    Err(e) if cut || a.state() == ArrayState::Failed => {
                        let _ = e;
                        Ok(())
                    }
                    Err(e)
                        if e.kind() == ErrorKind::BadBlock
                            && w.model
                                .lock()
                                .expect("model lock")
                                .was_lost(off, len as usize) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(format!(
                        "read of {len} at {off} failed while the array is {}: {e}",
                        a.state().name()
                    )),
                }
            }
            15..=17 => {
                let seq0 = w.model.lock().expect("model lock").flush_begin();
                let res = a.flush();
                let cut = cut_now(w, sched);
                w.note(sched, format!("client{k} flush: {:?}", err_of(&res)));
                if res.is_ok() && !cut {
                    w.model.lock().expect("model lock").flush_end(seq0);
                }
                Ok(())
            }
            _ => {
                w.model
                    .lock()
                    .expect("model lock")
                    .begin_write(off, len as usize);
                let res = a.trim(off, len);
                let mut got = vec![0u8; len as usize];
                let rd = a.read(&mut got, off);
                let cut = cut_now(w, sched);
                w.note(
                    sched,
                    format!(
                        "client{k} trim {len} at {off}: {:?}",
                        res.as_ref().map_err(|e| e.to_string())
                    ),
                );
                let mut m = w.model.lock().expect("model lock");
                if res.is_ok() && rd.is_ok() && !cut {
                    m.end_trim(off, &got)
                } else {
                    m.end_write(off, &got, false);
                    Ok(())
                }
            }
        };
        if let Err(e) = outcome {
            w.fail(format!("client{k}: {e}"));
            return;
        }
        let waited = t0.elapsed();
        if waited > MAX_REQUEST_WAIT && w.power_on() && !w.slow.load(Ordering::Relaxed) {
            w.fail(format!("client{k}: a request of {len} bytes at {off} took {:.1} s of virtual time (the engine promises at most one small batch of waiting)", waited.as_secs_f64()));
            return;
        }
    }
}

/// Members out of service, plus those carrying an injected fault the array has not met yet
/// (a dead drive, failing writes, unreadable blocks): another fault is injected only while
/// this stays below what the level tolerates, so every block keeps some redundancy.
fn burden(w: &World, a: &Array) -> usize {
    (0..a.layout().members())
        .filter(|&s| {
            !a.slot_usable(s)
                || a.slot_path_of(s)
                    .and_then(|p| w.store.get(&p))
                    .is_some_and(|m| {
                        let f = m.faults();
                        f.dead || f.write_errno.is_some() || !f.bad_reads.is_empty()
                    })
        })
        .count()
}

/// True when one more member may fail (or one more fault be injected) without losing data.
fn spare_tolerance(w: &World, a: &Array) -> bool {
    burden(w, a) < a.layout().tolerance() && a.state() != ArrayState::Failed
}

fn lifecycle(w: &World, a: &Array, spec: &Spec, sched: &Sched, seed: u64) {
    let mut r = SplitMix64(seed);
    let n = a.layout().members();
    let ops = if spec.busy_lifecycle {
        6 + r.below(10)
    } else {
        2 + r.below(4)
    };
    let redundant = a.layout().tolerance() > 0;
    let mut dmg = SplitMix64(seed ^ TABLE_DAMAGE_STREAM);
    for _ in 0..ops {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        if spec.table_damage && dmg.below(3) == 0 {
            damage_a_table_page(w, a, &mut dmg, sched);
        }
        crate::clock::sleep(Duration::from_millis(r.below(400)));
        let slot = r.below(n as u64) as usize;
        let path = a.slot_path_of(slot);
        let choice = r.below(10);
        let msg = match choice {
            0 | 1 if redundant && spare_tolerance(w, a) && a.slot_usable(slot) => {
                match r.below(4) {
                    0 => format!(
                        "fail slot {slot}: {:?}",
                        a.fail(&MemberRef::Slot(slot)).err().map(|e| e.to_string())
                    ),
                    1 => {
                        // A few unreadable blocks in the data area.
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let row = r.below(a.rows());
                            let off = a.data_offset_of()
                                + row * a.layout().chunk()
                                + r.below(a.layout().chunk() / 4096) * 4096;
                            let mut f = m.faults();
                            f.bad_reads.push(off..off + 4096 * (1 + r.below(2)));
                            m.set_faults(f);
                            format!("slot {slot}: unreadable blocks at member offset {off}")
                        } else {
                            String::new()
                        }
                    }
                    2 => {
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let mut f = m.faults();
                            f.write_errno = Some(if r.below(2) == 0 {
                                libc::EIO
                            } else {
                                libc::ENOSPC
                            });
                            m.set_faults(f);
                            format!("slot {slot}: writes fail")
                        } else {
                            String::new()
                        }
                    }
                    _ => {
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let mut f = m.faults();
                            f.dead = true;
                            m.set_faults(f);
                            format!("slot {slot}: the drive dies")
                        } else {
                            String::new()
                        }
                    }
                }
            }
            2..=4 if !a.slot_usable(slot) && !a.slot_has_target(slot) => {
                if r.below(2) == 0 {
                    // Re-add the same (stale) device, healed: it must be rebuilt, never trusted.
                    match path
                        .as_deref()
                        .and_then(|p| a.take_failed(p).map(|m| (p.to_path_buf(), m)))
                    {
                        Some((p, m)) => {
                            if let Some(sm) = w.store.get(&p) {
                                sm.set_faults(Faults::default());
                            }
                            format!(
                                "re-add {} to slot {slot}: {:?}",
                                p.display(),
                                a.add(m, &p, None, false).err().map(|e| e.to_string())
                            )
                        }
                        None => String::new(),
                    }
                } else {
                    let (p, m) = w.new_member();
                    format!(
                        "add {} for slot {slot}: {:?}",
                        p.display(),
                        a.add(m, &p, None, false).err().map(|e| e.to_string())
                    )
                }
            }
            5 if redundant && a.slot_usable(slot) && !a.slot_has_target(slot) => {
                let (p, m) = w.new_member();
                format!(
                    "replace slot {slot} with {}: {:?}",
                    p.display(),
                    a.replace(&MemberRef::Slot(slot), m, &p, None, false)
                        .err()
                        .map(|e| e.to_string())
                )
            }
            6..=8 if !a.pending_targets().is_empty() => {
                let opts = RebuildOptions {
                    max_rate: [None, None, Some(256 << 10), Some(4 << 20)][r.below(4) as usize],
                    keep_roles: r.below(2) == 0,
                    checkpoint_every: Duration::from_millis(50 + r.below(3000)),
                    batch_bytes: [a.layout().chunk(), 64 << 10, 8 << 20][r.below(3) as usize],
                    stop: None,
                };
                let res = rebuild::run(a, &opts, &mut |_, _, _| {});
                format!(
                    "rebuild: {:?}",
                    res.map(|v| v.len()).map_err(|e| e.to_string())
                )
            }
            9 if r.below(2) == 0 => {
                // A slow drive (or a fast one again): requests in flight on it take seconds.
                match path.as_deref().and_then(|p| w.store.get(p)) {
                    Some(m) => {
                        let mut f = m.faults();
                        f.latency = match f.latency {
                            Some(_) => None,
                            None => Some(Duration::from_millis(500 + r.below(6000))),
                        };
                        w.slow.store(true, Ordering::Relaxed);
                        let msg = format!("slot {slot}: latency {:?}", f.latency);
                        m.set_faults(f);
                        msg
                    }
                    None => String::new(),
                }
            }
            9 if !a.slot_usable(slot) && !a.slot_has_target(slot) && a.slot_present(slot) => {
                format!(
                    "remove slot {slot}: {:?}",
                    a.remove(&MemberRef::Slot(slot))
                        .err()
                        .map(|e| e.to_string())
                )
            }
            _ => String::new(),
        };
        if !msg.is_empty() {
            w.note(sched, format!("lifecycle: {msg}"));
        }
    }
}

/// Breaks the own hash of one checksum table page of one member (a few flipped bytes): its
/// entries become unknown the next time the page is read from the member.
fn damage_a_table_page(w: &World, a: &Array, r: &mut SplitMix64, sched: &Sched) {
    let Some(geo) = a.checksum_geometry() else {
        return;
    };
    let slot = r.below(a.layout().members() as u64) as usize;
    let page = r.below(geo.table_pages);
    let within = r.below(4096 - 8);
    let Some(m) = a.slot_path_of(slot).and_then(|p| w.store.get(&p)) else {
        return;
    };
    let off = geo.page_offset(page) + within;
    m.damage(off, 8);
    w.note(
        sched,
        format!("damage: slot {slot} checksum table page {page} (member offset {off})"),
    );
}

fn scrubber(w: &World, a: &Array, sched: &Sched, seed: u64) {
    let mut r = SplitMix64(seed);
    for _ in 0..1 + r.below(3) {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        crate::clock::sleep(Duration::from_millis(r.below(2000)));
        let rows = a.rows();
        let lo = r.below(rows);
        let (ranges, mode) = match r.below(3) {
            0 => (vec![lo..(lo + 1 + r.below(8)).min(rows)], Mode::Resync),
            1 => (vec![0..rows], Mode::Scrub { repair: true }),
            _ => (vec![0..rows], Mode::Scrub { repair: false }),
        };
        let rate = [None, Some(1 << 20)][r.below(2) as usize];
        let res = scrub::run(a, &ranges, mode, rate, &mut |_, _| {});
        w.note(
            sched,
            format!(
                "scrubber: {mode:?} {ranges:?}: {:?}",
                res.map(|r| (r.problems.len(), r.unrepaired()))
                    .map_err(|e| e.to_string())
            ),
        );
    }
}

fn final_checks(
    w: &World,
    a: &Array,
    spec: &Spec,
    sched: &Sched,
    rng: &mut SplitMix64,
) -> Result<(), String> {
    let _ = spec;
    // Finish any rebuild, then every byte must read back as last written.
    if !a.pending_targets().is_empty() && a.state() != ArrayState::Failed {
        rebuild::run(a, &RebuildOptions::default(), &mut |_, _, _| {})
            .map_err(|e| format!("final rebuild: {e}"))?;
    }
    let (got, bad) = read_image(a, "final read")?;
    check_image(w, &got, &bad, "final read")?;
    let all = [0..a.rows()];
    let rep = scrub::run(a, &all, Mode::Scrub { repair: true }, None, &mut |_, _| {})
        .map_err(|e| format!("final scrub --repair: {e}"))?;
    w.note(
        sched,
        format!(
            "final scrub --repair: {} problems, {} unrepaired",
            rep.problems.len(),
            rep.unrepaired()
        ),
    );
    let rep2 = scrub::run(a, &all, Mode::Scrub { repair: false }, None, &mut |_, _| {})
        .map_err(|e| format!("second scrub: {e}"))?;
    if !rep2.problems.is_empty() {
        return Err(format!(
            "a second scrub after scrub --repair still finds {} problems (first: {:?}); the repair found {} ({} unrepaired)",
            rep2.problems.len(),
            rep2.problems[0],
            rep.problems.len(),
            rep.unrepaired()
        ));
    }
    let (got, bad) = read_image(a, "read after scrub")?;
    check_image(w, &got, &bad, "read after scrub")?;
    // Degraded: every byte must still read back with one member gone.
    if spare_tolerance(w, a) {
        let usable: Vec<usize> = (0..a.layout().members())
            .filter(|&s| a.slot_usable(s))
            .collect();
        let s = usable[rng.below(usable.len() as u64) as usize];
        a.fail_member(s, "final degraded check")
            .map_err(|e| e.to_string())?;
        let what = format!("degraded read without slot {s}");
        let (got, bad) = read_image(a, &what)?;
        check_image(w, &got, &bad, &what)?;
    }
    Ok(())
}

/// Runs seeds `from..from+count`, returning the failures.
pub fn run_many(from: u64, count: u64) -> Vec<Failure> {
    (from..from + count).filter_map(|s| run(s).err()).collect()
}

/// An operation's error, for the event log.
fn err_of<T>(r: &crate::Result<T>) -> Option<String> {
    r.as_ref().err().map(|e| e.to_string())
}
