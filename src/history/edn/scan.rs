//! Splits EDN into the text of one op form at a time, and keeps the parser safe.
//!
//! The scanner does not build values: it follows the grammar of `edn-format`'s parser closely
//! enough to know where a form ends, how deeply the parser will recurse into it and what it
//! will make of an atom, and refuses, with the line and the field, what would crash or
//! exhaust that parser:
//!
//! - nesting deeper than `MAX_DEPTH` (collections, `#_` discards and `#tag`s: the parser
//!   recurses once for each, so thousands of `[` or `#_` overflow the stack);
//! - a form longer than `MAX_FORM_BYTES` (the parser copies every collection once per level);
//! - a number longer than `MAX_NUMBER_CHARS`, or one whose exponent is beyond
//!   `MAX_EXPONENT` (`22e22222222222M` is a valid BigDecimal that takes 22 GB to print or to
//!   compare with another);
//! - a `\u` character literal whose fifth byte is inside a character (the parser slices it as
//!   bytes and panics).
//!
//! It walks characters, not bytes, with the parser's own notions of whitespace (Unicode's,
//! and commas) and of atom characters, so that its idea of an element never ends before the
//! parser's does: an element it took for whitespace, or a discard it closed too early, would
//! hide nesting from the depth bound. It reads in chunks, so a file written on one line costs
//! no more memory than one written on many.

use std::io::{ErrorKind, Read};
use std::ops::Range;

use crate::history::error::HistoryError;

/// The deepest nesting of collections, discards and tags in one form. An op needs 4.
pub const MAX_DEPTH: usize = 100;
/// The longest form: an op is a few hundred bytes.
pub const MAX_FORM_BYTES: usize = 1 << 20;
/// The longest number, in characters.
pub const MAX_NUMBER_CHARS: usize = 100;
/// The largest exponent of a number, either sign.
pub const MAX_EXPONENT: u64 = 1000;

/// A map key kept for naming the field at fault: longer ones are cut.
const MAX_KEY_CHARS: usize = 64;
/// The most keys a field's name is made of (`value.processes` is two).
const MAX_FIELD_KEYS: usize = 8;

/// The outer shape of the file, learnt from its first form.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// Nothing but blanks so far.
    Unknown,
    /// Top-level op maps (Jepsen's history.edn).
    Stream,
    /// Inside the one top-level collection (Knossos), opened with `open` at `line`.
    Collection { open: char, close: char, line: u64 },
    /// After that collection closed: only blanks may follow.
    Closed { close: char },
}

/// What `scan_form` consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scanned {
    Element,
    /// A `#_` discard and the element it discards: no value.
    Discarded,
}

/// What an unfinished part of the form waits for.
#[derive(Debug)]
enum Frame {
    /// A collection, up to `closer`; opened on `line`. A map counts its elements and keeps
    /// its last key, to name the field an error is in.
    Open {
        closer: char,
        line: u64,
        map: Option<MapEntries>,
    },
    /// `#_`: the next element, which is dropped.
    Discard,
    /// `#tag`: this many more elements (the tag, then the tagged element).
    Tag { left: u8 },
}

#[derive(Debug, Default)]
struct MapEntries {
    elements: usize,
    /// The last key, if a keyword, while its value is being read: its name's bytes in the form.
    key: Option<Range<usize>>,
}

/// An element that ended, as a map key: a keyword's name is at this range of the form.
enum Ended {
    Keyword(Range<usize>),
    Other,
}

/// Whitespace as the parser sees it: Unicode's, and commas.
fn is_whitespace(c: char) -> bool {
    c.is_whitespace() || c == ','
}

/// An ASCII byte the parser takes into an atom (`is_atom_char`).
fn is_ascii_atom_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b".*+!-_?$%&=<>/:".contains(&b)
}

/// The characters the parser takes into an atom (symbol, keyword, number, ...).
fn is_atom_char(c: char) -> bool {
    matches!(
        c,
        '.' | '*' | '+' | '!' | '-' | '_' | '?' | '$' | '%' | '&' | '=' | '<' | '>' | '/' | ':'
    ) || c.is_alphabetic()
        || c.is_numeric()
}

fn closer_of(open: char) -> char {
    match open {
        '(' => ')',
        '{' => '}',
        _ => ']',
    }
}

