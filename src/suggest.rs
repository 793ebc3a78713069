//! "Did you mean": the one place that turns a misspelt name (an algorithm, a preset, a
//! topology, a workload field, an anomaly kind) into the nearest known one. A leaf, so that
//! the command line, the workload files and the schedule files can all use it.

/// The known name closest to `name`, if it is near enough to be a slip of the keyboard
/// (`pause-client`, `overlapp`, `inside-lease`).
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

/// ` (did you mean "x"?)` for a near miss of one of `known`, or nothing.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known).map_or(String::new(), |k| format!(" (did you mean \"{k}\"?)"))
}

/// `unknown <what> "name" (did you mean "x"?)`, or, when no known name is near,
/// `unknown <what> "name" (known: a, b, c)`: the list is what helps then.
pub fn unknown(what: &str, name: &str, known: &[&str]) -> String {
    match closest(name, known.iter().copied()) {
        Some(near) => format!("unknown {what} \"{name}\" (did you mean \"{near}\"?)"),
        None => format!("unknown {what} \"{name}\" (known: {})", known.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRESETS: [&str; 3] = ["none", "pause-clients", "kill-servers"];

    #[test]
    fn near_misses_get_a_suggestion_and_far_ones_none() {
        assert_eq!(closest("pause-client", PRESETS), Some("pause-clients"));
        assert_eq!(closest("kill-srevers", PRESETS), Some("kill-servers"));
        assert_eq!(
            closest("inside-lease", ["must", "may", "inside_lease"]),
            Some("inside_lease")
        );
        assert_eq!(closest("byzantine", PRESETS), None);
        // An exact name is no miss.
        assert_eq!(closest("none", PRESETS), None);
    }

    #[test]
    fn an_unknown_name_gets_the_nearest_or_the_list() {
        assert_eq!(
            unknown("algorithm", "set-nx-xp", &["setnx-del", "set-nx-px"]),
            "unknown algorithm \"set-nx-xp\" (did you mean \"set-nx-px\"?)"
        );
        assert_eq!(
            unknown("nemesis preset", "byzantine", &PRESETS),
            "unknown nemesis preset \"byzantine\" (known: none, pause-clients, kill-servers)"
        );
        assert_eq!(
            did_you_mean("mst", ["must", "may"]),
            " (did you mean \"must\"?)"
        );
        assert_eq!(did_you_mean("zzzzzz", ["must", "may"]), "");
    }
}
