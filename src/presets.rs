//! The names of the nemesis presets: the vocabulary `--nemesis`, the audit's columns and the
//! workload files' `[expect]` tables share. A leaf of its own, so that the workload (which
//! the nemesis uses) can check its `[expect]` table against them without an import circle.

/// The presets `--nemesis NAME` knows (each built by `nemesis::Schedule::preset`).
pub const PRESETS: [&str; 12] = [
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
    "kill-sessions",
    "mix",
];

/// Why `name` can be neither a preset nor a schedule file, or None if it can be one: a
/// name that is no preset, has no `.toml` and names no file is taken for a misspelt preset.
/// `--nemesis`, a workload's `nemesis` and the schedule's resolution share it.
pub fn unknown_nemesis(name: &str) -> Option<String> {
    if PRESETS.contains(&name) || name.ends_with(".toml") || std::path::Path::new(name).exists() {
        return None;
    }
    Some(format!(
        "{}, and no schedule file has that name",
        crate::suggest::unknown("nemesis preset", name, &PRESETS)
    ))
}

/// A schedule file's audit column: its file name without `.toml`; None for a preset.
pub fn schedule_column(nemesis: &str) -> Option<String> {
    if PRESETS.contains(&nemesis) {
        return None;
    }
    let name = std::path::Path::new(nemesis).file_name()?.to_str()?;
    Some(name.strip_suffix(".toml").unwrap_or(name).to_string())
}