/// The byte length of the UTF-8 sequence `first` begins, 0 if it begins none.
fn utf8_width(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

pub struct Scanner<'s, R> {
    input: R,
    source: &'s str,
    chunk: Box<[u8]>,
    pos: usize,
    len: usize,
    eof: bool,
    /// The line of the next character, counting from 1.
    line: u64,
    layout: Layout,
    /// The current form's bytes, and the line it starts on.
    form: Vec<u8>,
    form_line: u64,
    frames: Vec<Frame>,
    /// The current atom, without the comments the parser glues it across.
    atom: String,
}

impl<'s, R: Read> Scanner<'s, R> {
    pub fn new(input: R, source: &'s str) -> Self {
        Scanner {
            input,
            source,
            chunk: vec![0; 1 << 16].into_boxed_slice(),
            pos: 0,
            len: 0,
            eof: false,
            line: 1,
            layout: Layout::Unknown,
            form: Vec::with_capacity(512),
            form_line: 1,
            frames: Vec::new(),
            atom: String::new(),
        }
    }

    /// An error at `line`, in the field the scanner is in.
    fn error(&self, line: u64, message: String) -> HistoryError {
        HistoryError::at(self.source, line, &self.field(), message)
    }

    /// The field being read, from the keys of the maps the scanner is in: `value` in the
    /// `:value` of an op, `value.processes` in its `:processes`; empty outside any value.
    fn field(&self) -> String {
        let mut path: Vec<&str> = Vec::new();
        for frame in &self.frames {
            match frame {
                Frame::Open { map: Some(m), .. } if m.elements % 2 == 1 => match &m.key {
                    Some(key) if path.len() < MAX_FIELD_KEYS => {
                        let name = std::str::from_utf8(&self.form[key.clone()]).unwrap_or("?");
                        match name.char_indices().nth(MAX_KEY_CHARS) {
                            Some((cut, _)) => path.push(&name[..cut]),
                            None => path.push(name),
                        }
                    }
                    _ => break,
                },
                Frame::Open { .. } => break,
                Frame::Discard | Frame::Tag { .. } => {}
            }
        }
        path.join(".")
    }

    fn end_of_file_in_form(&self) -> HistoryError {
        HistoryError::at(
            self.source,
            self.form_line,
            "",
            "the file ends inside the form that starts on this line".into(),
        )
    }

    /// Makes at least `n` bytes readable at `pos`, fewer only at the end of the input.
    #[inline]
    fn fill(&mut self, n: usize) -> Result<(), HistoryError> {
        if self.len - self.pos >= n || self.eof {
            return Ok(());
        }
        self.refill(n)
    }

    #[cold]
    fn refill(&mut self, n: usize) -> Result<(), HistoryError> {
        self.chunk.copy_within(self.pos..self.len, 0);
        self.len -= self.pos;
        self.pos = 0;
        while self.len < n && !self.eof {
            match self.input.read(&mut self.chunk[self.len..]) {
                Ok(0) => self.eof = true,
                Ok(read) => self.len += read,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(HistoryError::io(self.source, e)),
            }
        }
        Ok(())
    }

    /// The next character, without consuming it; `None` at the end of the input.
    #[inline]
    fn peek(&mut self) -> Result<Option<char>, HistoryError> {
        self.fill(4)?;
        let Some(&first) = self.chunk[..self.len].get(self.pos) else {
            return Ok(None);
        };
        if first < 0x80 {
            return Ok(Some(first as char));
        }
        let end = (self.pos + utf8_width(first)).min(self.len);
        match std::str::from_utf8(&self.chunk[self.pos..end]) {
            Ok(text) if !text.is_empty() => Ok(text.chars().next()),
            _ => Err(self.error(self.line, "not valid UTF-8".into())),
        }
    }

    /// Up to `n` characters ahead, without consuming them.
    fn lookahead(&mut self, n: usize) -> Result<String, HistoryError> {
        self.fill(4 * n)?;
        let bytes = &self.chunk[self.pos..self.len.min(self.pos + 4 * n)];
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            // Cut at what is not UTF-8: the scan stops there anyway.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        };
        Ok(text.chars().take(n).collect())
    }

    /// Consumes `c`, the character `peek` returned, without keeping it.
    fn skip(&mut self, c: char) {
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
    }

