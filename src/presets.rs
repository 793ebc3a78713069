//! The names of the nemesis presets: the vocabulary `--nemesis`, the audit's columns and the
//! workload files' `[expect]` tables share. A leaf of its own, so that the workload (which
//! the nemesis uses) can check its `[expect]` table against them without an import circle.
//!
//! It also decides which old names stand for which new ones: the presets that kill and
//! pause servers were named after Redis before they acted on every service. A name a user
//! writes goes through `current_preset` or `current_kind` where it is read, so everything
//! downstream (schedules, audit columns, reports) sees the new name only.

use std::sync::Mutex;

/// A nemesis preset: a named schedule of faults, built for a workload by
/// `nemesis::Schedule::preset`. A match over it names every preset, so a new one cannot be
/// left out of the schedules, the audit's columns or the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    None,
    KillClients,
    PauseClients,
    KillServers,
    PauseServers,
    Failover,
    ClockJump,
    ClockSkew,
    Partition,
    CrashPoints,
    KillSessions,
    Mix,
}

impl Preset {
    /// Every preset, in the order `--nemeses` defaults to and the audit's columns follow.
    pub const ALL: [Preset; 12] = [
        Preset::None,
        Preset::KillClients,
        Preset::PauseClients,
        Preset::KillServers,
        Preset::PauseServers,
        Preset::Failover,
        Preset::ClockJump,
        Preset::ClockSkew,
        Preset::Partition,
        Preset::CrashPoints,
        Preset::KillSessions,
        Preset::Mix,
    ];

    /// Its name, as `--nemesis` takes it and every file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::None => "none",
            Preset::KillClients => "kill-clients",
            Preset::PauseClients => "pause-clients",
            Preset::KillServers => "kill-servers",
            Preset::PauseServers => "pause-servers",
            Preset::Failover => "failover",
            Preset::ClockJump => "clock-jump",
            Preset::ClockSkew => "clock-skew",
            Preset::Partition => "partition",
            Preset::CrashPoints => "crash-points",
            Preset::KillSessions => "kill-sessions",
            Preset::Mix => "mix",
        }
    }

    /// The preset of current name `name` (as every name is once read); None for any other.
    pub fn parse(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The preset `name` names, by its current name or an old one (noticed once on
    /// stderr); None for a schedule file or a misspelling.
    pub fn named(name: &str) -> Option<Preset> {
        let name = current_preset(name);
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The presets' names, in `Preset::ALL`'s order: for messages and suggestions.
pub const PRESETS: [&str; Preset::ALL.len()] = {
    let mut names = [""; Preset::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Preset::ALL[i].name();
        i += 1;
    }
    names
};

/// Presets renamed: (old name, new name). The old names are still accepted.
const RENAMED_PRESETS: [(&str, &str); 2] = [
    ("kill-redis", "kill-servers"),
    ("pause-redis", "pause-servers"),
];

/// Schedule files' fault kinds renamed: (old name, new name). The old names still parse.
const RENAMED_KINDS: [(&str, &str); 2] = [
    ("kill-redis", "kill-server"),
    ("pause-redis", "pause-server"),
];

/// The old names already noticed, by what they named: one notice per name per process,
/// however often a workload file is read.
static NOTICED: Mutex<Vec<(&str, &str)>> = Mutex::new(Vec::new());

/// The new name of `name` in `table`, with a notice on stderr the first time; else `name`.
fn current<'a>(
    what: &'static str,
    table: &[(&'static str, &'static str)],
    name: &'a str,
) -> &'a str {
    let Some(&(old, new)) = table.iter().find(|(old, _)| *old == name) else {
        return name;
    };
    let mut noticed = NOTICED.lock().unwrap_or_else(|e| e.into_inner());
    if !noticed.contains(&(what, old)) {
        noticed.push((what, old));
        crate::note!("notice: {what} `{old}` is the old name of `{new}`");
    }
    new
}

/// The preset `name` stands for: the new name of an old one (noticed once on stderr),
/// else `name` as it is (a preset, a schedule file, or a misspelling for the caller).
pub fn current_preset(name: &str) -> &str {
    current("nemesis preset", &RENAMED_PRESETS, name)
}

/// The fault kind `name` stands for in a schedule file, as `current_preset`.
pub fn current_kind(name: &str) -> &str {
    current("fault kind", &RENAMED_KINDS, name)
}

/// The new name of an old preset name, without a notice; None for any other name.
pub fn renamed(name: &str) -> Option<&'static str> {
    RENAMED_PRESETS
        .iter()
        .find(|(old, _)| *old == name)
        .map(|(_, new)| *new)
}

