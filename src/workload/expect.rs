//! What a workload expects of each nemesis: the anomaly kinds that must be found, and those
//! that may be. A workload file states them under `[expect]`:
//!
//! ```toml
//! [expect]
//! none = {}                                        # valid: no anomaly at all
//! kill-clients = { must = ["unavailable"] }
//! pause-clients = { must = ["overlap"], may = ["stale-write", "lost-lock"] }
//! failover = { must = ["overlap"], inside_lease = true }
//! crash-points = { error = "TypeError" }          # the run must stop on this error
//! kill-servers = { must = ["overlap"], rate = "9/10" } # found in at least 9 of 10 rounds
//! ```
//!
//! A nemesis the file does not name is expected to leave the run valid. So a misspelt
//! preset, field or kind would quietly turn a required flaw into "nothing expected":
//! `check_table` refuses them, naming the line.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::presets::{self, PRESETS};
use crate::report::{AnomalyKind, KindCounts, ANOMALY_KINDS};
use crate::suggest::did_you_mean;
use crate::tomlfile::FileError;

/// The kinds a cell must and may show; anything else found is a surprise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expectation {
    /// Each of these kinds must be found at least once.
    pub must: Vec<AnomalyKind>,
    /// These may be found or not (faults make them likely but not certain).
    pub may: Vec<AnomalyKind>,
    /// At least one overlap must begin while the earlier holder's lease still ran: the lock
    /// itself failed, not just a holder that outlived its lease.
    pub inside_lease: bool,
    /// The run must stop on an error that says this (a library that raises where it should
    /// answer, reported by its adapter as an `error`): a flaw no history anomaly can show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How often, over an audit's rounds, the `must` kinds must be found: "9/10", at least
    /// 9 of 10 rounds. None: in every round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// A required detection rate, "K/N": found in at least K of every N rounds (1 <= K <= N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub found: u32,
    pub of: u32,
}

impl Rate {
    /// Reads "K/N", or says why it is no rate.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let number = |s: &str| s.trim().parse::<u32>().ok();
        let Some((Some(found), Some(of))) =
            text.split_once('/').map(|(k, n)| (number(k), number(n)))
        else {
            return Err(format!(
                "\"{text}\" is no rate: write K/N, found in at least K of N rounds (\"9/10\")"
            ));
        };
        if of == 0 {
            return Err(format!("\"{text}\": the rounds, N, must be at least 1"));
        }
        if found == 0 {
            return Err(format!(
                "\"{text}\": K must be at least 1 (a kind that need never be found belongs in `may`)"
            ));
        }
        if found > of {
            return Err(format!("\"{text}\": K cannot be more than N"));
        }
        Ok(Rate { found, of })
    }

    /// How many of `rounds` rounds must meet the expectation: K/N of them, rounded up.
    pub fn required(self, rounds: usize) -> usize {
        (self.found as usize * rounds).div_ceil(self.of as usize)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.found, self.of)
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        let text = String::deserialize(d)?;
        Rate::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Expectation {
    /// Why `found` (anomaly counts by kind) differs from the expectation, or None if it
    /// meets it.
    pub fn differs(&self, found: &KindCounts) -> Option<String> {
        let missing: Vec<&str> = self
            .must
            .iter()
            .filter(|k| found.get(*k).copied().unwrap_or(0) == 0)
            .map(|k| k.as_str())
            .collect();
        let surprising: Vec<String> = found
            .iter()
            .filter(|(k, n)| **n > 0 && !self.must.contains(k) && !self.may.contains(k))
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("expected but not found: {}", missing.join(", ")));
        }
        if !surprising.is_empty() {
            why.push(format!("not expected: {}", surprising.join(", ")));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// How many of `rounds` rounds must meet the expectation: its `rate` of them, or all.
    pub fn required(&self, rounds: usize) -> usize {
        self.rate.map_or(rounds, |rate| rate.required(rounds))
    }
}

/// The fields an entry may have: `Expectation`'s.
const FIELDS: [&str; 5] = ["must", "may", "inside_lease", "error", "rate"];

