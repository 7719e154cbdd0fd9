//! Per-user limits on starting runs: how many may run at once, and how many may start in a
//! minute. Over either, a start is refused with when to try again, before anything is stored.
//! The Hub counts one user's running runs and reserves the new run's place in one step
//! (`hub::ReserveStart`), the place is held until the run is registered, and only accepted
//! starts are counted. The local CLI (no user name) is not limited. The time comes from a
//! [`Clock`] (the system's, or a test's), never read directly.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserLimits {
    /// Runs one user may have running at once.
    pub concurrent_runs: usize,
    /// Runs one user may start in any 60 seconds.
    pub starts_per_minute: usize,
}

impl Default for UserLimits {
    fn default() -> Self {
        UserLimits { concurrent_runs: 8, starts_per_minute: 30 }
    }
}

/// A refused start: what to tell the user, and after how many seconds to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub retry_after_secs: u64,
}

const WINDOW: Duration = Duration::from_secs(60);

/// Where the rate limiters (the start limits here, a socket's message rate in
/// [`crate::web::limits`]) read the time: the system's monotonic clock, or one that a test
/// moves by hand, so that a test of a limit never waits for it to pass.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// None: the system's clock; Some: the manual clock's time.
    manual: Option<Arc<Mutex<Instant>>>,
}

impl Clock {
    /// A clock that stands still until [`Clock::advance`] moves it.
    pub fn manual() -> Self {
        Clock { manual: Some(Arc::new(Mutex::new(Instant::now()))) }
    }

    pub fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(t) => *t.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Moves a manual clock on by `by` (the system's clock cannot be moved: nothing happens).
    pub fn advance(&self, by: Duration) {
        if let Some(t) = &self.manual {
            *t.lock().unwrap_or_else(|p| p.into_inner()) += by;
        }
    }
}

/// The start times of each user's accepted runs in the last minute, and the starts each user
/// has in flight (checked, not yet registered).
#[derive(Debug, Default)]
pub struct StartLimiter {
    starts: Mutex<HashMap<String, VecDeque<Instant>>>,
    /// Starts that passed the check and are being stored and registered: they count as running
    /// (and against the per-minute budget) until they are, or fail.
    pending: Mutex<HashMap<String, usize>>,
}

/// A place held for a start that passed the limits, from the check until the run is registered
/// with the Hub (it travels with the registration, and the Hub gives it back in the same step
/// as it starts counting the run, see [`Reserved::accept`]) or the start fails; given back when
/// dropped at the latest.
#[derive(Debug)]
pub struct Reserved {
    limiter: Arc<StartLimiter>,
    user: String,
    clock: Clock,
    released: AtomicBool,
}

impl Reserved {
    /// The run is registered: counted against the per-minute budget (first, so a check in
    /// between counts it twice rather than not at all), then the place is given back.
    pub fn accept(&self) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        self.limiter.accepted(&self.user, self.clock.now());
        self.release();
    }

    /// Gives the place back (once; later calls do nothing).
    fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut pending = self.limiter.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = pending.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                pending.remove(&self.user);
            }
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.release();
    }
}

impl StartLimiter {
    /// Checks the limits with `running` runs going, places reserved included
    /// ([`StartLimiter::pending`]), and reserves one more. The Hub calls it as it counts the
    /// runs, so that no other start of the user's counts in between.
    pub fn reserve(
        self: &Arc<Self>,
        user: &str,
        running: usize,
        limits: UserLimits,
        clock: &Clock,
    ) -> Result<Reserved, Refused> {
        let pending = self.pending(user);
        self.check_counting(user, running, pending, limits, clock.now())?;
        *self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(user.to_string())
            .or_default() += 1;
        Ok(Reserved {
            limiter: self.clone(),
            user: user.to_string(),
            clock: clock.clone(),
            released: AtomicBool::new(false),
        })
    }

