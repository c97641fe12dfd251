//! Rate limiting of guesses: failed attempts (web sign-ins per client address
//! and user name, agent enrolments per client address) in a sliding window; once either count reaches the limit,
//! sign-in answers 429 until the oldest failure leaves the window. Kept in
//! memory: a restart forgets, which only gives an attacker one more window.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most keys remembered; past it, keys whose failures all left the window
/// are dropped first (see [`SignInLimiter::record_failure`]).
const MAX_KEYS: usize = 100_000;

pub struct SignInLimiter {
    attempts: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl SignInLimiter {
    pub fn new(attempts: u32, window: Duration) -> SignInLimiter {
        SignInLimiter {
            attempts: attempts.max(1) as usize,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(wait)` when any of `keys` has used up its failures.
    pub fn check(&self, keys: &[String], now: Instant) -> Result<(), Duration> {
        let mut failures = self.lock();
        let mut wait = None;
        for key in keys {
            if let Some(times) = failures.get_mut(key) {
                self.expire(times, now);
                if times.len() >= self.attempts {
                    let oldest = times.front().copied().unwrap_or(now);
                    let left = self.window.saturating_sub(now.duration_since(oldest));
                    wait = wait.max(Some(left));
                }
            }
        }
        wait.map_or(Ok(()), Err)
    }

    pub fn record_failure(&self, keys: &[String], now: Instant) {
        let mut failures = self.lock();
        if failures.len() >= MAX_KEYS {
            failures.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < self.window)
            });
        }
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            self.expire(times, now);
            times.push_back(now);
        }
    }

    fn expire(&self, times: &mut VecDeque<Instant>, now: Instant) {
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.window)
        {
            times.pop_front();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Instant>>> {
        // A panic while holding the lock leaves counts, not broken state.
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The limiter's key of an attempt that names nothing: the client address
/// (an attempt without one, from a socketless test router, is not limited).
pub fn client_keys(client: Option<std::net::IpAddr>) -> Vec<String> {
    client.map(|ip| format!("ip:{ip}")).into_iter().collect()
}

/// The limiter's keys of one attempt: the client address and the name
/// (lower-cased, so case games do not buy more tries).
pub fn keys(client: Option<std::net::IpAddr>, name: &str) -> Vec<String> {
    let mut keys = vec![format!("user:{}", name.trim().to_lowercase())];
    if let Some(ip) = client {
        keys.push(format!("ip:{ip}"));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_limit_wait_for_the_window() {
        let limiter = SignInLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        let k = keys(Some([10, 0, 0, 1].into()), "Alice");
        for i in 0..3 {
            assert!(limiter.check(&k, t0).is_ok(), "attempt {i}");
            limiter.record_failure(&k, t0);
        }
        let wait = limiter.check(&k, t0 + Duration::from_secs(10));
        assert_eq!(wait, Err(Duration::from_secs(50)));
        // The same name from another address is refused too, and another
        // name from the same address.
        assert!(limiter.check(&keys(None, "alice"), t0).is_err());
        assert!(limiter
            .check(&keys(Some([10, 0, 0, 1].into()), "bob"), t0)
            .is_err());
        assert!(limiter
            .check(&keys(Some([10, 0, 0, 2].into()), "bob"), t0)
            .is_ok());
        // Once the window has passed, attempts are allowed again.
        assert!(limiter.check(&k, t0 + Duration::from_secs(60)).is_ok());
    }
}
