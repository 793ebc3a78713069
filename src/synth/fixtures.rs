//! Histories for the tests of the simulator and the injectors.

use super::config::{SynthConfig, MS};

/// A small, busy history with every fault.
pub(crate) fn busy(seed: u64) -> SynthConfig {
    SynthConfig {
        seed,
        keys: 3,
        processes: 6,
        events: 5_000,
        fenced: true,
        kill_prob: 0.01,
        info_prob: 0.02,
        renew_prob: 0.3,
        reentrant_prob: 0.2,
        expire_prob: 0.05,
        shuffle_window_ns: MS,
        ..SynthConfig::default()
    }
}