    /// The places `user` holds for starts not yet registered.
    pub fn pending(&self, user: &str) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).get(user).copied().unwrap_or(0)
    }

    /// Whether `user` may start a run at `now` with `running` runs going (fewer than the limit
    /// running and fewer than the limit started in the last minute). Counts nothing: a start
    /// is counted by [`StartLimiter::accepted`] once it is, so refused ones cost nothing.
    pub fn check(
        &self,
        user: &str,
        running: usize,
        limits: UserLimits,
        now: Instant,
    ) -> Result<(), Refused> {
        self.check_counting(user, running, 0, limits, now)
    }

    /// [`StartLimiter::check`], with `in_flight` starts not yet accepted counted against the
    /// per-minute budget too.
    fn check_counting(
        &self,
        user: &str,
        running: usize,
        in_flight: usize,
        limits: UserLimits,
        now: Instant,
    ) -> Result<(), Refused> {
        if running >= limits.concurrent_runs {
            return Err(Refused {
                message: format!(
                    "you already have {running} deliberations running (the limit is {}); \
                     wait for one to end or cancel one",
                    limits.concurrent_runs
                ),
                retry_after_secs: 5,
            });
        }
        let mut starts = self.starts.lock().unwrap_or_else(|p| p.into_inner());
        let window = starts.entry(user.to_string()).or_default();
        while window.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            window.pop_front();
        }
        if window.len() + in_flight >= limits.starts_per_minute {
            let oldest = window.front().copied().unwrap_or(now);
            let wait = WINDOW.saturating_sub(now.duration_since(oldest));
            return Err(Refused {
                message: format!(
                    "you started {} deliberations in the last minute (the limit is {})",
                    window.len() + in_flight,
                    limits.starts_per_minute
                ),
                retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
            });
        }
        Ok(())
    }

    /// Counts a start of `user`'s, accepted at `now`, against the per-minute budget.
    pub fn accepted(&self, user: &str, now: Instant) {
        let mut starts = self.starts.lock().unwrap_or_else(|p| p.into_inner());
        starts.entry(user.to_string()).or_default().push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_and_per_minute_limits_with_when_to_retry() {
        let limiter = StartLimiter::default();
        let limits = UserLimits { concurrent_runs: 2, starts_per_minute: 3 };
        let admit = |user: &str, running: usize, at: Instant| {
            limiter.check(user, running, limits, at)?;
            limiter.accepted(user, at);
            Ok::<(), Refused>(())
        };
        let t0 = Instant::now();
        assert!(admit("alice", 0, t0).is_ok());
        let busy = admit("alice", 2, t0).unwrap_err();
        assert!(busy.message.contains("2 deliberations running"), "{busy:?}");
        assert!(admit("alice", 1, t0 + Duration::from_secs(10)).is_ok());
        assert!(admit("alice", 0, t0 + Duration::from_secs(20)).is_ok());
        let fast = admit("alice", 0, t0 + Duration::from_secs(30)).unwrap_err();
        assert_eq!(fast.retry_after_secs, 30, "the first start leaves the window at 60 s");
        // Another user has a window of their own.
        assert!(admit("bob", 0, t0 + Duration::from_secs(30)).is_ok());
        // A minute after the first start there is room again.
        assert!(admit("alice", 0, t0 + Duration::from_secs(60)).is_ok());
        // A refused start is not counted.
        assert!(admit("alice", 0, t0 + Duration::from_secs(61)).is_err());
        assert!(admit("alice", 0, t0 + Duration::from_secs(71)).is_ok());
    }

    #[test]
    fn a_reserved_place_counts_until_it_is_given_back() {
        let limiter = Arc::new(StartLimiter::default());
        let limits = UserLimits { concurrent_runs: 2, starts_per_minute: 3 };
        let clock = Clock::manual();
        // What the Hub counts: the user's runs and their reserved places.
        let reserve = |user: &str, running: usize, limits: UserLimits| {
            limiter.reserve(user, running + limiter.pending(user), limits, &clock)
        };
        // Two starts in flight at once (neither registered yet): a third is refused.
        let a = reserve("alice", 0, limits).unwrap();
        let b = reserve("alice", 0, limits).unwrap();
        let third = reserve("alice", 0, limits).unwrap_err();
        assert!(third.message.contains("2 deliberations running"), "{third:?}");
        assert!(reserve("bob", 0, limits).is_ok(), "each user has their own");
        // One fails (its place is given back); the other is registered: accepted (counted in
        // the minute's budget) and its place given back once; it now counts as running.
        drop(a);
        b.accept();
        b.accept();
        drop(b);
        assert_eq!(limiter.pending("alice"), 0);
        assert!(reserve("alice", 1, limits).is_ok());
        // In flight starts count against the per-minute budget too: 1 accepted + 2 held.
        let roomy = UserLimits { concurrent_runs: 10, ..limits };
        let c = reserve("alice", 0, roomy).unwrap();
        let d = reserve("alice", 0, roomy).unwrap();
        let fast = reserve("alice", 0, roomy).unwrap_err();
        assert!(fast.message.contains("3 deliberations in the last minute"), "{fast:?}");
        drop((c, d));
        assert_eq!(limiter.pending("alice"), 0, "every place given back");
    }

    #[test]
    fn a_start_checked_but_never_accepted_costs_nothing() {
        let limiter = StartLimiter::default();
        let limits = UserLimits { concurrent_runs: 8, starts_per_minute: 3 };
        let t0 = Instant::now();
        for _ in 0..30 {
            assert!(limiter.check("alice", 0, limits, t0).is_ok());
        }
        for _ in 0..3 {
            limiter.check("alice", 0, limits, t0).unwrap();
            limiter.accepted("alice", t0);
        }
        assert!(limiter.check("alice", 0, limits, t0).is_err(), "three accepted: the budget");
    }
}