    /// Consumes `c`, the character `peek` returned, into the form.
    #[inline]
    fn take(&mut self, c: char) -> Result<(), HistoryError> {
        let start = self.pos;
        self.skip(c);
        if c.is_ascii() {
            self.form.push(c as u8);
        } else {
            self.form.extend_from_slice(&self.chunk[start..self.pos]);
        }
        self.check_form_length()
    }

    /// Consumes at once the run of buffered ASCII bytes `keep` accepts (never `\n`).
    fn take_ascii_run(&mut self, keep: impl Fn(u8) -> bool) -> Result<&[u8], HistoryError> {
        let start = self.pos;
        let run = self.chunk[start..self.len]
            .iter()
            .take_while(|&&b| b.is_ascii() && b != b'\n' && keep(b))
            .count();
        self.pos += run;
        self.form.extend_from_slice(&self.chunk[start..self.pos]);
        self.check_form_length()?;
        Ok(&self.chunk[start..self.pos])
    }

    #[inline]
    fn check_form_length(&self) -> Result<(), HistoryError> {
        if self.form.len() > MAX_FORM_BYTES {
            return Err(self.form_too_long());
        }
        Ok(())
    }

    #[cold]
    fn form_too_long(&self) -> HistoryError {
        HistoryError::at(
                self.source,
                self.form_line,
                "",
                format!(
                    "the form that starts on this line is longer than {} MiB: an op is a few hundred bytes",
                MAX_FORM_BYTES >> 20
            ),
        )
    }

    /// Consumes the next character into the form; the form must go on.
    fn take_next(&mut self) -> Result<char, HistoryError> {
        let c = self.peek()?.ok_or_else(|| self.end_of_file_in_form())?;
        self.take(c)?;
        Ok(c)
    }

    /// Consumes a `;` comment up to and with its newline into the form.
    fn take_comment(&mut self) -> Result<(), HistoryError> {
        while let Some(c) = self.peek()? {
            self.take(c)?;
            if c == '\n' {
                break;
            }
        }
        Ok(())
    }

    /// Skips whitespace and comments between forms.
    fn skip_blanks(&mut self) -> Result<(), HistoryError> {
        let mut in_comment = false;
        while let Some(c) = self.peek()? {
            if in_comment {
                in_comment = c != '\n';
            } else if c == ';' {
                in_comment = true;
            } else if !is_whitespace(c) {
                break;
            }
            self.skip(c);
        }
        Ok(())
    }

    /// Finds the next op form; returns the line it starts on, its text in `form_text`.
    pub fn next_form(&mut self) -> Result<Option<u64>, HistoryError> {
        loop {
            self.skip_blanks()?;
            let Some(c) = self.peek()? else {
                if let Layout::Collection { open, line, .. } = self.layout {
                    return Err(HistoryError::at(
                        self.source,
                        line,
                        "",
                        format!("the file ends before the `{open}` opened on this line is closed"),
                    ));
                }
                return Ok(None);
            };
            match self.layout {
                Layout::Unknown if c == '[' || c == '(' => {
                    self.layout = Layout::Collection {
                        open: c,
                        close: closer_of(c),
                        line: self.line,
                    };
                    self.skip(c);
                    continue;
                }
                Layout::Unknown => self.layout = Layout::Stream,
                Layout::Collection { close, .. } if c == close => {
                    self.layout = Layout::Closed { close };
                    self.skip(c);
                    continue;
                }
                Layout::Closed { close } => {
                    return Err(self.error(
                        self.line,
                        format!(
                        "unexpected text after the `{close}` that closes the history's collection"
                    ),
                    ))
                }
                Layout::Stream | Layout::Collection { .. } => {}
            }
            if matches!(c, ')' | ']' | '}') {
                return Err(self.error(self.line, format!("unexpected `{c}`")));
            }
            self.form.clear();
            self.form_line = self.line;
            if self.scan_form()? == Scanned::Element {
                return Ok(Some(self.form_line));
            }
        }
    }

    /// The text of the form `next_form` found (UTF-8: the scanner read it as characters).
    pub fn form_text(&self) -> &str {
        std::str::from_utf8(&self.form).unwrap_or_default()
    }

