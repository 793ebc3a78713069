//! `audit.xml`: the matrix as JUnit XML for CI, a test case per cell.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use super::matrix::{Cell, CellRounds, Matrix, Status};
use super::text::seconds_text;

impl Matrix {
    /// JUnit XML for CI: one `<testsuite>`, one `<testcase classname=ALGORITHM
    /// name=NEMESIS>` per cell; a cell that differs is a `<failure>`, one that errored an
    /// `<error>`, a not-applicable one `<skipped>` (its message begins "not applicable: ");
    /// each case's `<system-out>` names its run folder.
    pub fn to_junit(&self) -> String {
        let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
        self.write_junit(&mut writer)
            .expect("writing XML to memory cannot fail");
        let mut xml = String::from_utf8(writer.into_inner()).expect("the XML is UTF-8");
        xml.push('\n');
        xml
    }

    fn write_junit(&self, w: &mut Writer<Vec<u8>>) -> io::Result<()> {
        let c = self.counts();
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        w.create_element("testsuite")
            .with_attributes([
                ("name", "lockaudit audit"),
                ("tests", &c.cells.to_string()),
                ("failures", &c.differs.to_string()),
                ("errors", &c.errors.to_string()),
                ("skipped", &c.not_applicable.to_string()),
                ("time", &format!("{:.3}", self.seconds)),
                ("timestamp", &xml_chars(&self.started_wall)),
            ])
            .write_inner_content(|w| {
                w.create_element("properties").write_inner_content(|w| {
                    w.create_element("property")
                        .with_attributes([("name", "seed"), ("value", &self.seed.to_string())])
                        .write_empty()?;
                    if let Some(rounds) = self.rounds {
                        w.create_element("property")
                            .with_attributes([("name", "rounds"), ("value", &rounds.to_string())])
                            .write_empty()?;
                    }
                    Ok(())
                })?;
                for cell in self.ordered_cells() {
                    write_case(w, cell)?;
                }
                Ok(())
            })?;
        Ok(())
    }
}

/// One `<testcase>`.
fn write_case(w: &mut Writer<Vec<u8>>, cell: &Cell) -> io::Result<()> {
    let why = xml_chars(cell.why_text());
    w.create_element("testcase")
        .with_attributes([
            ("classname", xml_chars(&cell.algorithm).as_ref()),
            ("name", &xml_chars(cell.nemesis.name())),
            ("time", &format!("{:.3}", cell.seconds)),
        ])
        .write_inner_content(|w| {
            let outcome = match cell.status {
                Status::Pass => None,
                Status::Differs => Some(("failure", "differs")),
                Status::Error => Some(("error", "error")),
                Status::Untested => Some(("failure", "untested")),
                Status::NotApplicable => {
                    w.create_element("skipped")
                        .with_attribute(("message", format!("not applicable: {why}").as_str()))
                        .write_empty()?;
                    None
                }
            };
            if let Some((tag, kind)) = outcome {
                w.create_element(tag)
                    .with_attributes([("message", why.as_ref()), ("type", kind)])
                    .write_text_content(BytesText::new(&xml_chars(&details(cell))))?;
            }
            let run_folder = cell
                .run_dir
                .as_ref()
                .map_or("none".into(), |dir| dir.display().to_string());
            let mut system_out = format!(
                "run folder: {run_folder}\nfound: {}; expected: {}; events: {}; faults: {}",
                cell.found_text(),
                cell.expected_text(),
                cell.events,
                cell.faults
            );
            if let Some(rounds) = &cell.rounds {
                system_out += &format!("\n{}", rounds_line(rounds));
            }
            w.create_element("system-out")
                .write_text_content(BytesText::new(&xml_chars(&system_out)))?;
            Ok(())
        })?;
    Ok(())
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
    if let Some(rounds) = &cell.rounds {
        let _ = writeln!(text, "{}", rounds_line(rounds));
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

/// "rounds: met the expectation in 9 of 10 (9 needed); found: overlap 10/10".
fn rounds_line(rounds: &CellRounds) -> String {
    let mut line = format!(
        "rounds: met the expectation in {} of {} ({} needed)",
        rounds.met, rounds.of, rounds.required
    );
    if !rounds.found.is_empty() {
        let found: Vec<String> = (rounds.found_in_order())
            .map(|(k, n)| format!("{k} {n}/{}", rounds.of))
            .collect();
        line += &format!("; found: {}", found.join(", "));
    }
    line
}

/// Text that XML 1.0 can hold: the characters it forbids (control characters other than tab
/// and line breaks, U+FFFE, U+FFFF) shown as `\u{..}`. The writer escapes the rest (markup
/// characters everywhere; line breaks and tabs too in attributes, which would fold them to
/// spaces).
fn xml_chars(text: &str) -> Cow<'_, str> {
    let forbidden = |c: char| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
    };
    if !text.contains(forbidden) {
        return Cow::Borrowed(text);
    }
    let shown = |c: char| {
        if forbidden(c) {
            format!("\\u{{{:x}}}", c as u32)
        } else {
            c.to_string()
        }
    };
    Cow::Owned(text.chars().map(shown).collect())
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