/// Whether `name` is a preset, by its new name or an old one.
pub fn is_preset(name: &str) -> bool {
    PRESETS.contains(&name) || renamed(name).is_some()
}

/// `unknown nemesis preset "name"` with the nearest preset, an old name's slip suggested
/// by its new name, or the list when none is near.
pub fn unknown_preset(name: &str) -> String {
    match near_preset(name) {
        Some(near) => format!("unknown nemesis preset \"{name}\" (did you mean \"{near}\"?)"),
        None => crate::suggest::unknown("nemesis preset", name, &PRESETS),
    }
}

/// The preset `name` is a slip of, by its new name (`kill-redsi` is `kill-servers`).
pub fn near_preset(name: &str) -> Option<&'static str> {
    let old = RENAMED_PRESETS.iter().map(|(old, _)| *old);
    let near = crate::suggest::closest(name, PRESETS.iter().copied().chain(old))?;
    Some(renamed(near).unwrap_or(near))
}

/// The fault kind `name` is a slip of an old name of (`pause-redsi`), by its new name.
pub fn near_old_kind(name: &str) -> Option<&'static str> {
    let near = crate::suggest::closest(name, RENAMED_KINDS.iter().map(|(old, _)| *old))?;
    current_kind_quietly(near)
}

/// The new name of an old fault kind's name, without a notice.
fn current_kind_quietly(name: &str) -> Option<&'static str> {
    RENAMED_KINDS
        .iter()
        .find(|(old, _)| *old == name)
        .map(|(_, new)| *new)
}

/// Why `name` can be neither a preset nor a schedule file, or None if it can be one: a
/// name that is no preset, has no `.toml` and names no file is taken for a misspelt preset.
/// `--nemesis`, a workload's `nemesis` and the schedule's resolution share it.
pub fn unknown_nemesis(name: &str) -> Option<String> {
    if is_preset(name) || name.ends_with(".toml") || std::path::Path::new(name).exists() {
        return None;
    }
    Some(format!(
        "{}, and no schedule file has that name",
        unknown_preset(name)
    ))
}

/// A schedule file's audit column: its file name without `.toml`; None for a preset.
pub fn schedule_column(nemesis: &str) -> Option<String> {
    if is_preset(nemesis) {
        return None;
    }
    let name = std::path::Path::new(nemesis).file_name()?.to_str()?;
    Some(name.strip_suffix(".toml").unwrap_or(name).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_stand_for_new_ones() {
        assert_eq!(current_preset("kill-redis"), "kill-servers");
        assert_eq!(current_preset("pause-redis"), "pause-servers");
        assert_eq!(current_preset("kill-servers"), "kill-servers");
        assert_eq!(current_preset("nemesis/x.toml"), "nemesis/x.toml");
        assert_eq!(current_kind("kill-redis"), "kill-server");
        assert_eq!(current_kind("pause-redis"), "pause-server");
        assert_eq!(current_kind("kill-client"), "kill-client");
        assert!(is_preset("kill-redis") && is_preset("pause-servers") && !is_preset("kill"));
        assert_eq!(unknown_nemesis("pause-redis"), None);
        assert_eq!(schedule_column("kill-redis"), None);
        // Every new name is a preset.
        for (_, new) in RENAMED_PRESETS {
            assert!(PRESETS.contains(&new), "{new}");
        }
        assert_eq!(Preset::named("kill-redis"), Some(Preset::KillServers));
        assert_eq!(Preset::named("mix"), Some(Preset::Mix));
        assert_eq!(Preset::named("nemesis/x.toml"), None);
        for preset in Preset::ALL {
            assert_eq!(Preset::named(preset.name()), Some(preset));
        }
    }

    #[test]
    fn a_slip_of_either_name_is_suggested_by_the_new_one() {
        assert_eq!(near_preset("kill-redsi"), Some("kill-servers"));
        assert_eq!(near_preset("pause-server"), Some("pause-servers"));
        assert_eq!(near_preset("byzantine"), None);
        assert_eq!(near_old_kind("pause-redsi"), Some("pause-server"));
        assert_eq!(near_old_kind("meteor"), None);
        let why = unknown_nemesis("kill-server").unwrap();
        assert!(
            why.starts_with(
                "unknown nemesis preset \"kill-server\" (did you mean \"kill-servers\"?)"
            ),
            "{why}"
        );
        let why = unknown_nemesis("byzantine").unwrap();
        assert!(why.contains("(known: none, kill-clients"), "{why}");
        assert!(!why.contains("redis"), "{why}");
    }
}
