//! The run's one clock: CLOCK_MONOTONIC nanoseconds since the run began.
//!
//! CLOCK_MONOTONIC is shared by every process on the machine, so the controller reads it once
//! at the start and hands that base to each worker: their events then order correctly
//! against each other with no clock exchange. Wall time is only for people.

use nix::time::{clock_gettime, ClockId};

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn monotonic_ns() -> i64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 keeps the type simple if it ever did.
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}

/// Unix time in milliseconds, for the `wall` field.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Time since the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunClock {
    pub base_ns: i64,
}

impl RunClock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        RunClock {
            base_ns: monotonic_ns(),
        }
    }

    pub fn now(&self) -> i64 {
        monotonic_ns() - self.base_ns
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_run_clock_starts_near_zero_and_never_goes_back() {
        let clock = super::RunClock::start();
        let a = clock.now();
        let b = clock.now();
        assert!((0..1_000_000_000).contains(&a), "{a}");
        assert!(b >= a);
    }
}
