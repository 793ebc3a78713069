//! `audit.xml`: the matrix as JUnit XML for CI, a test case per cell.

use std::fmt::Write as _;

use super::matrix::{Cell, Matrix, Status};
use super::text::seconds_text;

impl Matrix {
    /// JUnit XML for CI: one `<testsuite>`, one `<testcase classname=ALGORITHM
    /// name=NEMESIS>` per cell; a cell that differs is a `<failure>`, one that errored an
    /// `<error>`, a not-applicable one `<skipped>` (its message begins "not applicable: ");
    /// each case's `<system-out>` names its run folder.
    pub fn to_junit(&self) -> String {
        let c = self.counts();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuite name=\"lockaudit audit\" tests=\"{}\" failures=\"{}\" errors=\"{}\" \
             skipped=\"{}\" time=\"{:.3}\" timestamp=\"{}\">",
            c.cells,
            c.differs,
            c.errors,
            c.not_applicable,
            self.seconds,
            xml_escape(&self.started_wall)
        );
        let _ = writeln!(
            out,
            "  <properties>\n    <property name=\"seed\" value=\"{}\"/>\n  </properties>",
            self.seed
        );
        for cell in self.ordered_cells() {
            let _ = writeln!(
                out,
                "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
                xml_escape(&cell.algorithm),
                xml_escape(&cell.nemesis),
                cell.seconds
            );
            let why = xml_escape(cell.why_text());
            match cell.status {
                Status::Pass => {}
                Status::Differs => {
                    let _ = writeln!(
                        out,
                        "    <failure message=\"{why}\" type=\"differs\">{}</failure>",
                        xml_escape(&details(cell))
                    );
                }
                Status::Error => {
                    let _ = writeln!(
                        out,
                        "    <error message=\"{why}\" type=\"error\">{}</error>",
                        xml_escape(&details(cell))
                    );
                }
                Status::NotApplicable => {
                    let _ = writeln!(out, "    <skipped message=\"not applicable: {why}\"/>");
                }
            }
            let mut system_out = String::new();
            match &cell.run_dir {
                Some(dir) => {
                    let _ = writeln!(system_out, "run folder: {}", dir.display());
                }
                None => system_out.push_str("run folder: none\n"),
            }
            let _ = write!(
                system_out,
                "found: {}; expected: {}; events: {}; faults: {}",
                cell.found_text(),
                cell.expected_text(),
                cell.events,
                cell.faults
            );
            let _ = writeln!(
                out,
                "    <system-out>{}</system-out>\n  </testcase>",
                xml_escape(&system_out)
            );
        }
        out.push_str("</testsuite>\n");
        out
    }
}

/// The failure or error body of a JUnit case.
fn details(cell: &Cell) -> String {
    let mut text = format!(
        "{} under {}: {}\nfound: {}\nexpected: {}\n",
        cell.algorithm,
        cell.nemesis,
        cell.why_text(),
        cell.found_text(),
        cell.expected_text()
    );
    if let Some(ms) = cell.first_anomaly_ms {
        let _ = writeln!(text, "first anomaly at {}", seconds_text(ms / 1e3));
    }
    match &cell.run_dir {
        Some(dir) => {
            let _ = writeln!(text, "run folder: {}", dir.display());
            let _ = writeln!(text, "report: {}", dir.join("index.html").display());
        }
        None => text.push_str("run folder: none\n"),
    }
    text
}

/// Text for XML attributes and content: the five special characters escaped, line breaks
/// and tabs kept as character references (attributes would fold them to spaces), and
/// characters XML 1.0 forbids shown as `\u{..}`.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{expect, small};

    #[test]
    fn junit_parses_with_the_right_counts_and_escapes() {
        let mut m = small();
        m.push(Cell::error(
            "redlock",
            "mix",
            expect(&[], &[]),
            "bad <&\"> 'quote'\nsecond line\u{1b}",
        ));
        let xml = m.to_junit();
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
        let suite = doc.root_element();
        assert_eq!(suite.tag_name().name(), "testsuite");
        assert_eq!(suite.attribute("name"), Some("lockaudit audit"));
        assert_eq!(suite.attribute("tests"), Some("8"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("errors"), Some("2"));
        assert_eq!(suite.attribute("skipped"), Some("1"));
        assert_eq!(suite.attribute("time"), Some("95.500"));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 8);
        let count = |tag: &str| {
            cases
                .iter()
                .filter(|c| c.children().any(|n| n.has_tag_name(tag)))
                .count()
        };
        assert_eq!(count("failure"), 1);
        assert_eq!(count("error"), 2);
        assert_eq!(count("skipped"), 1);
        assert_eq!(count("system-out"), 8);

        let case = |class: &str, name: &str| {
            *cases
                .iter()
                .find(|c| {
                    c.attribute("classname") == Some(class) && c.attribute("name") == Some(name)
                })
                .unwrap_or_else(|| panic!("no case {class} {name}\n{xml}"))
        };
        let failure = case("set-nx-px", "pause-clients")
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        assert_eq!(
            failure.attribute("message"),
            Some("not expected: stale-write ×1")
        );
        let body = failure.text().unwrap();
        assert!(body.contains("found: overlap ×2, stale-write ×1"), "{body}");
        assert!(body.contains("run folder: r/c"), "{body}");
        assert_eq!(
            case("set-nx-px", "pause-clients").attribute("time"),
            Some("12.000")
        );

        let error = case("redlock", "mix")
            .children()
            .find(|n| n.has_tag_name("error"))
            .unwrap();
        assert_eq!(
            error.attribute("message"),
            Some("bad <&\"> 'quote'\nsecond line\\u{1b}")
        );
        let out = case("setnx-del", "kill-clients")
            .children()
            .find(|n| n.has_tag_name("system-out"))
            .unwrap();
        assert!(out.text().unwrap().contains("run folder: r/b"));
        let skipped = case("setnx-del", "failover")
            .children()
            .find(|n| n.has_tag_name("skipped"))
            .unwrap();
        assert_eq!(
            skipped.attribute("message"),
            Some("not applicable: failover needs replicas")
        );
    }
}