/// Checks the `[expect]` table of a workload file's `text` as written: each entry names a
/// nemesis preset, has only `Expectation`'s fields, lists only anomaly kinds, and no kind
/// both in `must` and `may` (it is either required or tolerated). The error names the file
/// (`name`), the line of the first offending key or kind, and the field. A wrong type or a
/// file that is no TOML at all is left to the parser, whose errors say so already.
pub fn check_table(text: &str, name: &str) -> Result<(), FileError> {
    let Ok(root) = toml::de::DeTable::parse(text) else {
        return Ok(());
    };
    let Some(table) = root
        .get_ref()
        .get("expect")
        .and_then(|t| t.get_ref().as_table())
    else {
        return Ok(());
    };
    // The workload's own schedule file, if it names one, has an entry of its own too.
    let own = root
        .get_ref()
        .get("nemesis")
        .and_then(|n| n.get_ref().as_str())
        .and_then(crate::presets::schedule_column);
    // Every problem with where it is; the first in the file is reported.
    let mut problems: Vec<(Range<usize>, String)> = Vec::new();
    for (preset, entry) in table.iter() {
        let preset_name: &str = preset.get_ref();
        if !presets::is_preset(preset_name) && own.as_deref() != Some(preset_name) {
            let own = own
                .as_deref()
                .map(|own| format!(", or `{own}`, this workload's own schedule file"))
                .unwrap_or_default();
            problems.push((
                preset.span(),
                format!(
                    "field `expect.{preset_name}`: no nemesis preset is called \"{preset_name}\"{}; the presets are {}{own}",
                    presets::near_preset(preset_name)
                        .map_or(String::new(), |k| format!(" (did you mean \"{k}\"?)")),
                    PRESETS.join(", ")
                ),
            ));
            continue;
        }
        // Both names of one preset: two entries for one column.
        if let Some(new) = presets::renamed(preset_name).filter(|new| table.get(*new).is_some()) {
            problems.push((
                preset.span(),
                format!("field `expect.{preset_name}`: `{preset_name}` is the old name of `{new}`, which has an entry too; keep one"),
            ));
            continue;
        }
        let Some(entry) = entry.get_ref().as_table() else {
            continue;
        };
        for (field, _) in entry.iter() {
            let field_name: &str = field.get_ref();
            if !FIELDS.contains(&field_name) {
                problems.push((
                    field.span(),
                    format!(
                        "field `expect.{preset_name}.{field_name}`: no such field{}; an expectation has {}",
                        did_you_mean(field_name, FIELDS),
                        FIELDS.join(", ")
                    ),
                ));
            }
        }
        // The kinds listed under `field`, with where each is.
        let kinds = |field: &str| -> Vec<(Range<usize>, &str)> {
            let list = entry.get(field).and_then(|v| v.get_ref().as_array());
            list.into_iter()
                .flat_map(|list| list.iter())
                .filter_map(|k| Some((k.span(), k.get_ref().as_str()?)))
                .collect()
        };
        let must = kinds("must");
        let may = kinds("may");
        for (field, list) in [("must", &must), ("may", &may)] {
            for (span, kind) in list {
                if AnomalyKind::parse(kind).is_none() {
                    problems.push((
                        span.clone(),
                        format!(
                            "field `expect.{preset_name}.{field}`: \"{kind}\" is no anomaly kind{}; the kinds are {}",
                            did_you_mean(kind, ANOMALY_KINDS),
                            AnomalyKind::known()
                        ),
                    ));
                }
            }
        }
        // A run that must stop on an error has no history to find kinds in: a `must` or
        // an `inside_lease` beside `error` would never be judged.
        if let Some((field, value)) = entry.iter().find(|(f, _)| *f.get_ref() == "error") {
            for other in ["must", "inside_lease"] {
                if entry.get(other).is_some() {
                    problems.push((
                        field.span().start..value.span().end,
                        format!(
                            "field `expect.{preset_name}.error`: a run that must stop on an error finds no kinds; drop `{other}` (or `error`)"
                        ),
                    ));
                }
            }
        }
        // A rate says how often the `must` kinds are found: without them it would say
        // nothing (a valid cell must be valid in every round).
        if let Some((field, value)) = entry.iter().find(|(f, _)| *f.get_ref() == "rate") {
            let why = match value.get_ref().as_str() {
                _ if must.is_empty() => Some(
                    "a rate says in how many rounds the `must` kinds are found, and this entry has no `must`"
                        .to_string(),
                ),
                Some(text) => Rate::parse(text).err(),
                // Not a string: the parser names the type.
                None => None,
            };
            if let Some(why) = why {
                problems.push((
                    field.span().start..value.span().end,
                    format!("field `expect.{preset_name}.rate`: {why}"),
                ));
            }
        }
        for (span, kind) in &may {
            if must.iter().any(|(_, k)| k == kind) {
                problems.push((
                    span.clone(),
                    format!(
                        "field `expect.{preset_name}.may`: \"{kind}\" is in `must` too: a kind is either required (must) or tolerated (may)"
                    ),
                ));
            }
        }
    }
    match problems.into_iter().min_by_key(|(span, _)| span.start) {
        None => Ok(()),
        Some((span, message)) => Err(FileError {
            path: name.to_string(),
            line: text[..span.start.min(text.len())].matches('\n').count() + 1,
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::{counted as found, named};

    #[test]
    fn an_empty_expectation_wants_a_valid_run() {
        let e = Expectation::default();
        assert_eq!(e.differs(&found(&[])), None);
        let why = e.differs(&found(&[("overlap", 2)])).expect("differs");
        assert!(why.contains("not expected: overlap ×2"), "{why}");
    }

    #[test]
    fn must_kinds_are_required_and_may_kinds_tolerated() {
        let e = Expectation {
            must: named(&["overlap"]),
            may: named(&["stale-write"]),
            ..Expectation::default()
        };
        assert!(e.differs(&found(&[])).expect("missing").contains("overlap"));
        assert_eq!(e.differs(&found(&[("overlap", 1)])), None);
        assert_eq!(
            e.differs(&found(&[("overlap", 1), ("stale-write", 3)])),
            None
        );
        assert!(e
            .differs(&found(&[("overlap", 1), ("lost-update", 1)]))
            .expect("surprise")
            .contains("lost-update"));
    }

    #[test]
    fn an_unknown_kind_is_no_expectation() {
        let e = toml::from_str::<Expectation>("must = [\"overlapp\"]").unwrap_err();
        assert!(
            e.message().contains("\"overlapp\" is no anomaly kind"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::presets::{Column, Preset};

    /// A workload with `entries` under `[expect]`, which starts on line 4.
    fn workload(entries: &str) -> String {
        format!("algorithm = \"set-nx-px\"\nclients = 4\n\n[expect]\nnone = {{}}\n{entries}")
    }

    fn refused(entries: &str) -> FileError {
        let text = workload(entries);
        let error = check_table(&text, "w.toml").expect_err("refused");
        // Whatever loads a workload refuses it the same way.
        let loaded =
            crate::workload::WorkloadSpec::from_toml(&text, "w.toml").expect_err("refused");
        assert_eq!(loaded.to_string(), error.to_string());
        error
    }

    #[test]
    fn a_misspelt_preset_is_refused_with_its_line_and_a_suggestion() {
        let error = refused(
            "kill-clients = { must = [\"unavailable\"] }\npause-client = { must = [\"overlap\"] }\n",
        );
        assert_eq!(error.line, 7, "{error}");
        let text = error.to_string();
        assert!(
            text.starts_with("w.toml:7: field `expect.pause-client`"),
            "{text}"
        );
        assert!(text.contains("did you mean \"pause-clients\"?"), "{text}");
        // Far from every preset: no guess, but the list.
        let text = refused("byzantine = {}\n").to_string();
        assert!(!text.contains("did you mean"), "{text}");
        assert!(text.contains("none, kill-clients, pause-clients"), "{text}");
    }

    #[test]
    fn a_workloads_own_schedule_file_has_an_entry_by_its_name() {
        let text = "algorithm = \"set-nx-px\"\nnemesis = \"schedules/cut-past-session.toml\"\n\n[expect]\ncut-past-session = { must = [\"overlap\"] }\n";
        check_table(text, "w.toml").unwrap();
        // Another schedule's name is no entry, and the message says which name is.
        let other = text.replace("\ncut-past-session = ", "\ncut-other = ");
        let error = check_table(&other, "w.toml").expect_err("refused");
        assert_eq!(error.line, 5, "{error}");
        assert!(
            error
                .to_string()
                .contains("or `cut-past-session`, this workload's own schedule file"),
            "{error}"
        );
        // Without a schedule file of its own, a workload's entries are presets only.
        let error = refused("cut-past-session = {}\n");
        assert!(!error.to_string().contains("own schedule"), "{error}");
    }

    #[test]
    fn an_unknown_field_is_refused_at_its_line() {
        let error = refused("pause-clients = { must = [\"overlap\"] }\nfailover = { must = [\"overlap\"],\n  inside-lease = true }\n");
        assert_eq!(error.line, 8, "{error}");
        let text = error.to_string();
        assert!(
            text.contains("field `expect.failover.inside-lease`"),
            "{text}"
        );
        assert!(text.contains("did you mean \"inside_lease\"?"), "{text}");
    }

    #[test]
    fn an_unknown_kind_is_refused_at_its_line() {
        let error = refused("[expect.pause-clients]\nmust = [\"overlap\"]\nmay = [\"stale-write\",\n  \"lost-updates\"]\n");
        assert_eq!(error.line, 9, "{error}");
        let text = error.to_string();
        assert!(text.contains("field `expect.pause-clients.may`"), "{text}");
        assert!(
            text.contains("\"lost-updates\" is no anomaly kind (did you mean \"lost-update\"?)"),
            "{text}"
        );
    }

    #[test]
    fn a_kind_both_required_and_tolerated_is_refused() {
        let error = refused(
            "pause-clients = { must = [\"overlap\"], may = [\"stale-write\", \"overlap\"] }\n",
        );
        assert_eq!(error.line, 6, "{error}");
        let text = error.to_string();
        assert!(text.contains("field `expect.pause-clients.may`"), "{text}");
        assert!(text.contains("\"overlap\" is in `must` too"), "{text}");
    }

    #[test]
    fn an_error_to_stop_on_with_kinds_that_must_be_found_is_refused() {
        let error = refused("crash-points = { error = \"TypeError\", must = [\"overlap\"] }\n");
        assert_eq!(error.line, 6, "{error}");
        let text = error.to_string();
        assert!(text.contains("field `expect.crash-points.error`"), "{text}");
        assert!(text.contains("drop `must`"), "{text}");
        // Alone, or with kinds it may find before it stops, it is fine.
        check_table(
            &workload("crash-points = { error = \"TypeError\", may = [\"bad-lease\"] }\n"),
            "w.toml",
        )
        .unwrap();
    }

    #[test]
    fn a_rate_is_read_and_a_bad_one_refused_at_its_line() {
        let text = workload("pause-clients = { must = [\"overlap\"], rate = \"9/10\" }\n");
        let spec = crate::workload::WorkloadSpec::from_toml(&text, "w.toml").unwrap();
        let e = &spec.expect[&Column::Preset(Preset::PauseClients)];
        assert_eq!(e.rate, Some(Rate { found: 9, of: 10 }));
        // With 10 rounds 9 must meet it, with 3 all three, with 1 the one.
        assert_eq!((e.required(10), e.required(3), e.required(1)), (9, 3, 1));
        assert_eq!(e.required(20), 18);
        // Without a rate, every round.
        assert_eq!(Expectation::default().required(7), 7);
        for (rate, says) in [
            ("9:10", "\"9:10\" is no rate: write K/N"),
            ("nine/10", "is no rate"),
            ("9/0", "\"9/0\": the rounds, N, must be at least 1"),
            ("0/10", "K must be at least 1"),
            ("11/10", "\"11/10\": K cannot be more than N"),
        ] {
            let error = refused(&format!(
                "kill-clients = {{ must = [\"unavailable\"] }}\npause-clients = {{ must = [\"overlap\"],\n  rate = \"{rate}\" }}\n"
            ));
            assert_eq!(error.line, 8, "{error}");
            let text = error.to_string();
            assert!(
                text.starts_with("w.toml:8: field `expect.pause-clients.rate`: ")
                    && text.contains(says),
                "{text}"
            );
        }
        // A rate without `must` is refused: it would say nothing.
        let error = refused("pause-clients = { may = [\"overlap\"], rate = \"9/10\" }\n");
        assert_eq!(error.line, 6, "{error}");
        assert!(error.to_string().contains("has no `must`"), "{error}");
        // The rate is written as it was read, and read back.
        let json = serde_json::to_string(e).unwrap();
        assert!(json.contains(r#""rate":"9/10""#), "{json}");
        assert_eq!(&serde_json::from_str::<Expectation>(&json).unwrap(), e);
        // Without one, nothing is written (older files stay as they were).
        let json = serde_json::to_string(&Expectation::default()).unwrap();
        assert!(!json.contains("rate"), "{json}");
    }

    #[test]
    fn the_first_problem_in_the_file_is_named() {
        // Entries are kept in name order; the report follows the file.
        let error = refused("pause-servers = { must = [\"overlapp\"] }\nclock-jmp = {}\n");
        assert_eq!(error.line, 6, "{error}");
        assert!(error.to_string().contains("overlapp"), "{error}");
    }

    #[test]
    fn an_old_preset_name_is_read_as_the_new_one() {
        let text = format!(
            "nemesis = \"pause-redis\"\n{}",
            workload("kill-redis = { must = [\"overlap\"] }\npause-servers = {}\n")
        );
        let spec = crate::workload::WorkloadSpec::from_toml(&text, "w.toml").unwrap();
        assert_eq!(
            spec.nemesis,
            Some(crate::presets::Nemesis::Preset(Preset::PauseServers))
        );
        let keys: Vec<&str> = spec.expect.keys().map(Column::name).collect();
        assert_eq!(keys, ["kill-servers", "none", "pause-servers"]);
        assert!(spec.expect.keys().all(|c| c.preset().is_some()));
        assert_eq!(
            spec.expect[&Column::Preset(Preset::KillServers)].must,
            [AnomalyKind::Overlap]
        );
        // Both names of one preset would be two entries for one column.
        let error = refused("kill-servers = {}\nkill-redis = {}\n");
        assert_eq!(error.line, 7, "{error}");
        assert!(
            error
                .to_string()
                .contains("`kill-redis` is the old name of `kill-servers`, which has an entry too"),
            "{error}"
        );
        // A slip is suggested by the new name.
        let error = refused("kill-redsi = {}\n");
        assert!(
            error
                .to_string()
                .contains("(did you mean \"kill-servers\"?)"),
            "{error}"
        );
    }

    #[test]
    fn a_good_table_passes_and_other_tables_are_not_judged() {
        let text = workload("pause-clients = { must = [\"overlap\"], may = [\"stale-write\"], inside_lease = false }\n");
        check_table(&text, "w.toml").unwrap();
        check_table("[other]\nmust = [\"nothing\"]\n", "w.toml").unwrap();
        // A type error is the parser's: it names it already.
        check_table("[expect]\nnone = 3\n", "w.toml").unwrap();
    }

    /// Every workload file in the repository with an `[expect]` table: workloads/ and
    /// examples/ (the adapters' files need their programs to load whole; the table alone
    /// needs nothing).
    #[test]
    fn every_expect_table_in_the_repository_passes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut folders = vec![root.join("workloads"), root.join("examples")];
        let mut checked = 0;
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "toml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if text.contains("[expect]") {
                        check_table(&text, &path.display().to_string())
                            .unwrap_or_else(|e| panic!("{e}"));
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 30, "{checked} files with [expect]");
    }
}
