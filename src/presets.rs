//! The names of the nemesis presets: the vocabulary `--nemesis`, the audit's columns and the
//! workload files' `[expect]` tables share. A leaf of its own, so that the workload (which
//! the nemesis uses) can check its `[expect]` table against them without an import circle.

/// The presets `--nemesis NAME` knows (each built by `nemesis::Schedule::preset`).
pub const PRESETS: [&str; 11] = [
    "none",
    "kill-clients",
    "pause-clients",
    "kill-redis",
    "pause-redis",
    "failover",
    "clock-jump",
    "clock-skew",
    "partition",
    "crash-points",
    "mix",
];

/// The known name closest to `name`, if it is near enough to be a slip of the keyboard
/// (`pause-client`, `overlapp`, `inside-lease`): the "did you mean" of an error message.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // Up to a third of the name may differ, at least 2 edits: a missing letter, a swapped
    // pair, `-` for `_`; further than that, a guess would mislead more than help.
    let allowed = (name.chars().count() / 3).max(2);
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|&(d, _)| d > 0 && d <= allowed)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_get_a_suggestion_and_far_ones_none() {
        assert_eq!(closest("pause-client", PRESETS), Some("pause-clients"));
        assert_eq!(closest("kill-redsi", PRESETS), Some("kill-redis"));
        assert_eq!(
            closest("inside-lease", ["must", "may", "inside_lease"]),
            Some("inside_lease")
        );
        assert_eq!(closest("byzantine", PRESETS), None);
        // An exact name is no miss.
        assert_eq!(closest("none", PRESETS), None);
    }
}
