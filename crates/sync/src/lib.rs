//! Poison-tolerant locking: the one way dsh takes a standard-library lock.
//!
//! A thread that panics while it holds a `Mutex` or `RwLock` poisons it. dsh keeps running
//! after such a panic (a tool body, a plugin hook or a front-end task failed; the panic is
//! reported where it happened), and the state behind the lock is still the state the next
//! holder must see: every holder keeps it consistent between statements, and a second panic
//! on every later `lock()` would turn one failed task into a dead process. So dsh never
//! propagates poison: these helpers hand back the guard either way.
//!
//! Owns: [`lock`], [`read`], [`write`], [`wait`], [`into_inner`]. Depends on the standard library only,
//! so every dsh crate (the kernel and `dsh-secrets` included) may use it; it must not depend
//! on any other crate.

use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::RwLockWriteGuard;

/// Locks `mutex`, recovering the guard if an earlier holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `lock` for reading, recovering the guard if an earlier writer panicked.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `lock` for writing, recovering the guard if an earlier writer panicked.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` with `guard`, recovering the guard if a holder panicked meanwhile.
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// The value inside `mutex`, whether or not an earlier holder panicked.
pub fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn poison_mutex(mutex: &Arc<Mutex<Vec<u32>>>) {
        let held = Arc::clone(mutex);
        let result = std::thread::spawn(move || {
            let mut guard = held.lock().unwrap();
            guard.push(2);
            panic!("poison the lock on purpose");
        })
        .join();
        assert!(result.is_err());
        assert!(mutex.is_poisoned());
    }

    #[test]
    fn a_poisoned_mutex_still_yields_the_state_its_last_holder_left() {
        let mutex = Arc::new(Mutex::new(vec![1]));
        poison_mutex(&mutex);
        assert_eq!(*lock(&mutex), vec![1, 2]);
        lock(&mutex).push(3);
        let mutex = Arc::try_unwrap(mutex).unwrap();
        assert_eq!(into_inner(mutex), vec![1, 2, 3]);
    }

    #[test]
    fn a_poisoned_rwlock_still_reads_and_writes() {
        let rwlock = Arc::new(RwLock::new(1));
        let held = Arc::clone(&rwlock);
        let result = std::thread::spawn(move || {
            let mut guard = held.write().unwrap();
            *guard = 2;
            panic!("poison the lock on purpose");
        })
        .join();
        assert!(result.is_err());
        assert!(rwlock.is_poisoned());
        assert_eq!(*read(&rwlock), 2);
        *write(&rwlock) = 3;
        assert_eq!(*read(&rwlock), 3);
    }
}