    /// Consumes one element, with its `#` prefixes, into the form. Iterative: the frames
    /// are the nesting the parser will recurse into.
    fn scan_form(&mut self) -> Result<Scanned, HistoryError> {
        self.frames.clear();
        loop {
            let c = self.peek()?.ok_or_else(|| self.end_of_file_in_form())?;
            let ended = match c {
                ';' => {
                    self.take_comment()?;
                    continue;
                }
                c if is_whitespace(c) => {
                    self.take(c)?;
                    continue;
                }
                '(' | '[' | '{' => {
                    self.take(c)?;
                    let map = (c == '{').then(MapEntries::default);
                    self.push(Frame::Open {
                        closer: closer_of(c),
                        line: self.line,
                        map,
                    })?;
                    continue;
                }
                ')' | ']' | '}' => {
                    match self.frames.last() {
                        Some(Frame::Open { closer, .. }) if *closer == c => {}
                        Some(Frame::Open { closer, line, .. }) => {
                            let message = format!(
                                "not valid EDN: unexpected `{c}`, the collection opened on line {line} ends with `{closer}`"
                            );
                            return Err(self.error(self.line, message));
                        }
                        _ => return Err(self.error(self.line, format!("unexpected `{c}`"))),
                    }
                    self.take(c)?;
                    self.frames.pop();
                    Ended::Other
                }
                '"' => {
                    self.take(c)?;
                    self.scan_string()?;
                    Ended::Other
                }
                '\\' => {
                    self.take(c)?;
                    self.scan_character()?;
                    Ended::Other
                }
                '#' => {
                    self.take(c)?;
                    self.scan_dispatch()?;
                    continue;
                }
                c if is_atom_char(c) => self.scan_atom()?,
                c => {
                    let message = format!("not valid EDN: unexpected character {c:?}");
                    return Err(self.error(self.line, message));
                }
            };
            if let Some(scanned) = self.ended(ended) {
                return Ok(scanned);
            }
        }
    }

    fn push(&mut self, frame: Frame) -> Result<(), HistoryError> {
        if self.frames.len() >= MAX_DEPTH {
            return Err(self.error(
                self.line,
                format!(
                    "nested more than {MAX_DEPTH} levels deep (collections, #_ discards and #tags count): an op needs 4 at most"
                ),
            ));
        }
        self.frames.push(frame);
        Ok(())
    }

    /// An element ended: the frames waiting for one take it. Returns what the form was, once
    /// no frame is left.
    fn ended(&mut self, mut ended: Ended) -> Option<Scanned> {
        loop {
            match self.frames.last_mut() {
                None => return Some(Scanned::Element),
                Some(Frame::Discard) => {
                    self.frames.pop();
                    return self.frames.is_empty().then_some(Scanned::Discarded);
                }
                Some(Frame::Tag { left }) => {
                    *left -= 1;
                    if *left > 0 {
                        return None;
                    }
                    self.frames.pop();
                    ended = Ended::Other; // the tagged element ends with it
                }
                Some(Frame::Open { map, .. }) => {
                    if let Some(map) = map {
                        map.elements += 1;
                        map.key = match ended {
                            Ended::Keyword(name) if map.elements % 2 == 1 => Some(name),
                            _ => None,
                        };
                    }
                    return None;
                }
            }
        }
    }

    /// After `#`: a set, a discard or a tag. The parser skips one comment first.
    fn scan_dispatch(&mut self) -> Result<(), HistoryError> {
        if self.peek()? == Some(';') {
            self.take_comment()?;
        }
        match self.peek()? {
            None => Err(self.end_of_file_in_form()),
            Some('{') => {
                self.take('{')?;
                let line = self.line;
                self.push(Frame::Open {
                    closer: '}',
                    line,
                    map: None,
                })
            }
            Some('_') => {
                self.take('_')?;
                self.push(Frame::Discard)
            }
            Some(_) => self.push(Frame::Tag { left: 2 }),
        }
    }

    /// A string whose opening quote was taken, with the parser's escapes.
    fn scan_string(&mut self) -> Result<(), HistoryError> {
        loop {
            self.take_ascii_run(|b| b != b'"' && b != b'\\')?;
            match self.take_next()? {
                '"' => return Ok(()),
                '\\' => match self.take_next()? {
                    't' | 'r' | 'n' | '\\' | '"' => {}
                    'u' => {
                        let mut hex = String::new();
                        for _ in 0..4 {
                            hex.push(self.take_next()?);
                        }
                        let valid = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .is_some();
                        if !valid {
                            let message = format!("not valid EDN: bad escape \\u{hex} in a string");
                            return Err(self.error(self.line, message));
                        }
                    }
                    other => {
                        let message = format!("not valid EDN: bad escape \\{other} in a string");
                        return Err(self.error(self.line, message));
                    }
                },
                _ => {}
            }
        }
    }

