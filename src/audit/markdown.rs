//! `audit.md`: the verdict, the matrix as a Markdown table whose cells link to their runs'
//! reports, the time to first anomaly, the differences and a legend.

use std::fmt::Write as _;
use std::path::Path;

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use super::matrix::{Cell, Matrix, Status};
use super::paths::relative_to;
use super::text::{duration_text, one_line, seconds_text};
use crate::report::AnomalyKind;

impl Matrix {
    /// Markdown: the verdict, a table (a row per algorithm, a column per nemesis, each cell
    /// linking to its run's `index.html`), the time to first anomaly when known, the
    /// differences, and a legend. Links use the run folders as they are stored; see
    /// [`Matrix::to_markdown_in`] for links relative to where the file is written.
    pub fn to_markdown(&self) -> String {
        self.markdown(None)
    }

    /// As [`Matrix::to_markdown`], for a file written in `dir`: links are made relative to it.
    pub fn to_markdown_in(&self, dir: &Path) -> String {
        self.markdown(Some(dir))
    }

    fn markdown(&self, base: Option<&Path>) -> String {
        let mut md = Markdown {
            matrix: self,
            base,
            out: String::new(),
        };
        md.verdict();
        md.table();
        md.first_anomalies();
        md.differences();
        md.not_applicable();
        md.legend();
        md.out
    }
}

/// `audit.md` as it is written: the matrix, the folder links are relative to (None: as
/// stored), and the text so far.
struct Markdown<'a> {
    matrix: &'a Matrix,
    base: Option<&'a Path>,
    out: String,
}

