//! Per-user limits on starting runs: how many may run at once, and how many may start in a
//! minute. Over either, a start is refused with when to try again, before anything is stored.
//! The local CLI (no user name) is not limited.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
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

/// The start times of each user's runs in the last minute.
#[derive(Debug, Default)]
pub struct StartLimiter {
    starts: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl StartLimiter {
    /// Admits a start by `user` at `now` (recording it) when the user has fewer than the
    /// limit running (`running`) and started fewer than the limit in the last minute.
    pub fn admit(
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
        let window = starts.entry(user.to_string()).or_default();
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
        window.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_and_per_minute_limits_with_when_to_retry() {
        let limiter = StartLimiter::default();
        let limits = UserLimits { concurrent_runs: 2, starts_per_minute: 3 };
        let t0 = Instant::now();
        assert!(limiter.admit("alice", 0, limits, t0).is_ok());
        let busy = limiter.admit("alice", 2, limits, t0).unwrap_err();
        assert!(busy.message.contains("2 deliberations running"), "{busy:?}");
        assert!(limiter.admit("alice", 1, limits, t0 + Duration::from_secs(10)).is_ok());
        assert!(limiter.admit("alice", 0, limits, t0 + Duration::from_secs(20)).is_ok());
        let fast = limiter.admit("alice", 0, limits, t0 + Duration::from_secs(30)).unwrap_err();
        assert_eq!(fast.retry_after_secs, 30, "the first start leaves the window at 60 s");
        // Another user has a window of their own.
        assert!(limiter.admit("bob", 0, limits, t0 + Duration::from_secs(30)).is_ok());
        // A minute after the first start there is room again.
        assert!(limiter.admit("alice", 0, limits, t0 + Duration::from_secs(60)).is_ok());
        // A refused start is not counted.
        assert!(limiter.admit("alice", 0, limits, t0 + Duration::from_secs(61)).is_err());
        assert!(limiter.admit("alice", 0, limits, t0 + Duration::from_secs(71)).is_ok());
    }
}