    /// A character literal whose backslash was taken, read as the parser reads it: a name
    /// (`\newline`, `\u0041`) or one character that no atom character follows.
    fn scan_character(&mut self) -> Result<(), HistoryError> {
        if self.peek()? == Some(';') {
            self.take_comment()?;
        }
        let ahead = self.lookahead(7)?;
        let bad = |scanner: &Self| {
            let shown: String = ahead
                .chars()
                .take(5)
                .take_while(|&c| !is_whitespace(c) && !"()[]{}\";".contains(c))
                .collect();
            scanner.error(
                scanner.line,
                format!("not valid EDN: bad character literal `\\{shown}`"),
            )
        };
        let length = if ahead.starts_with("newline") {
            7
        } else if ahead.starts_with("return") {
            6
        } else if ahead.starts_with("space") {
            5
        } else if ahead.starts_with("tab") {
            3
        } else if ahead.starts_with('u') && ahead.len() >= 5 {
            // The parser takes bytes 1..5 as the hex digits, and panics if byte 5 falls
            // inside a character (`\u00€`).
            let hex = ahead.get(1..5).ok_or_else(|| bad(self))?;
            let valid = u16::from_str_radix(hex, 16)
                .ok()
                .and_then(|u| char::from_u32(u.into()))
                .is_some();
            if !valid {
                return Err(bad(self));
            }
            5
        } else {
            let mut chars = ahead.chars();
            if chars.next().is_none() {
                return Err(self.end_of_file_in_form());
            }
            if chars.next().is_some_and(is_atom_char) {
                return Err(bad(self));
            }
            1
        };
        for _ in 0..length {
            self.take_next()?;
        }
        Ok(())
    }

    /// An atom: the parser's atom characters, across comments as the parser reads them.
    /// Numbers are bounded here.
    fn scan_atom(&mut self) -> Result<Ended, HistoryError> {
        self.atom.clear();
        let start = self.form.len();
        let mut glued = false;
        let mut chars = 0usize;
        loop {
            let run = self.take_ascii_run(is_ascii_atom_byte)?.len();
            if run > 0 {
                // Enough to judge a number or name a key; the rest only counts.
                let keep = run.min((MAX_NUMBER_CHARS + 1).saturating_sub(chars));
                let end = self.form.len() - run + keep;
                let text = std::str::from_utf8(&self.form[end - keep..end]).unwrap_or_default();
                self.atom.push_str(text);
                chars += run;
                continue;
            }
            match self.peek()? {
                Some(';') => {
                    glued = true;
                    self.take_comment()?;
                }
                Some(c) if is_atom_char(c) => {
                    self.take(c)?;
                    chars += 1;
                    if chars <= MAX_NUMBER_CHARS + 1 {
                        self.atom.push(c);
                    }
                }
                _ => break,
            }
        }
        self.check_number(chars)?;
        // A keyword names a field only as it is written, uncut by comments.
        Ok(match self.form.get(start) {
            Some(b':') if !glued => Ended::Keyword(start + 1..self.form.len()),
            _ => Ended::Other,
        })
    }