impl Markdown<'_> {
    /// The link to a cell's report, if it has one.
    fn link(&self, cell: &Cell) -> Option<String> {
        cell.report_page().map(|page| {
            let target = match self.base {
                Some(base) => relative_to(&page, base),
                None => page,
            };
            url_path(&target)
        })
    }

    /// The title, the verdict line, and what the audit was cut short by and ran on.
    fn verdict(&mut self) {
        let m = self.matrix;
        let out = &mut self.out;
        let _ = writeln!(out, "# lockaudit audit\n");
        let _ = writeln!(
            out,
            "**{}** — {}. Started {}, took {}, {}.\n",
            if m.passed() { "PASSED" } else { "FAILED" },
            m.counts_text(),
            md_text(&m.started_wall),
            duration_text(m.seconds),
            m.seeds_text()
        );
        if let Some(rounds) = m.rounds {
            let _ = writeln!(
                out,
                "Each cell over {rounds} rounds: the rounds that met its expectation, of those \
                 that reached a verdict; it passes when at least its workload's rate of them \
                 did (without a rate, every one). Each links to the round it stands for; every \
                 round's own matrix is in round-0/, round-1/, ...\n"
            );
        }
        if let Some(signal) = &m.interrupted {
            let _ = writeln!(
                out,
                "Interrupted by {}: the cells that finished, and those cut short (errors, \
                 marked interrupted); the others never ran.\n",
                md_text(signal)
            );
        }
        if let Some(phases) = m.phases_text() {
            let _ = writeln!(out, "{}.\n", md_text(&phases));
        }
        if !m.hosts.is_empty() {
            let hosts: Vec<String> = m.hosts.iter().map(|h| md_text(h)).collect();
            let _ = writeln!(out, "Lock servers on hosts: {}.\n", hosts.join(", "));
        }
    }

    /// A table's header: a column per nemesis.
    fn table_head(&mut self) {
        let out = &mut self.out;
        let _ = write!(out, "| algorithm |");
        for nemesis in &self.matrix.nemeses {
            let _ = write!(out, " {} |", md_text(nemesis.name()));
        }
        let _ = write!(out, "\n|---|");
        for _ in &self.matrix.nemeses {
            let _ = write!(out, "---|");
        }
        out.push('\n');
    }

    /// The matrix: a row per algorithm, each cell linking to its run's report.
    fn table(&mut self) {
        let m = self.matrix;
        self.table_head();
        for algorithm in &m.algorithms {
            let _ = write!(self.out, "| {} |", md_text(algorithm));
            for nemesis in &m.nemeses {
                let text = match m.cell(algorithm, nemesis.name()) {
                    // Not asked for (`--cells`, `--quick`): left blank.
                    None => String::new(),
                    Some(cell) => {
                        let mut text = match cell.status {
                            Status::Differs => format!("**{} ✗**", md_kinds(cell)),
                            Status::Error => "**ERR**".to_string(),
                            Status::NotApplicable => "n/a".to_string(),
                            Status::Untested => "**untested**".to_string(),
                            Status::Pass => md_kinds(cell),
                        };
                        if let Some(rounds) = cell.rounds.as_ref().filter(|r| r.of > 0) {
                            text = format!("{text} {}", md_text(&rounds.rate_text()));
                        }
                        match self.link(cell) {
                            Some(url) => format!("[{text}]({url})"),
                            None => text,
                        }
                    }
                };
                let _ = write!(self.out, " {text} |");
            }
            self.out.push('\n');
        }
    }

    /// The time to first anomaly, as a second table, when any cell knows it.
    fn first_anomalies(&mut self) {
        let m = self.matrix;
        if !m.cells.iter().any(|c| c.first_anomaly_ms.is_some()) {
            return;
        }
        let _ = writeln!(self.out, "\n## Time to first anomaly\n");
        self.table_head();
        let out = &mut self.out;
        for algorithm in &m.algorithms {
            let _ = write!(out, "| {} |", md_text(algorithm));
            for nemesis in &m.nemeses {
                let text = match m.cell(algorithm, nemesis.name()) {
                    None => String::new(),
                    Some(c) => c
                        .first_anomaly_ms
                        .map_or("–".to_string(), |ms| seconds_text(ms / 1e3)),
                };
                let _ = write!(out, " {text} |");
            }
            out.push('\n');
        }
    }

    /// Each cell that did not meet its expectation, and why.
    fn differences(&mut self) {
        let _ = writeln!(self.out, "\n## Differences\n");
        let failures = self.matrix.failures();
        if failures.is_empty() {
            let _ = writeln!(self.out, "None: every cell that ran met its expectation.");
        }
        for cell in failures {
            let label = match cell.status {
                Status::Error => "error",
                Status::Untested => "untested",
                _ => "differs",
            };
            let _ = write!(
                self.out,
                "- **{} × {}** ({label}): {}. Found {}; expected {}.",
                md_text(&cell.algorithm),
                md_text(cell.nemesis.name()),
                md_text(&one_line(cell.why_text())),
                md_text(&cell.found_text()),
                md_text(&cell.expected_text())
            );
            if let Some(ms) = cell.first_anomaly_ms {
                let _ = write!(self.out, " First anomaly at {}.", seconds_text(ms / 1e3));
            }
            if let Some(url) = self.link(cell) {
                let _ = write!(self.out, " [report]({url})");
            }
            self.out.push('\n');
        }
    }

    /// The cells not run because no fault of their preset can act on them.
    fn not_applicable(&mut self) {
        let not_applicable: Vec<&Cell> = self
            .matrix
            .ordered_cells()
            .into_iter()
            .filter(|c| c.status == Status::NotApplicable)
            .collect();
        if not_applicable.is_empty() {
            return;
        }
        let out = &mut self.out;
        let _ = writeln!(out, "\n## Not applicable\n");
        let _ = writeln!(
            out,
            "No fault of the preset can act on these cells, so they were not run: they pass nothing.\n"
        );
        for cell in not_applicable {
            let _ = writeln!(
                out,
                "- {} × {}: {}",
                md_text(&cell.algorithm),
                md_text(cell.nemesis.name()),
                md_text(&one_line(cell.why_text()))
            );
        }
    }

    fn legend(&mut self) {
        let m = self.matrix;
        let out = &mut self.out;
        let _ = writeln!(out, "\n## Legend\n");
        let _ = writeln!(
            out,
            "- **ok**: valid, as expected\n\
             - anomaly kinds alone: found, and all of them expected\n\
             - **✗**: differs from the expectation (see Differences)\n\
             - **ERR**: the run could not be carried out\n\
             - **n/a**: not applicable, not run: no fault of the preset can act (see Not applicable)"
        );
        if m.cells.iter().any(|c| c.rounds.is_some()) {
            let _ = writeln!(
                out,
                "- **9/10**: rounds that met the expectation, of those run; a `must` kind found in another number of rounds has its own"
            );
        }
        if m.algorithms
            .iter()
            .any(|a| m.nemeses.iter().any(|n| m.cell(a, n.name()).is_none()))
        {
            let _ = writeln!(out, "- blank: a cell not asked for (`--cells`, `--quick`)");
        }
        let _ = writeln!(
            out,
            "\nEach cell that ran links to its run's report. Anomaly kinds: {}.",
            AnomalyKind::known()
        );
    }
}

