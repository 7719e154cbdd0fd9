//! When and how long to wait before retrying a failed model call: exponential backoff with
//! jitter on 429, 5xx and transport errors, honouring the provider's `Retry-After`. Pure: the
//! ModelCall actor supplies the clock and the jitter seed, and keeps every attempt inside the
//! call's own timeout budget.

use std::time::Duration;

use crate::modes::common::SplitMix64;
use crate::modes::{CallError, CallErrorKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// Errors worth another attempt: rate limits, server errors and broken connections.
    /// Client errors (401, 402, 404 model not found) would fail the same way again.
    pub fn retryable(e: &CallError) -> bool {
        match e.kind {
            CallErrorKind::Http => matches!(e.status, Some(429) | Some(500..=599)),
            CallErrorKind::Transport => true,
            CallErrorKind::Timeout | CallErrorKind::Malformed | CallErrorKind::Cancelled => false,
        }
    }

    /// The wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed with `e`:
    /// the provider's `Retry-After` when given, else base × 2^(attempt-1) with ±25 % jitter,
    /// capped at `max_delay`.
    pub fn delay(&self, attempt: u32, e: &CallError, jitter_seed: u64) -> Duration {
        if let Some(ms) = e.retry_after_ms {
            return Duration::from_millis(ms).min(self.max_delay);
        }
        let exp = self.base_delay.saturating_mul(1u32 << (attempt.saturating_sub(1)).min(16));
        let jitter = (SplitMix64::new(jitter_seed).next_u64() % 501) as f64 / 1000.0 + 0.75;
        exp.mul_f64(jitter).min(self.max_delay)
    }

    /// Whether to try again after attempt `attempt` failed with `e`, `remaining` before the
    /// call's deadline: only if the error is retryable, attempts remain, and the wait leaves time.
    pub fn next(
        &self,
        attempt: u32,
        e: &CallError,
        remaining: Duration,
        jitter_seed: u64,
    ) -> Option<Duration> {
        if attempt >= self.max_attempts || !Self::retryable(e) {
            return None;
        }
        let wait = self.delay(attempt, e, jitter_seed);
        (wait < remaining).then_some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> CallError {
        CallError::new(CallErrorKind::Http, Some(status), "x")
    }

    #[test]
    fn only_transient_errors_are_retried() {
        for s in [429, 500, 502, 503] {
            assert!(RetryPolicy::retryable(&http(s)), "{s}");
        }
        for s in [400, 401, 402, 404] {
            assert!(!RetryPolicy::retryable(&http(s)), "{s}");
        }
        assert!(RetryPolicy::retryable(&CallError::new(CallErrorKind::Transport, None, "reset")));
        assert!(!RetryPolicy::retryable(&CallError::new(CallErrorKind::Timeout, None, "t")));
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter_and_a_cap() {
        let p = RetryPolicy::default();
        for seed in 0..50 {
            let d1 = p.delay(1, &http(503), seed).as_millis();
            let d3 = p.delay(3, &http(503), seed).as_millis();
            assert!((375..=625).contains(&d1), "{d1}");
            assert!((1500..=2500).contains(&d3), "{d3}");
        }
        assert_eq!(p.delay(30, &http(503), 1), p.max_delay);
    }

    #[test]
    fn retry_after_is_honoured_and_the_budget_respected() {
        let p = RetryPolicy::default();
        let mut e = http(429);
        e.retry_after_ms = Some(3_000);
        assert_eq!(p.delay(1, &e, 7), Duration::from_millis(3_000));
        assert_eq!(p.next(1, &e, Duration::from_secs(10), 7), Some(Duration::from_millis(3_000)));
        assert_eq!(
            p.next(1, &e, Duration::from_secs(2), 7),
            None,
            "the wait would pass the deadline"
        );
        assert_eq!(p.next(4, &http(503), Duration::from_secs(60), 7), None, "attempts used up");
        assert_eq!(p.next(1, &http(401), Duration::from_secs(60), 7), None);
    }
}
