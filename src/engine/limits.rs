//! Per-user limits on starting runs: how many may run at once, and how many may start in a
//! minute. Over either, a start is refused with when to try again, before anything is stored.
//! One user's starts pass a gate one at a time from the count of their running runs to the new
//! run's registration, and only accepted starts are counted. The local CLI (no user name) is not
//! limited. The time comes from a [`Clock`] (the system's, or a test's), never read directly.

use std::collections::{HashMap, VecDeque};
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

/// The start times of each user's accepted runs in the last minute, and one gate per user that
/// makes counting their running runs and registering a new one a single step.
#[derive(Debug, Default)]
pub struct StartLimiter {
    starts: Mutex<HashMap<String, VecDeque<Instant>>>,
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl StartLimiter {
    /// Waits for `user`'s gate. Held from the count of the user's running runs until the new
    /// run is registered (or refused), so a burst of starts cannot all count the same runs:
    /// one user's starts go through it one at a time; other users' are not held up.
    pub async fn gate(&self, user: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let gate = {
            let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
            gates.entry(user.to_string()).or_default().clone()
        };
        gate.lock_owned().await
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
        let Some(window) = starts.get_mut(user) else { return Ok(()) };
        while window.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            window.pop_front();
        }
        if window.len() >= limits.starts_per_minute {
            let oldest = window.front().copied().unwrap_or(now);
            let wait = WINDOW.saturating_sub(now.duration_since(oldest));
            return Err(Refused {
                message: format!(
                    "you started {} deliberations in the last minute (the limit is {})",
                    window.len(),
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