/// The kinds of a Markdown cell: "ok", "valid" (found nothing, expected something) or the
/// full kind names.
fn md_kinds(cell: &Cell) -> String {
    let kinds = cell.kinds();
    if kinds.is_empty() {
        return cell.nothing_found_text().into();
    }
    kinds
        .iter()
        .map(|(k, _)| md_text(k.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text for Markdown: characters that would start markup or split a table cell are
/// backslash-escaped.
fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a Markdown link target cannot hold as it is: control characters, the blank, `%`,
/// and what would end or confuse the link. (Every byte outside ASCII is encoded too.)
const LINK_TARGET: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'%')
    .add(b'(')
    .add(b')')
    .add(b'<')
    .add(b'>')
    .add(b'|')
    .add(b'[')
    .add(b']')
    .add(b'"')
    .add(b'#')
    .add(b'?');

/// A path as a Markdown link target: `/`-separated, percent-encoded.
fn url_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    utf8_percent_encode(&text, LINK_TARGET).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{expect, found, small};

    #[test]
    fn the_markdown_has_every_nemesis_every_algorithm_and_links() {
        let m = small();
        let md = m.to_markdown();
        let lines: Vec<&str> = md.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("| algorithm |"))
            .expect("a table");
        assert_eq!(
            lines[header],
            "| algorithm | none | kill-clients | pause-clients | failover |"
        );
        assert_eq!(lines[header + 1], "|---|---|---|---|---|");
        assert_eq!(
            lines[header + 2],
            "| setnx-del | [ok](r/a/index.html) | [unavailable](r/b/index.html) |  | n/a |"
        );
        assert_eq!(
            lines[header + 3],
            "| set-nx-px | [ok](r/f/index.html) | [ok](r/g/index.html) | \
             [**overlap, stale-write ✗**](r/c/index.html) | **ERR** |"
        );
        assert!(md.contains("## Time to first anomaly"), "{md}");
        assert!(md.contains("| 2.31s |"), "{md}");
        let differences = md.split("## Differences").nth(1).expect("differences");
        assert!(
            differences
                .contains("**set-nx-px × pause-clients** (differs): not expected: stale-write ×1"),
            "{md}"
        );
        assert!(differences.contains("[report](r/c/index.html)"), "{md}");
        assert!(
            differences.contains("**set-nx-px × failover** (error): redis-server exited"),
            "{md}"
        );
        assert!(md.contains("## Legend"), "{md}");
        assert!(md.contains("**FAILED**"), "{md}");
    }

    #[test]
    fn markdown_escapes_and_links_relative_to_its_folder() {
        let mut m = Matrix::default();
        m.push(
            Cell::judge("a|b", "none", expect(&[], &[]), found(&[("overlap", 1)]))
                .with_run("results/audit-1/a b", 1.0),
        );
        let md = m.to_markdown_in(Path::new("results/audit-1"));
        assert!(md.contains("| a\\|b |"), "{md}");
        assert!(md.contains("(a%20b/index.html)"), "{md}");
        let md = m.to_markdown_in(Path::new("results/elsewhere"));
        assert!(md.contains("(../audit-1/a%20b/index.html)"), "{md}");
        // What would end or confuse a link, and every byte outside ASCII, is encoded.
        let target = url_path(Path::new(r"r\(x) [1]#?%é"));
        assert_eq!(target, "r/%28x%29%20%5B1%5D%23%3F%25%C3%A9");
    }
}
