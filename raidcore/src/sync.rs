//! The engine's locks: std's `Mutex`, `RwLock` and `Condvar` with one difference. Inside a
//! simulation (an actor thread of [`crate::sim`]) a lock that another actor holds is retried
//! at the scheduler's yield points instead of blocking the thread, so the deterministic
//! scheduler sees every wait and can interleave, and detect deadlocks. Outside a simulation
//! each call is the std call plus one thread-local read. Guards are std's guards.

use std::sync::{LockResult, MutexGuard, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use crate::sim::sched;

/// A mutex that yields to the simulator's scheduler while another actor holds it.
#[derive(Default, Debug)]
pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub const fn new(v: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(v))
    }

    pub fn into_inner(self) -> LockResult<T> {
        self.0.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        loop {
            match self.0.try_lock() {
                Ok(g) => return Ok(g),
                Err(TryLockError::Poisoned(p)) => return Err(p),
                Err(TryLockError::WouldBlock) => {
                    if !sched::lock_blocked() {
                        return self.0.lock();
                    }
                }
            }
        }
    }

    /// The guard if the lock is free now (None when anyone holds it, the caller included).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.0.get_mut()
    }
}

/// A reader-writer lock that yields to the simulator's scheduler while it cannot be taken.
#[derive(Default, Debug)]
pub struct RwLock<T: ?Sized>(std::sync::RwLock<T>);

impl<T> RwLock<T> {
    pub const fn new(v: T) -> RwLock<T> {
        RwLock(std::sync::RwLock::new(v))
    }
}

impl<T: ?Sized> RwLock<T> {
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        loop {
            match self.0.try_read() {
                Ok(g) => return Ok(g),
                Err(TryLockError::Poisoned(p)) => return Err(p),
                Err(TryLockError::WouldBlock) => {
                    if !sched::lock_blocked() {
                        return self.0.read();
                    }
                }
            }
        }
    }

    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        loop {
            match self.0.try_write() {
                Ok(g) => return Ok(g),
                Err(TryLockError::Poisoned(p)) => return Err(p),
                Err(TryLockError::WouldBlock) => {
                    if !sched::lock_blocked() {
                        return self.0.write();
                    }
                }
            }
        }
    }
}

/// A condition variable for [`Mutex`]: inside a simulation a wait lets the other actors run
/// and then takes the lock again (a spurious wake-up, which callers handle by re-checking).
#[derive(Default, Debug)]
pub struct Condvar(std::sync::Condvar);

impl Condvar {
    pub const fn new() -> Condvar {
        Condvar(std::sync::Condvar::new())
    }

    pub fn wait<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        mutex: &'a Mutex<T>,
    ) -> LockResult<MutexGuard<'a, T>> {
        if sched::is_actor() {
            // Blocked until another actor changes something: the scheduler treats it as a
            // lock wait (so a wait nobody can end is reported as a deadlock).
            drop(guard);
            sched::lock_blocked();
            return mutex.lock();
        }
        self.0.wait(guard)
    }

    pub fn notify_all(&self) {
        sched::progress();
        self.0.notify_all()
    }
}
