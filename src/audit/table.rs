//! The terminal table of an audit: a row per algorithm, a column per nemesis, abbreviated as
//! far as needed to fit the terminal, a legend, the cells that did not pass, and the counts.

use std::fmt::Write as _;

use comfy_table::{ContentLineStyle, LineStyle, Table, TableStyle};

use super::matrix::{Cell, Matrix, Status};
use super::text::{duration_text, one_line, seconds_text};
use crate::presets::{Column, Preset};
use crate::report::AnomalyKind;

/// The widest the terminal table tries to stay.
const TABLE_WIDTH: usize = 120;

impl Matrix {
    /// The terminal table: a row per algorithm, a column per nemesis, each cell "ok", the
    /// kinds found (abbreviated), "✗" when they differ from the expectation, "ERR" when the
    /// run failed, "n/a" when not applicable, blank where the grid has a cell that was not asked
    /// for (`--cells`, `--quick`). Headers and kinds
    /// are abbreviated as far as needed to fit 120 columns; a legend says what they stand
    /// for. Below: one line per failing or not-applicable cell, and the counts.
    pub fn to_table(&self) -> String {
        let mut chosen = None;
        for level in [Level::Full, Level::ShortHeaders, Level::Codes] {
            let table = self.grid(level).render();
            let fits = table.lines().all(|l| l.chars().count() <= TABLE_WIDTH);
            chosen = Some((level, table));
            if fits {
                break;
            }
        }
        let Some((level, mut out)) = chosen else {
            return String::new();
        };
        out.push('\n');

        for chunk in wrap("legend: ", &self.legend(level), TABLE_WIDTH) {
            let _ = writeln!(out, "{chunk}");
        }

        let listed: Vec<&Cell> = self
            .ordered_cells()
            .into_iter()
            .filter(|c| c.status != Status::Pass)
            .collect();
        if !listed.is_empty() {
            out.push('\n');
        }
        // Failures first: they are what the reader came for.
        for cell in listed
            .iter()
            .filter(|c| c.status.fails())
            .chain(listed.iter().filter(|c| !c.status.fails()))
        {
            let marker = match cell.status {
                Status::Differs => "✗  ",
                Status::Error => "ERR",
                Status::Untested => "UNT",
                _ => "n/a",
            };
            let mut text = format!(
                "{marker} {} × {}: {}",
                cell.algorithm,
                cell.nemesis,
                one_line(cell.why_text())
            );
            if cell.status == Status::Differs {
                if let Some(ms) = cell.first_anomaly_ms {
                    let _ = write!(text, ", first anomaly at {}", seconds_text(ms / 1e3));
                }
            }
            if let Some(dir) = &cell.run_dir {
                let _ = write!(text, " ({})", dir.display());
            }
            let _ = writeln!(out, "{text}");
        }

        if let Some(phases) = self.phases_text() {
            let _ = writeln!(out, "\n{phases}");
        }
        let _ = writeln!(
            out,
            "\n{} in {}, {}{}: {}",
            self.counts_text(),
            duration_text(self.seconds),
            self.seeds_text(),
            if self.hosts.is_empty() {
                String::new()
            } else {
                format!(", servers on {}", self.hosts.join(" "))
            },
            if self.passed() { "PASSED" } else { "FAILED" }
        );
        out
    }

    /// The header and rows of the terminal table at one abbreviation level.
    fn grid(&self, level: Level) -> Grid {
        let mut header = vec!["algorithm".to_string()];
        header.extend(self.nemeses.iter().map(|n| match level {
            Level::Full => n.to_string(),
            _ => short_nemesis(n).to_string(),
        }));
        let rows = self
            .algorithms
            .iter()
            .map(|algorithm| {
                let mut row = vec![algorithm.clone()];
                row.extend(self.nemeses.iter().map(|nemesis| {
                    match self.cell(algorithm, nemesis.name()) {
                        Some(cell) => cell_text(cell, level),
                        // Not asked for: nothing to show.
                        None => String::new(),
                    }
                }));
                row
            })
            .collect();
        Grid { header, rows }
    }