    /// A number atom must be short and its exponent moderate.
    fn check_number(&self, chars: usize) -> Result<(), HistoryError> {
        let mut it = self.atom.chars();
        let first = it.next();
        let number = match first {
            Some('+' | '-') => it.next().is_some_and(char::is_numeric),
            Some(c) => c.is_numeric(),
            None => false,
        };
        if !number {
            return Ok(());
        }
        if chars > MAX_NUMBER_CHARS {
            return Err(self.error(
                self.line,
                format!("a number of more than {MAX_NUMBER_CHARS} characters"),
            ));
        }
        // As BigDecimal reads it: after the first e or E, an optional +, an i64.
        let text = self.atom.trim_end_matches(['M', 'N']);
        if let Some(at) = text.find(['e', 'E']) {
            let exponent = &text[at + 1..];
            let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
            if exponent
                .parse::<i64>()
                .is_ok_and(|e| e.unsigned_abs() > MAX_EXPONENT)
            {
                return Err(self.error(
                    self.line,
                    format!(
                        "the number {} has an exponent beyond ±{MAX_EXPONENT}",
                        self.atom
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::edn::read_edn;
    use crate::history::History;

    fn read(text: &str) -> Result<History, HistoryError> {
        read_edn(text.as_bytes(), "test.edn")
    }

    /// The line, field and message of the error `text` must give.
    fn error_of(text: impl AsRef<[u8]>) -> (u64, String, String) {
        let error = read_edn(text.as_ref(), "test.edn").expect_err("should be rejected");
        (
            error.line().unwrap_or(0),
            error.field().unwrap_or("").to_string(),
            error.to_string(),
        )
    }

    const INVOKE: &str = "{:process 0, :type :invoke, :f :acquire, :time 10}\n";

    /// An acquire ok on line 2 whose `:value` is `value`.
    fn ok_with_value(value: &str) -> String {
        format!("{INVOKE}{{:process 0, :type :ok, :f :acquire, :time 20, :value {value}}}\n")
    }

    /// Runs `f` on a thread with a small stack: the bounds must keep the parser well inside
    /// one (a test thread has 2 MiB, a fuzzer's `ulimit -s` may be less). An unoptimised
    /// build's frames are several times larger, so it gets 8 MiB, the main thread's stack;
    /// the unbounded inputs (7,813 levels) overflow that too.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let stack = if cfg!(debug_assertions) {
            8 << 20
        } else {
            1 << 20
        };
        std::thread::Builder::new()
            .stack_size(stack)
            .spawn(f)
            .expect("a thread")
            .join()
            .expect("no panic")
    }

    #[test]
    fn deep_nesting_is_refused_before_the_parser_sees_it() {
        on_small_stack(|| {
            // The crash report: 7,813 `[`, closed or not.
            for text in [
                "[".repeat(7813),
                format!("{}{}", "[".repeat(7813), "]".repeat(7813)),
            ] {
                let (line, _, message) = error_of(&text);
                assert_eq!(line, 1, "{message}");
                assert!(message.contains("nested more than 100 levels"), "{message}");
            }
            let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
            let (line, field, message) = error_of(ok_with_value(&deep));
            assert_eq!((line, field.as_str()), (2, "value"), "{message}");
            let deep = format!("{}1{}", "{:a ".repeat(200), "}".repeat(200));
            let (_, field, message) = error_of(ok_with_value(&deep));
            assert_eq!(field, "value.a.a.a.a.a.a.a", "{message}");
            // Just inside the bound the parser copes, on a small stack: the op map and 99
            // vectors (an acquire ok does not use its value).
            let deepest = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
            assert_eq!(read(&ok_with_value(&deepest)).unwrap().ops.len(), 2);
            let (_, _, message) = error_of(ok_with_value(&format!("[{deepest}]")));
            assert!(message.contains("nested more than"), "{message}");
        });
    }

    #[test]
    fn chains_of_discards_and_tags_count_as_nesting() {
        on_small_stack(|| {
            // The crash report: 24,100 `#_ `, with or without an element after them.
            for text in ["#_ ".repeat(24100), format!("{}{{}}", "#_ ".repeat(24100))] {
                let (line, _, message) = error_of(&text);
                assert_eq!(line, 1, "{message}");
                assert!(message.contains("nested more than"), "{message}");
            }
            let (line, field, message) =
                error_of(ok_with_value(&format!("{}1", "#_ ".repeat(500))));
            assert_eq!((line, field.as_str()), (2, "value"), "{message}");
            // What the parser takes for whitespace (Unicode's, commas) or skips (a comment
            // after `#`) does not end a discard early.
            for chain in [
                "#_\u{3000}",
                "#_\u{2028}",
                "#_,",
                "#;c\n_ ",
                "# ",
                "#t ",
                "#t #u ",
            ] {
                let text = ok_with_value(&format!("{}1", chain.repeat(3000)));
                let (_, field, message) = error_of(&text);
                assert_eq!(field, "value", "{chain:?}: {message}");
                assert!(message.contains("nested more than"), "{chain:?}: {message}");
            }
            // A character literal's comment hides no brackets: `\;c` + newline + `[` is the
            // character `[`, so what follows is nested as the parser nests it.
            let text = ok_with_value(&format!("[\\;c\n[{}", "[".repeat(3000)));
            assert!(error_of(text).2.contains("nested more than"));
        });
    }

    #[test]
    fn discards_and_tags_within_the_bound_read_as_before() {
        let text = "#_ #_ {:a 1} {:b 2}\n{:process 0, :type :invoke, :f :acquire, :time 10, \
                    :value #_ #_ 1 2 {:ttl-ms 5}}\n#;comment\n_ [1]\n";
        let history = read(text).unwrap();
        assert_eq!(history.ops.len(), 1);
        assert_eq!(history.ops[0].ttl_ms(), Some(5));
    }

    #[test]
    fn a_u_character_literal_cut_inside_a_character_is_an_error_not_a_panic() {
        // The crash report: the 8-byte file `\u00€`.
        let (line, _, message) = error_of("\\u00\u{20ac}");
        assert_eq!(line, 1, "{message}");
        assert!(message.contains("bad character literal"), "{message}");
        let (line, field, message) = error_of(ok_with_value("\\u0\u{e9}1"));
        assert_eq!((line, field.as_str()), (2, "value"), "{message}");
        // Good character literals still read.
        for literal in ["\\u0041", "\\newline", "\\a", "\\\u{e9}", "\\u"] {
            let text = format!(
                "{INVOKE}{{:process 0, :type :ok, :f :acquire, :time 20, :value [{literal}]}}\n"
            );
            assert_eq!(read(&text).map(|h| h.ops.len()).ok(), Some(2), "{literal}");
        }
    }

    #[test]
    fn absurd_numbers_are_refused() {
        // A BigDecimal that takes 22 GB to print or compare.
        let text = "{:process 0, :type :invoke, :f :acquire, :time 22e22222222222M}\n";
        let (line, field, message) = error_of(text);
        assert_eq!((line, field.as_str()), (1, "time"), "{message}");
        assert!(message.contains("exponent"), "{message}");
        // Glued across a comment, as the parser reads it.
        let (_, field, message) = error_of(ok_with_value("2e;c\n2222222222222M"));
        assert_eq!(field, "value", "{message}");
        let (_, field, message) = error_of(ok_with_value(&"9".repeat(101)));
        assert_eq!(field, "value", "{message}");
        assert!(message.contains("more than 100"), "{message}");
        // Within the bounds a number is the converter's to judge, and quoted short.
        let (_, field, message) =
            error_of("{:process 0, :type :invoke, :f :acquire, :time 1e1000M}\n");
        assert_eq!(field, "time", "{message}");
        assert!(message.len() < 400, "{message}");
        assert!(read(&ok_with_value(&format!(
            "[{}N 1e-1000M 1.5e300]",
            "9".repeat(99)
        )))
        .is_ok());
    }

    #[test]
    fn a_form_longer_than_the_bound_is_refused_where_it_starts() {
        let long = format!("\"{}\"", "x".repeat(MAX_FORM_BYTES));
        let (line, _, message) = error_of(ok_with_value(&long));
        assert_eq!(line, 2, "{message}");
        assert!(message.contains("longer than 1 MiB"), "{message}");
        // An endless atom (a file of zero bytes is not EDN, but it must end).
        let (line, _, message) = error_of(vec![b'a'; MAX_FORM_BYTES + 10]);
        assert_eq!(line, 1, "{message}");
        let (line, _, message) = error_of(vec![0u8; 1000]);
        assert_eq!(line, 1, "{message}");
    }

    #[test]
    fn bad_utf8_and_mismatched_brackets_are_errors_naming_the_line() {
        let mut text = ok_with_value("\"ab").into_bytes();
        text.splice(text.len() - 4..text.len() - 4, [0xff, 0xfe]);
        let (line, field, message) = error_of(&text);
        assert_eq!((line, field.as_str()), (2, "value"), "{message}");
        assert!(message.contains("UTF-8"), "{message}");
        let (line, _, message) = error_of(ok_with_value("[1\n 2)"));
        assert_eq!(line, 3, "{message}");
        assert!(message.contains("opened on line 2"), "{message}");
        let (_, field, message) = error_of(ok_with_value("\"\\q\""));
        assert_eq!(field, "value", "{message}");
    }
}
