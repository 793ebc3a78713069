//! The names of the nemesis presets: the vocabulary `--nemesis`, the audit's columns and the
//! workload files' `[expect]` tables share. A leaf of its own, so that the workload (which
//! the nemesis uses) can check its `[expect]` table against them without an import circle.
//!
//! It also decides which old names stand for which new ones: the presets that kill and
//! pause servers were named after Redis before they acted on every service. A name a user
//! writes goes through `current_preset` or `current_kind` where it is read, so everything
//! downstream (schedules, audit columns, reports) sees the new name only.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

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

/// What a run's faults are, as a workload's `nemesis` or `--nemesis` names them: a preset,
/// or a schedule file. Read and written as the preset's name or the file's path; an old
/// preset name is read as its new one (noticed once).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Nemesis {
    Preset(Preset),
    /// A schedule file's path (`nemesis/*.toml`), absolute once its workload is read.
    File(String),
}

impl Nemesis {
    /// The preset `name` names (by its current or an old name), else the schedule file.
    pub fn named(name: &str) -> Nemesis {
        Preset::named(name).map_or_else(|| Nemesis::File(name.to_string()), Nemesis::Preset)
    }

    /// The preset's name or the file's path, as the user wrote it (an old name renewed).
    pub fn name(&self) -> &str {
        match self {
            Nemesis::Preset(preset) => preset.name(),
            Nemesis::File(path) => path,
        }
    }

    /// The preset, or None for a schedule file.
    pub fn preset(&self) -> Option<Preset> {
        match self {
            Nemesis::Preset(preset) => Some(*preset),
            Nemesis::File(_) => None,
        }
    }

    /// The audit column it is: the preset, or the schedule file by its name without
    /// `.toml` (`schedules/cut-past-session.toml` is `cut-past-session`).
    pub fn column(&self) -> Column {
        match self {
            Nemesis::Preset(preset) => Column::Preset(*preset),
            Nemesis::File(path) => Column::Schedule(file_column(path)),
        }
    }
}

impl From<String> for Nemesis {
    fn from(name: String) -> Nemesis {
        Nemesis::named(&name)
    }
}

impl From<Nemesis> for String {
    fn from(nemesis: Nemesis) -> String {
        nemesis.name().to_string()
    }
}

impl std::fmt::Display for Nemesis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A column of an audit's matrix, and the key of a workload's `[expect]` entry: a preset,
/// or a workload's own schedule file by its name. Read and written as that name; ordered
/// by it, so a map of columns is written in the order a map of names was.
#[derive(Debug, Clone, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Column {
    Preset(Preset),
    Schedule(String),
}

impl Column {
    /// The preset `name` names (by its current or an old name), else a schedule's column.
    pub fn named(name: &str) -> Column {
        Preset::named(name).map_or_else(|| Column::Schedule(name.to_string()), Column::Preset)
    }

    pub fn name(&self) -> &str {
        match self {
            Column::Preset(preset) => preset.name(),
            Column::Schedule(name) => name,
        }
    }

    /// The preset, or None for a schedule file's column.
    pub fn preset(&self) -> Option<Preset> {
        match self {
            Column::Preset(preset) => Some(*preset),
            Column::Schedule(_) => None,
        }
    }
}

/// No faults: the column a default (empty) cell stands in.
impl Default for Column {
    fn default() -> Column {
        Column::Preset(Preset::None)
    }
}

impl From<Preset> for Column {
    fn from(preset: Preset) -> Column {
        Column::Preset(preset)
    }
}

impl From<String> for Column {
    fn from(name: String) -> Column {
        Column::named(&name)
    }
}

impl From<&Column> for Column {
    fn from(column: &Column) -> Column {
        column.clone()
    }
}

impl From<&str> for Column {
    fn from(name: &str) -> Column {
        Column::named(name)
    }
}

impl From<Column> for String {
    fn from(column: Column) -> String {
        column.name().to_string()
    }
}

impl PartialEq for Column {
    fn eq(&self, other: &Column) -> bool {
        self.name() == other.name()
    }
}

impl std::hash::Hash for Column {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

/// A map keyed by columns is looked up by name (`expect["failover"]`): equality, order and
/// hash are the name's.
impl std::borrow::Borrow<str> for Column {
    fn borrow(&self) -> &str {
        self.name()
    }
}

impl PartialEq<str> for Column {
    fn eq(&self, name: &str) -> bool {
        self.name() == name
    }
}

impl PartialOrd for Column {
    fn partial_cmp(&self, other: &Column) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Column {
    fn cmp(&self, other: &Column) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl std::fmt::Display for Column {
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
    Some(file_column(nemesis))
}

/// A schedule file's column: its file name without `.toml`.
fn file_column(path: &str) -> String {
    let name = (std::path::Path::new(path).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or(path);
    name.strip_suffix(".toml").unwrap_or(name).to_string()
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
    fn a_nemesis_is_a_preset_or_a_file_and_reads_and_writes_as_its_name() {
        let read = |json: &str| serde_json::from_str::<Nemesis>(json).unwrap();
        assert_eq!(
            read("\"kill-clients\""),
            Nemesis::Preset(Preset::KillClients)
        );
        assert_eq!(read("\"kill-redis\""), Nemesis::Preset(Preset::KillServers));
        let file = read("\"nemesis/pause-long.toml\"");
        assert_eq!(file, Nemesis::File("nemesis/pause-long.toml".into()));
        assert_eq!(file.preset(), None);
        assert_eq!(
            serde_json::to_string(&file).unwrap(),
            "\"nemesis/pause-long.toml\""
        );
        assert_eq!(
            serde_json::to_string(&Nemesis::Preset(Preset::KillServers)).unwrap(),
            "\"kill-servers\""
        );
        // Its audit column: the preset, or the file's name.
        assert_eq!(file.column(), Column::Schedule("pause-long".into()));
        assert_eq!(read("\"none\"").column(), Column::Preset(Preset::None));
    }

    #[test]
    fn columns_compare_order_and_look_up_by_name() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(Column::Schedule("cut-long".into()), 1);
        map.insert(Column::Preset(Preset::None), 2);
        map.insert(Column::Preset(Preset::ClockJump), 3);
        let keys: Vec<&str> = map.keys().map(Column::name).collect();
        assert_eq!(keys, ["clock-jump", "cut-long", "none"]);
        assert_eq!(map["cut-long"], 1);
        assert_eq!(Column::named("none"), Column::Preset(Preset::None));
        assert_eq!(
            Column::named("cut-long"),
            Column::Schedule("cut-long".into())
        );
        let json = serde_json::to_string(&map).unwrap();
        assert_eq!(json, r#"{"clock-jump":3,"cut-long":1,"none":2}"#);
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