    /// What the table's marks and abbreviations stand for (only those it shows).
    fn legend(&self, level: Level) -> Vec<String> {
        let mut parts = vec!["ok = valid, as expected".to_string()];
        parts.push("kinds alone = anomalies found, all expected".into());
        parts.push("✗ = differs from the expectation".into());
        parts.push("ERR = the run failed".into());
        if self.cells.iter().any(|c| c.nothing_found_text() == "error") {
            parts.push("error = stopped on the error it expects, as expected".into());
        }
        if self.cells.iter().any(|c| c.status == Status::Untested) {
            parts.push(
                "untested = valid, but no fault of the preset acted on the running clients (no pass)"
                    .into(),
            );
        }
        parts
            .push("n/a = not applicable (no fault of the preset can act: not run, no pass)".into());
        if self.cells.iter().any(|c| c.rounds.is_some()) {
            parts.push(
                "9/10 = rounds that met the expectation, of those run (a kind found in another number: its own)"
                    .into(),
            );
        }
        let mut kinds: Vec<String> = Vec::new();
        for kind in AnomalyKind::ALL {
            let short = short_kind(kind, level);
            let used = self.cells.iter().any(|c| {
                matches!(c.status, Status::Pass | Status::Differs)
                    && c.found.get(&kind).is_some_and(|n| *n > 0)
            });
            if used && short != kind.as_str() {
                kinds.push(format!("{short} = {kind}"));
            }
        }
        parts.extend(kinds);
        if level != Level::Full {
            for nemesis in &self.nemeses {
                let short = short_nemesis(nemesis);
                if short != nemesis.name() {
                    parts.push(format!("{short} = {nemesis}"));
                }
            }
        }
        parts
    }
}

/// How far the terminal table abbreviates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Full nemesis names, short words for kinds ("stale", "unavail").
    Full,
    /// Short nemesis names ("kill-cl"), short words for kinds.
    ShortHeaders,
    /// Short nemesis names, two-letter codes for kinds ("OV+SW").
    Codes,
}

struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// Left-aligned columns two spaces apart, a rule under the header, no borders.
const PLAIN: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction(' '))
    .header_separator(LineStyle::none().fill('─').junction(' '))
    .content_lines(ContentLineStyle::none().junction(' '));

impl Grid {
    /// The table's lines, without trailing blanks.
    fn render(&self) -> String {
        let mut table = Table::new();
        table
            .load_style(PLAIN)
            .set_header(self.header.clone())
            .add_rows(self.rows.clone());
        // One blank after each column but the last, then the junction's.
        let columns = table.column_count();
        for column in table.column_iter_mut().take(columns.saturating_sub(1)) {
            column.set_padding((0, 1));
        }
        if let Some(last) = table.column_mut(columns.saturating_sub(1)) {
            last.set_padding((0, 0));
        }
        table.trim_fmt()
    }
}

/// A cell of the terminal table; over rounds, with its rate ("overlap 9/10").
fn cell_text(cell: &Cell, level: Level) -> String {
    let text = status_text(cell, level);
    match cell.rounds.as_ref().filter(|r| r.of > 0) {
        Some(rounds) => format!("{text} {}", rounds.rate_text()),
        None => text,
    }
}

/// A cell's status and kinds in the terminal table.
fn status_text(cell: &Cell, level: Level) -> String {
    match cell.status {
        Status::Error => "ERR".into(),
        Status::NotApplicable => "n/a".into(),
        Status::Untested => "untested".into(),
        Status::Pass | Status::Differs => {
            let kinds = cell.kinds();
            let joiner = if level == Level::Codes { "+" } else { "," };
            let text = if kinds.is_empty() {
                cell.nothing_found_text().to_string()
            } else {
                kinds
                    .iter()
                    .map(|(k, _)| short_kind(*k, level))
                    .collect::<Vec<_>>()
                    .join(joiner)
            };
            if cell.status == Status::Differs {
                text + " ✗"
            } else {
                text
            }
        }
    }
}

/// An anomaly kind for the terminal table.
fn short_kind(kind: AnomalyKind, level: Level) -> &'static str {
    let (word, code) = match kind {
        AnomalyKind::Overlap => ("overlap", "OV"),
        AnomalyKind::LostLock => ("lost-lock", "LL"),
        AnomalyKind::StaleWrite => ("stale", "SW"),
        AnomalyKind::TokenOrder => ("tok-order", "TO"),
        AnomalyKind::DuplicateToken => ("dup-token", "DT"),
        AnomalyKind::Starvation => ("starved", "ST"),
        AnomalyKind::BadLease => ("bad-lease", "BL"),
        AnomalyKind::Unavailable => ("unavail", "UN"),
        AnomalyKind::Unfair => ("unfair", "UF"),
        AnomalyKind::LostUpdate => ("lost-upd", "LU"),
    };
    if level == Level::Codes {
        code
    } else {
        word
    }
}

/// A nemesis preset's column header when space is short (a schedule file's column keeps
/// its name).
fn short_nemesis(nemesis: &Column) -> &str {
    let Column::Preset(preset) = *nemesis else {
        return nemesis.name();
    };
    match preset {
        Preset::KillClients => "kill-cl",
        Preset::PauseClients => "pause-cl",
        Preset::KillServers => "kill-sv",
        Preset::PauseServers => "pause-sv",
        Preset::ClockJump => "jump",
        Preset::ClockSkew => "skew",
        Preset::CrashPoints => "crash-pt",
        Preset::KillSessions => "kill-ss",
        // The row must fit in 120 columns with every preset.
        Preset::Partition => "part",
        Preset::None | Preset::Failover | Preset::Mix => preset.name(),
    }
}

