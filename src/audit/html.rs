//! `audit.html`: the matrix as a page, each cell linking to its run's page (as audit.md's
//! cells link), the differences and what was not applicable. An askama template
//! (`templates/audit/audit.html`), every value HTML-escaped; links relative to the audit
//! folder, so it works from `file://` and as a CI artifact.

use std::path::{Component, Path};

use askama::Template;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::matrix::{Cell, Matrix, Status};
use super::paths::relative_to;
use super::text::{duration_text, one_line, seconds_text};
use crate::report::AnomalyKind;

#[derive(Template)]
#[template(path = "audit/audit.html")]
struct AuditHtml {
    verdict: &'static str,
    verdict_class: &'static str,
    counts: String,
    started: String,
    took: String,
    seeds: String,
    hosts: String,
    nemeses: Vec<String>,
    rows: Vec<Row>,
    differences: Vec<Difference>,
    not_applicable: Vec<(String, String)>,
}

struct Row {
    algorithm: String,
    /// One per nemesis; None: not asked for.
    cells: Vec<Option<CellView>>,
}

struct CellView {
    class: &'static str,
    text: String,
    why: String,
    link: Option<String>,
    /// Time to its first anomaly.
    first: Option<String>,
}

struct Difference {
    cell: String,
    label: &'static str,
    why: String,
    found: String,
    expected: String,
    link: Option<String>,
}

/// Every byte of a URL path segment but the unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A relative path as a URL: each part percent-encoded, `./` first unless it climbs
/// (`../`), so that no name reads as a scheme.
fn href(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => {
                Some(utf8_percent_encode(&part.to_string_lossy(), SEGMENT).to_string())
            }
            Component::ParentDir => Some("..".to_string()),
            _ => None,
        })
        .collect();
    let joined = parts.join("/");
    if joined.starts_with("..") {
        joined
    } else {
        format!("./{joined}")
    }
}

impl Matrix {
    /// The page of the matrix for a file written in `dir` (links relative to it).
    pub fn to_html_in(&self, dir: &Path) -> String {
        let link = |cell: &Cell| cell.report_page().map(|p| href(&relative_to(&p, dir)));
        let rows = self
            .algorithms
            .iter()
            .map(|algorithm| Row {
                algorithm: algorithm.clone(),
                cells: self
                    .nemeses
                    .iter()
                    .map(|nemesis| {
                        self.cell(algorithm, nemesis.name()).map(|cell| CellView {
                            class: match cell.status {
                                Status::Pass => "pass",
                                Status::Differs => "differs",
                                Status::Error => "error",
                                Status::NotApplicable => "na",
                                Status::Untested => "untested",
                            },
                            text: cell_text(cell),
                            why: one_line(cell.why_text()),
                            link: link(cell),
                            first: cell.first_anomaly_ms.map(|ms| seconds_text(ms / 1e3)),
                        })
                    })
                    .collect(),
            })
            .collect();
        let differences = self
            .failures()
            .into_iter()
            .map(|cell| Difference {
                cell: format!("{} × {}", cell.algorithm, cell.nemesis),
                label: match cell.status {
                    Status::Error => "error",
                    Status::Untested => "untested",
                    _ => "differs",
                },
                why: one_line(cell.why_text()),
                found: cell.found_text(),
                expected: cell.expected_text(),
                link: link(cell),
            })
            .collect();
        let not_applicable = self
            .ordered_cells()
            .into_iter()
            .filter(|c| c.status == Status::NotApplicable)
            .map(|c| {
                (
                    format!("{} × {}", c.algorithm, c.nemesis),
                    one_line(c.why_text()),
                )
            })
            .collect();
        let passed = self.passed();
        let page = AuditHtml {
            verdict: if passed { "PASSED" } else { "FAILED" },
            verdict_class: if passed { "passed" } else { "failed" },
            counts: self.counts_text(),
            started: self.started_wall.clone(),
            took: duration_text(self.seconds),
            seeds: self.seeds_text(),
            hosts: self.hosts.join(", "),
            nemeses: self.nemeses.iter().map(|n| n.name().to_string()).collect(),
            rows,
            differences,
            not_applicable,
        };
        let mut html = page
            .render()
            .expect("rendering the page into a String cannot fail");
        html.push('\n');
        html
    }
}

/// "ok", "valid", the kinds found (with ✗ when the cell differs), "ERR", "n/a"; over
/// rounds, with its rate ("overlap 9/10").
fn cell_text(cell: &Cell) -> String {
    let text = status_text(cell);
    match cell.rounds.as_ref().filter(|r| r.of > 0) {
        Some(rounds) => format!("{text} {}", rounds.rate_text()),
        None => text,
    }
}

fn status_text(cell: &Cell) -> String {
    let kinds: Vec<AnomalyKind> = cell.kinds().into_iter().map(|(k, _)| k).collect();
    let found = if kinds.is_empty() {
        cell.nothing_found_text().to_string()
    } else {
        AnomalyKind::join(&kinds, ", ")
    };
    match cell.status {
        Status::Pass => found,
        Status::Differs => format!("{found} ✗"),
        Status::Error => "ERR".to_string(),
        Status::NotApplicable => "n/a".to_string(),
        Status::Untested => "untested".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{expect, found, small};

    #[test]
    fn every_cell_that_ran_links_its_page_relative_to_the_audit_folder() {
        let html = small().to_html_in(Path::new("r"));
        assert!(
            html.contains(r#"<a href="./a/index.html">ok</a>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<a href="./c/index.html">overlap, stale-write ✗</a>"#),
            "{html}"
        );
        assert!(
            html.contains("FAILED") && html.contains("7 cells"),
            "{html}"
        );
        assert!(html.contains("redis-server exited"), "{html}");
        // Markup in a name is text; a folder elsewhere is climbed to.
        let mut m = Matrix::default();
        m.push(
            Cell::judge("<b>x</b>", "none", expect(&[], &[]), found(&[]))
                .with_run("results/audit-1/a b", 1.0),
        );
        let html = m.to_html_in(Path::new("results/elsewhere"));
        assert!(!html.contains("<b>x</b>"), "{html}");
        assert!(
            html.contains(r#"href="../audit-1/a%20b/index.html""#),
            "{html}"
        );
    }
}