/// `prefix` then the entries joined by " · ", broken between entries into lines of at most
/// `width` characters where possible; later lines are indented as deep as the prefix.
fn wrap(prefix: &str, entries: &[String], width: usize) -> Vec<String> {
    let indent = " ".repeat(prefix.chars().count());
    let mut lines: Vec<String> = Vec::new();
    let mut line = prefix.to_string();
    let mut empty = true;
    for entry in entries {
        let len = line.chars().count();
        if !empty && len + 3 + entry.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(&indent);
            empty = true;
        }
        if !empty {
            line.push_str(" · ");
        }
        line.push_str(entry);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{expect, found, full, small, ALGORITHMS};

    #[test]
    fn the_table_has_a_row_per_algorithm_and_abbreviations() {
        let table = small().to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("algorithm"), "{table}");
        for n in ["none", "kill-clients", "pause-clients", "failover"] {
            assert!(lines[0].contains(n), "{table}");
        }
        let row = |name: &str| {
            *lines
                .iter()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
        };
        // setnx-del: none ok, kill-clients unavail (expected), no pause-clients cell, skipped.
        let del: Vec<&str> = row("setnx-del").split_whitespace().collect();
        assert_eq!(del, ["setnx-del", "ok", "unavail", "n/a"], "{table}");
        // The cell not asked for is blank: n/a stays in the failover column.
        let line = row("setnx-del");
        assert_eq!(line.find("n/a"), lines[0].find("failover"), "{table}");
        let px: Vec<&str> = row("set-nx-px").split_whitespace().collect();
        assert_eq!(
            px,
            ["set-nx-px", "ok", "ok", "overlap,stale", "✗", "ERR"],
            "{table}"
        );
        // Columns line up: each cell starts under its header.
        let column = lines[0].find("pause-clients").unwrap();
        let line = row("set-nx-px");
        assert_eq!(
            line.char_indices()
                .position(|(i, _)| i == line.find("overlap").unwrap()),
            Some(column),
            "{table}"
        );
        assert!(table.contains("stale = stale-write"), "{table}");
        assert!(table.contains("unavail = unavailable"), "{table}");
        assert!(!table.contains('?'), "{table}");
        // One line per failing or skipped cell, with its run folder.
        assert!(
            table.contains(
                "set-nx-px × pause-clients: not expected: stale-write ×1, first anomaly at 2.31s (r/c)"
            ),
            "{table}"
        );
        assert!(
            table.contains("ERR set-nx-px × failover: redis-server exited"),
            "{table}"
        );
        assert!(
            table.contains("setnx-del × failover: failover needs replicas"),
            "{table}"
        );
        assert!(!table.contains("setnx-del × none"), "{table}");
        assert!(table.contains("FAILED"), "{table}");
    }

    #[test]
    fn the_full_table_fits_in_120_columns() {
        let m = full(|a, n| match (a, n) {
            ("set-nx-px", "pause-clients") => Some(Cell::judge(
                a,
                n,
                expect(&["overlap"], &[]),
                found(&[("overlap", 3), ("stale-write", 2), ("lost-lock", 1)]),
            )),
            ("setnx-getset", "clock-skew") => Some(Cell::judge(
                a,
                n,
                expect(&[], &[]),
                found(&[("overlap", 3), ("stale-write", 2)]),
            )),
            ("redlock", "crash-points") => Some(Cell::error(a, n, expect(&[], &[]), "x")),
            _ => None,
        });
        let table = m.to_table();
        let rows: Vec<&str> = table.lines().take(2 + ALGORITHMS.len()).collect();
        for line in &rows {
            assert!(line.chars().count() <= 120, "{}:\n{table}", line.len());
        }
        for a in ALGORITHMS {
            assert!(rows.iter().any(|l| l.starts_with(a)), "{a}\n{table}");
        }
        assert!(rows[0].contains("kill-cl"), "{table}");
        assert!(table.contains("kill-cl = kill-clients"), "{table}");
        let getset = rows.iter().find(|l| l.starts_with("setnx-getset")).unwrap();
        assert!(
            getset.contains("OV+SW ✗") || getset.contains("overlap,stale ✗"),
            "{table}"
        );
        // Every line of the legend fits too.
        for line in table.lines().filter(|l| !l.contains(" × ")) {
            assert!(line.chars().count() <= 120, "{line}");
        }
    }

    #[test]
    fn the_legend_wraps_between_entries() {
        let entries: Vec<String> = ["ok = valid", "ERR = the run failed", "OV = overlap"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            wrap("legend: ", &entries, 41),
            [
                "legend: ok = valid · ERR = the run failed",
                "        OV = overlap"
            ]
        );
        assert_eq!(
            wrap("legend: ", &entries, 200),
            ["legend: ok = valid · ERR = the run failed · OV = overlap"]
        );
    }
}
