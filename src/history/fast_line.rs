//! The reader's scanner: one pass over a line's bytes, for every layout the format allows.
//!
//! serde_json reads a history at about 1M lines/s; the benchmark asks for 5M events/s end to
//! end. This scanner reads a line with its members in any order, the optional members the
//! recorder writes (`wall`, `error`, `node`, the acquire options, a nemesis event's lists)
//! and unknown members holding any JSON value (skipped, but checked to be valid JSON), and
//! builds the `EventRef` without allocating. It steps aside (`None`) at anything it cannot
//! read exactly as serde would: an escape in a string it keeps, a number that is not a plain
//! integer where a number is used, a member of the wrong type, a duplicate, a surrogate
//! escape, nesting past `MAX_DEPTH`. The caller then parses the line with serde, which
//! accepts every valid line and explains every invalid one. So the scanner decides nothing
//! on its own: whatever it accepts, serde accepts with the same meaning, and every error
//! message comes from one place.

use super::build::{EventRef, Payload, ValueShape};
use super::event::{EventType, Process};

/// How deep the skipper follows nested arrays and objects; deeper goes to serde (which
/// stops at 128).
const MAX_DEPTH: u32 = 100;

/// Eight copies of a byte.
const fn splat(byte: u8) -> u64 {
    u64::from_le_bytes([byte; 8])
}
const LOW_BITS: u64 = splat(0x01);
const HIGH_BITS: u64 = splat(0x80);

/// The bytes of `word` that end a plain run inside a JSON string (`"`, `\`, a control
/// character, or a byte of a multi-byte UTF-8 character) have their high bit set; the
/// lowest such bit is exact (a borrow can only spill into a byte above a true match).
fn specials(word: u64) -> u64 {
    let zero_at = |x: u64| x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS;
    zero_at(word ^ splat(b'"'))
        | zero_at(word ^ splat(b'\\'))
        | (word.wrapping_sub(splat(0x20)) & !word & HIGH_BITS)
        | (word & HIGH_BITS)
}

/// The value of eight decimal digits, one per byte (0..=9, the first, most significant, in
/// the lowest byte): three multiplications instead of eight (Lemire's method).
#[inline]
fn eight_digits(digits: u64) -> u64 {
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    ((pairs & MASK)
        .wrapping_mul(MUL1)
        .wrapping_add(((pairs >> 16) & MASK).wrapping_mul(MUL2)))
        >> 32
}

/// The run of ASCII digits at `start`: its length and, if at most 18 digits long, its value
/// (the value of a longer run is meaningless). The first eight bytes
/// are judged and converted at once where the slice has them, the rest (a time or a `wall`
/// member has 10 to 13 digits) one at a time.
#[inline(always)]
fn digit_run(bytes: &[u8], start: usize) -> (usize, u64) {
    let mut at = start;
    let mut value = 0u64;
    if let Some(chunk) = bytes.get(start..start + 8) {
        let offsets = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])) ^ splat(b'0');
        // A byte is a digit when its offset from `0` is below 10: adding 0x76 to the low
        // seven bits sets the high bit from 10 on (no carry leaves a byte), and an offset
        // with the high bit already set is no digit either.
        let not_digit = (((offsets & splat(0x7f)) + splat(0x76)) | offsets) & HIGH_BITS;
        if not_digit != 0 {
            let n = not_digit.trailing_zeros() / 8;
            return match n {
                0 => (0, 0),
                // The digits moved up to the top bytes; the bytes shifted in read as
                // leading zeros.
                _ => (n as usize, eight_digits(offsets << (64 - 8 * n))),
            };
        }
        value = eight_digits(offsets);
        at += 8;
    }
    // Past 18 digits the value wraps, but the caller rejects such a run anyway.
    while let Some(&digit @ b'0'..=b'9') = bytes.get(at) {
        value = value.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
        at += 1;
    }
    (at - start, value)
}

/// A plain integer at `at` (an optional `-`, then 1 to 18 digits with no leading zero, and
/// no fraction or exponent after them): its value and where it ends. Anything else, even a
/// valid number, is `None`.
#[inline(always)]
fn plain_int(bytes: &[u8], at: usize) -> Option<(i64, usize)> {
    let negative = bytes.get(at) == Some(&b'-');
    let start = at + usize::from(negative);
    let (digits, value) = digit_run(bytes, start);
    let end = start + digits;
    // Leading zeros are invalid JSON; longer numbers are serde's business.
    if digits == 0 || digits > 18 || (digits > 1 && bytes[start] == b'0') {
        return None;
    }
    // A fraction or exponent is no integer, and serde_json reads `-0` as a float.
    if matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) || (negative && value == 0) {
        return None;
    }
    // At most 18 digits: below 10^18, so it fits i64.
    let value = value as i64;
    Some((if negative { -value } else { value }, end))
}

/// A string as it lies in the line: its bytes between the quotes, checked to be valid JSON
/// and UTF-8.
struct Raw<'a> {
    bytes: &'a [u8],
    /// It holds an escape, so its text is not its bytes.
    escaped: bool,
    /// Every byte is ASCII.
    ascii: bool,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A member name the reader uses, or another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Name {
    Index,
    Time,
    Process,
    Type,
    F,
    Key,
    Value,
    Other,
}

impl<'a> Scanner<'a> {
    /// The next byte, or 0 past the end (0 is valid nowhere in JSON outside a string).
    #[inline]
    fn peek(&self) -> u8 {
        self.bytes.get(self.at).copied().unwrap_or(0)
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let b' ' | b'\t' | b'\r' | b'\n' = self.peek() {
            self.at += 1;
        }
    }

    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek() == byte).then(|| self.at += 1)
    }

    /// Exactly `word` (`null`, `true`, `false`).
    #[inline]
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// After a member or element: `,` (another follows: true) or `close` (false).
    #[inline]
    fn more(&mut self, close: u8) -> Option<bool> {
        self.skip_ws();
        let byte = self.peek();
        self.at += 1;
        if byte == b',' {
            Some(true)
        } else if byte == close {
            Some(false)
        } else {
            None
        }
    }

    /// `null` or an array, each element read by `element` (a nemesis event's `targets` and
    /// `processes`).
    #[inline]
    fn list(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.peek() == b'n' {
            return self.literal(b"null");
        }
        self.eat(b'[')?;
        self.skip_ws();
        if self.peek() == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            element(self)?;
            if !self.more(b']')? {
                return Some(());
            }
        }
    }

    /// A string, whitespace and its opening quote next.
    fn string(&mut self) -> Option<Raw<'a>> {
        self.eat(b'"')?;
        let start = self.at;
        let (mut escaped, mut ascii) = (false, true);
        loop {
            // Eight bytes at a time to the next special byte, then that byte alone.
            let special = loop {
                match self.bytes.get(self.at..self.at + 8) {
                    Some(chunk) => {
                        let found = specials(u64::from_le_bytes(chunk.try_into().ok()?));
                        if found != 0 {
                            self.at += found.trailing_zeros() as usize / 8;
                            break *self.bytes.get(self.at)?;
                        }
                        self.at += 8;
                    }
                    None => {
                        let byte = *self.bytes.get(self.at)?;
                        if byte == b'"' || byte == b'\\' || !(0x20..0x80).contains(&byte) {
                            break byte;
                        }
                        self.at += 1;
                    }
                }
            };
            match special {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                0x80.. => {
                    ascii = false;
                    self.at += 1;
                }
                _ => return None, // a control character: invalid JSON
            }
        }
        let bytes = &self.bytes[start..self.at];
        self.at += 1;
        if !ascii {
            std::str::from_utf8(bytes).ok()?;
        }
        Some(Raw {
            bytes,
            escaped,
            ascii,
        })
    }

    /// One escape, at its backslash. A `\u` escape of a surrogate goes to serde, which
    /// judges whether it is one of a pair.
    fn escape(&mut self) -> Option<()> {
        match *self.bytes.get(self.at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
            b'u' => {
                let mut code = 0;
                for &digit in self.bytes.get(self.at + 2..self.at + 6)? {
                    code = code * 16 + char::from(digit).to_digit(16)?;
                }
                if (0xD800..0xE000).contains(&code) {
                    return None;
                }
                self.at += 6;
            }
            _ => return None,
        }
        Some(())
    }

    /// A string the event keeps, borrowed from the line: so without escapes.
    fn text(&mut self) -> Option<&'a str> {
        let raw = self.string()?;
        if raw.escaped {
            return None;
        }
        if raw.ascii {
            // SAFETY: every byte was just checked to be ASCII, which is valid UTF-8. The
            // checked conversion costs about a tenth of the reader's time on short strings.
            Some(unsafe { std::str::from_utf8_unchecked(raw.bytes) })
        } else {
            std::str::from_utf8(raw.bytes).ok() // checked by `string`; no unsafe off the hot path
        }
    }

    /// Exactly `text`, compared as a fixed-size array: a few inline word compares rather
    /// than a call to memcmp.
    #[inline]
    fn lit<const N: usize>(&mut self, text: &[u8; N]) -> bool {
        let end = self.at + N;
        let here: Option<&[u8; N]> = self.bytes.get(self.at..end).and_then(|b| b.try_into().ok());
        let found = here == Some(text);
        if found {
            self.at = end;
        }
        found
    }

    /// A member's name and its `:`. The compact `"name":` of the members the reader uses is
    /// matched whole; anything else (whitespace, escapes, other names) is scanned as a string.
    #[inline]
    fn member_name(&mut self) -> Option<Name> {
        self.skip_ws();
        let fast = match self.bytes.get(self.at + 1) {
            Some(b'i') if self.lit(b"\"index\":") => Name::Index,
            Some(b't') if self.lit(b"\"time\":") => Name::Time,
            Some(b't') if self.lit(b"\"type\":") => Name::Type,
            Some(b'p') if self.lit(b"\"process\":") => Name::Process,
            Some(b'f') if self.lit(b"\"f\":") => Name::F,
            Some(b'k') if self.lit(b"\"key\":") => Name::Key,
            Some(b'v') if self.lit(b"\"value\":") => Name::Value,
            _ => {
                let raw = self.string()?;
                if raw.escaped {
                    return None; // it might spell a member the reader uses
                }
                self.eat(b':')?;
                match raw.bytes {
                    b"index" => Name::Index,
                    b"time" => Name::Time,
                    b"process" => Name::Process,
                    b"type" => Name::Type,
                    b"f" => Name::F,
                    b"key" => Name::Key,
                    b"value" => Name::Value,
                    _ => Name::Other,
                }
            }
        };
        self.skip_ws();
        Some(fast)
    }

    /// One or more digits.
    fn digits(&mut self) -> Option<()> {
        let start = self.at;
        while self.peek().is_ascii_digit() {
            self.at += 1;
        }
        (self.at > start).then_some(())
    }

    /// A number of any form, checked against JSON's grammar (whitespace skipped before it).
    #[cold]
    fn number(&mut self) -> Option<()> {
        if self.peek() == b'-' {
            self.at += 1;
        }
        let start = self.at;
        self.digits()?;
        // JSON forbids leading zeros.
        if self.at - start > 1 && self.bytes[start] == b'0' {
            return None;
        }
        if self.peek() == b'.' {
            self.at += 1;
            self.digits()?;
        }
        if let b'e' | b'E' = self.peek() {
            self.at += 1;
            if let b'+' | b'-' = self.peek() {
                self.at += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    /// A plain integer of at most 18 digits (so it fits `i64`); anything else, even a
    /// valid number, is `None` and leaves the position as it was.
    #[inline(always)]
    fn int(&mut self) -> Option<i64> {
        let (value, end) = plain_int(self.bytes, self.at)?;
        self.at = end;
        Some(value)
    }

    /// A plain integer ≥ 0 that fits `i64` (larger ones are serde's business).
    #[inline(always)]
    fn unsigned(&mut self) -> Option<u64> {
        u64::try_from(self.int()?).ok()
    }

    /// `null` (`None`) or a plain integer.
    fn optional_int(&mut self) -> Option<Option<i64>> {
        self.skip_ws();
        if self.peek() == b'n' {
            self.literal(b"null")?;
            Some(None)
        } else {
            self.int().map(Some)
        }
    }

    /// Any JSON value, checked and passed over. `depth` counts the enclosing collections.
    fn skip(&mut self, depth: u32) -> Option<()> {
        self.skip_ws();
        match self.peek() {
            b'"' => {
                self.string()?;
            }
            b'n' => self.literal(b"null")?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            open @ (b'{' | b'[') => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.at += 1;
                let close = if open == b'{' { b'}' } else { b']' };
                self.skip_ws();
                if self.peek() == close {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    if open == b'{' {
                        // Any name: an ignored member may repeat, as serde ignores it too.
                        self.string()?;
                        self.eat(b':')?;
                    }
                    self.skip(depth + 1)?;
                    if !self.more(close)? {
                        break;
                    }
                }
            }
            _ => {
                if self.int().is_none() {
                    self.number()?; // the rare number that is not a short plain integer
                }
            }
        }
        Some(())
    }

    /// The `value` object, at its `{`: the members the builder may use (see `Payload`),
    /// anything else skipped.
    fn payload(&mut self) -> Option<Payload> {
        let mut payload = Payload::default();
        self.eat(b'{')?;
        self.skip_ws();
        if self.peek() == b'}' {
            self.at += 1;
            return Some(payload);
        }
        let mut seen = 0u16;
        loop {
            let name = self.string()?;
            if name.escaped {
                return None; // it might spell a member the builder uses
            }
            self.eat(b':')?;
            self.skip_ws();
            let bit = match name.bytes {
                b"token" => {
                    payload.token = self.optional_int()?;
                    1
                }
                b"lease_ms" => {
                    payload.lease_ms = self.optional_int()?;
                    2
                }
                b"ttl_ms" => {
                    payload.ttl_ms = self.optional_int()?;
                    4
                }
                b"wait_ms" => {
                    self.optional_int()?; // only checked: no check uses it
                    8
                }
                b"mode" => {
                    payload.shared = match self.peek() {
                        b'n' => self.literal(b"null").map(|()| false)?,
                        _ => match self.text()? {
                            "exclusive" => false,
                            "shared" => true,
                            _ => return None,
                        },
                    };
                    16
                }
                b"fair" => {
                    payload.fair = match self.peek() {
                        b't' => self.literal(b"true").map(|()| true)?,
                        b'f' => self.literal(b"false").map(|()| false)?,
                        _ => self.literal(b"null").map(|()| false)?,
                    };
                    32
                }
                b"value" => {
                    payload.value = match self.peek() {
                        b'n' => self.literal(b"null").map(|()| ValueShape::Null)?,
                        // A float serde may find out of range: its business.
                        b'-' | b'0'..=b'9' => ValueShape::Int(self.int()?),
                        _ => self.skip(1).map(|()| ValueShape::Other)?,
                    };
                    64
                }
                b"targets" => {
                    self.list(|c| {
                        payload.targets.push(c.text()?.to_string());
                        Some(())
                    })?;
                    128
                }
                b"processes" => {
                    self.list(|c| {
                        c.skip_ws();
                        payload.processes.push(c.unsigned()?);
                        Some(())
                    })?;
                    256
                }
                _ => {
                    self.skip(1)?;
                    0
                }
            };
            if seen & bit != 0 {
                return None; // a duplicate member: serde's error message
            }
            seen |= bit;
            if !self.more(b'}')? {
                return Some(payload);
            }
        }
    }
}

/// Reads a line in exactly the layout serde writes for `Event` (`HistoryWriter`, the
/// recorder, `lockaudit synth`): compact, members in their declared order, `error`, `node`
/// and `wall` optional, as a run of fixed byte strings and numbers. About twice as fast as
/// the general scan; any deviation (or a nemesis event's lists) returns `None`, and `parse`
/// scans the line in general. Inlined into `parse`, so the event is built where the
/// caller keeps it rather than copied out.
#[inline(always)]
fn parse_canonical(line: &[u8]) -> Option<EventRef<'_>> {
    parse_canonical_prefix(line).and_then(|(event, end)| (end == line.len()).then_some(event))
}

/// Reads a line in serde's layout (see `parse_canonical`) at the start of `bytes`, which may
/// go on past the line: the event and where its closing `}` ends. Every byte it reads is
/// matched against a fixed string, a digit or a printable character inside a string, so it
/// never reads past the line's end (a line end matches none of them).
#[inline(always)]
pub fn parse_canonical_prefix(bytes: &[u8]) -> Option<(EventRef<'_>, usize)> {
    let line = bytes;
    let mut c = Cursor { bytes, at: 0 };
    c.lit(b"{\"index\":")?;
    let index = u64::try_from(c.int()?).ok()?;
    c.lit(b",\"time\":")?;
    let time = c.int()?;
    c.lit(b",\"process\":")?;
    let process = if c.lit(b"\"nemesis\"").is_some() {
        Process::Nemesis
    } else {
        Process::Client(u64::try_from(c.int()?).ok()?)
    };
    c.lit(b",\"type\":\"")?;
    let ty = match *line.get(c.at)? {
        b'i' if c.lit(b"invoke\"").is_some() => EventType::Invoke,
        b'o' if c.lit(b"ok\"").is_some() => EventType::Ok,
        b'f' if c.lit(b"fail\"").is_some() => EventType::Fail,
        b'i' if c.lit(b"info\"").is_some() => EventType::Info,
        _ => return None,
    };
    c.lit(b",\"f\":\"")?;
    // The client operations as whole words (a few compares, no scan); any other name, a
    // nemesis fault's, is scanned.
    let f = match *line.get(c.at)? {
        b'a' if c.lit(b"acquire\"").is_some() => "acquire",
        b'r' if c.lit(b"release\"").is_some() => "release",
        b'r' if c.lit(b"read\"").is_some() => "read",
        b'r' if c.lit(b"renew\"").is_some() => "renew",
        b'w' if c.lit(b"write\"").is_some() => "write",
        _ => c.plain_string()?,
    };
    let key = match c.lit(b",\"key\":\"") {
        Some(()) => Some(c.plain_string()?),
        None => None,
    };
    let mut payload = Payload::default();
    if c.lit(b",\"value\":{").is_some() && c.lit(b"}").is_none() {
        // serde_json writes the payload's members in alphabetical order, others may not.
        let mut seen = 0u8;
        loop {
            if c.lit(b"\"reason\":\"").is_some() {
                c.plain_string()?; // why an acquire failed: for people, not for checks
            } else {
                let slot = if c.lit(b"\"lease_ms\":").is_some() {
                    1
                } else if c.lit(b"\"token\":").is_some() {
                    2
                } else if c.lit(b"\"value\":").is_some() {
                    4
                } else if c.lit(b"\"ttl_ms\":").is_some() {
                    8
                } else if c.lit(b"\"wait_ms\":").is_some() {
                    16
                } else if c.lit(b"\"mode\":").is_some() {
                    32
                } else if c.lit(b"\"fair\":").is_some() {
                    64
                } else {
                    return None;
                };
                if seen & slot != 0 {
                    return None;
                }
                seen |= slot;
                match slot {
                    32 => {
                        payload.shared = if c.lit(b"\"shared\"").is_some() {
                            true
                        } else if c.lit(b"\"exclusive\"").is_some() {
                            false
                        } else {
                            c.lit(b"null")?;
                            false
                        }
                    }
                    64 => {
                        payload.fair = if c.lit(b"true").is_some() {
                            true
                        } else {
                            c.lit(b"false").or_else(|| c.lit(b"null"))?;
                            false
                        }
                    }
                    _ => {
                        let value = if c.lit(b"null").is_some() {
                            None
                        } else {
                            Some(c.int()?)
                        };
                        match slot {
                            1 => payload.lease_ms = value,
                            2 => payload.token = value,
                            8 => payload.ttl_ms = value,
                            16 => {} // how long the acquire may wait: no check uses it
                            _ => payload.value = value.map_or(ValueShape::Null, ValueShape::Int),
                        }
                    }
                }
            }
            if c.lit(b",").is_none() {
                c.lit(b"}")?;
                break;
            }
        }
    }
    if c.lit(b",\"error\":\"").is_some() {
        c.plain_string()?;
    }
    if c.lit(b",\"node\":\"").is_some() {
        c.plain_string()?;
    }
    if c.lit(b",\"wall\":").is_some() {
        c.int()?; // for people only: the checker ignores it
    }
    c.lit(b"}")?;
    Some((
        EventRef {
            index,
            time,
            process,
            ty,
            f,
            key,
            payload,
            wrong: &[],
        },
        c.at,
    ))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Consumes exactly `text`. Generic over the length so that the comparison is a few
    /// inline word compares rather than a call to memcmp.
    fn lit<const N: usize>(&mut self, text: &[u8; N]) -> Option<()> {
        let end = self.at + N;
        let here: &[u8; N] = self.bytes.get(self.at..end)?.try_into().ok()?;
        (here == text).then(|| self.at = end)
    }

    /// Longer numbers go to the general scan, which hands them to serde.
    #[inline(always)]
    fn int(&mut self) -> Option<i64> {
        let (value, end) = plain_int(self.bytes, self.at)?;
        self.at = end;
        Some(value)
    }

    /// The rest of a string whose opening quote is consumed: ASCII, no escapes.
    fn plain_string(&mut self) -> Option<&'a str> {
        let rest = &self.bytes[self.at..];
        // Eight bytes at a time: the first special byte must be the closing quote.
        let mut len = 0;
        let end = loop {
            match rest.get(len..len + 8) {
                Some(chunk) => {
                    let found = specials(u64::from_le_bytes(chunk.try_into().ok()?));
                    if found != 0 {
                        break len + found.trailing_zeros() as usize / 8;
                    }
                    len += 8;
                }
                None => match *rest.get(len)? {
                    b'"' | b'\\' | 0..=0x1f | 0x80..=0xff => break len,
                    _ => len += 1,
                },
            }
        };
        if rest.get(end) != Some(&b'"') {
            return None; // an escape, a control character or non-ASCII text
        }
        self.at += end + 1;
        // SAFETY: every byte before `end` was just checked to be printable ASCII, which is
        // valid UTF-8. The checked conversion costs about a tenth of the reader's time here.
        Some(unsafe { std::str::from_utf8_unchecked(&rest[..end]) })
    }
}

/// Parses `line` (without its line end); `None` means "ask serde".
#[inline]
pub fn parse(line: &[u8]) -> Option<EventRef<'_>> {
    if let Some(event) = parse_canonical(line) {
        return Some(event);
    }
    parse_general(line)
}

/// Any layout: members in any order, whitespace, unknown members.
#[inline(never)]
fn parse_general(line: &[u8]) -> Option<EventRef<'_>> {
    let mut s = Scanner { bytes: line, at: 0 };
    s.eat(b'{')?;
    let (mut index, mut time, mut process, mut ty, mut f) = (None, None, None, None, None);
    let mut key = None;
    let mut payload = Payload::default();
    let mut seen = 0u8;
    loop {
        let bit = match s.member_name()? {
            Name::Index => {
                index = Some(s.unsigned()?);
                1
            }
            Name::Time => {
                time = Some(s.int()?);
                2
            }
            Name::Process => {
                process = Some(if s.peek() == b'"' {
                    match s.text()? {
                        "nemesis" => Process::Nemesis,
                        _ => return None,
                    }
                } else {
                    Process::Client(s.unsigned()?)
                });
                4
            }
            Name::Type => {
                ty = Some(match s.text()? {
                    "invoke" => EventType::Invoke,
                    "ok" => EventType::Ok,
                    "fail" => EventType::Fail,
                    "info" => EventType::Info,
                    _ => return None,
                });
                8
            }
            Name::F => {
                f = Some(s.text()?);
                16
            }
            Name::Key => {
                key = if s.peek() == b'n' {
                    s.literal(b"null")?;
                    None
                } else {
                    Some(s.text()?)
                };
                32
            }
            Name::Value => {
                if s.peek() == b'n' {
                    s.literal(b"null")?;
                } else {
                    payload = s.payload()?;
                }
                64
            }
            // `wall`, `error`, `node` and any member this version does not know: the
            // reader ignores them whatever they hold (serde's `RawLine` does not name them).
            Name::Other => {
                s.skip(1)?;
                0
            }
        };
        if seen & bit != 0 {
            return None; // a duplicate member: serde's error message
        }
        seen |= bit;
        if !s.more(b'}')? {
            break;
        }
    }
    s.skip_ws();
    if s.at != line.len() {
        return None;
    }
    Some(EventRef {
        index: index?,
        time: time?,
        process: process?,
        ty: ty?,
        f: f?,
        key,
        payload,
        wrong: &[],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_common_shapes() {
        let e = parse(br#"{"index":1,"time":91000,"process":0,"type":"ok","f":"acquire","key":"lock:a","value":{"token":33,"lease_ms":2000}}"#).unwrap();
        assert_eq!(
            (e.index, e.time, e.process, e.ty),
            (1, 91000, Process::Client(0), EventType::Ok)
        );
        assert_eq!((e.f, e.key), ("acquire", Some("lock:a")));
        assert_eq!(
            (e.payload.token, e.payload.lease_ms),
            (Some(33), Some(2000))
        );
        let e = parse(br#"{ "index": 5, "time": -3, "process": 2, "type": "invoke", "f": "write", "key": "k", "value": {"token": null, "value": "b"}, "error": "x", "wall": 17 }"#).unwrap();
        assert_eq!(
            (e.time, e.payload.value, e.payload.token),
            (-3, ValueShape::Other, None)
        );
    }

    #[test]
    fn reads_the_recorders_layout_with_wall_and_a_nemesis_event() {
        let e = parse(br#"{"index":0,"time":2526179,"process":2,"type":"invoke","f":"acquire","key":"lock:0","value":{"fair":true,"mode":"shared","ttl_ms":600,"wait_ms":2000},"wall":1795670259014}"#).unwrap();
        let p = &e.payload;
        assert_eq!((p.ttl_ms, p.shared, p.fair), (Some(600), true, true));
        let e = parse(br#"{"index":158,"time":1000913321,"process":"nemesis","type":"info","f":"partition","value":{"link":"replication","processes":[1,3],"targets":["master-0","replica-1"]},"wall":1795632002669}"#).unwrap();
        assert_eq!(e.process, Process::Nemesis);
        assert_eq!(e.payload.targets, vec!["master-0", "replica-1"]);
        assert_eq!(e.payload.processes, vec![1, 3]);
    }

    #[test]
    fn the_canonical_and_general_paths_agree() {
        for line in [
            &br#"{"index":3,"time":7,"process":1,"type":"fail","f":"acquire","key":"k","value":{"reason":"held"}}"#[..],
            br#"{"index":3,"time":7,"process":1,"type":"ok","f":"acquire","key":"k","value":{"lease_ms":300,"token":-4}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"ok","f":"read","key":"k","value":{"value":null}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"info","f":"read","key":"k","error":"killed","wall":1795670259014}"#,
            br#"{"index":3,"time":7,"process":1,"type":"info","f":"read","key":"k","error":"killed","node":"master-0","wall":1}"#,
            br#"{"index":3,"time":7,"process":"nemesis","type":"info","f":"kill","value":{}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"ttl_ms":2000},"wall":17}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"fair":true,"mode":"shared","ttl_ms":null,"wait_ms":50}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"fair":false,"mode":"exclusive","wait_ms":0}}"#,
        ] {
            let canonical = parse_canonical(line).expect("canonical");
            let mut spaced = String::from_utf8(line.to_vec()).unwrap().replace(',', ", ");
            spaced.insert(1, ' ');
            assert!(parse_canonical(spaced.as_bytes()).is_none());
            let general = parse(spaced.as_bytes()).expect("general");
            assert_eq!(format!("{canonical:?}"), format!("{general:?}"));
        }
        let minus_zero =
            br#"{"index":3,"time":-0,"process":1,"type":"invoke","f":"read","key":"k"}"#;
        assert!(parse_canonical(minus_zero).is_none());
    }

    #[test]
    fn reads_members_in_any_order() {
        let line = br#"{"wall":17,"value":{"lease_ms":300,"token":4},"key":"k","f":"acquire","type":"ok","process":1,"time":7,"index":3}"#;
        let e = parse(line).unwrap();
        assert_eq!((e.index, e.time, e.process), (3, 7, Process::Client(1)));
        assert_eq!((e.f, e.key, e.ty), ("acquire", Some("k"), EventType::Ok));
        assert_eq!((e.payload.token, e.payload.lease_ms), (Some(4), Some(300)));
    }

    #[test]
    fn skips_unknown_members_of_any_shape() {
        let e = parse(r#"{"index":1,"time":2,"notice":"a \"quoted\" \\ \u00e9 \n note","process":0,"x":{"a":[1,{"b":null}],"c":-1.5e+3},"type":"ok","f":"read","key":"k","value":{"value":7,"extra":[true,false,"\t"]},"été":{}}"#.as_bytes()).unwrap();
        assert_eq!((e.index, e.payload.value), (1, ValueShape::Int(7)));
    }

    #[test]
    fn steps_aside_for_anything_it_cannot_read_as_serde_would() {
        for line in [
            // An escape in a string the event keeps, or in a member name.
            &br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a\"b"}"#[..],
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","k\u0065y":"a"}"#,
            // A number where an integer is used.
            br#"{"index":1,"time":1.5,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":-0,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":01,"time":1,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":99999999999999999999,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"read","key":"a","value":{"value":1e400}}"#,
            // Duplicates, missing members, trailing bytes, wrong types, broken JSON.
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","key":"b"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire"} x"#,
            br#"{"time":1,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"done","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":-1,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"mode":"read"}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"fair":1}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"ttl_ms":1.5}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","value":[5,1000]}"#,
            br#"{"index":1,"time":1,"process":"nemesis","type":"info","f":"kill","value":{"processes":"all"}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":[1,]}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":"\ud800"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":"\q"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":"tab	in"}"#,
            b"{\"index\":1,\"time\":1,\"process\":0,\"type\":\"ok\",\"f\":\"acquire\",\"key\":\"\xff\"}",
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":tru}"#,
            br#"[1,1,0,"ok","acquire","a"]"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a""#,
        ] {
            assert!(parse(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
        // Nesting deeper than the skipper follows.
        let deep = format!(
            r#"{{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","x":{}{}}}"#,
            "[".repeat(MAX_DEPTH as usize + 1),
            "]".repeat(MAX_DEPTH as usize + 1)
        );
        assert!(parse(deep.as_bytes()).is_none());
    }

    #[test]
    fn integers_of_every_length_read_as_a_digit_loop_reads_them() {
        let slow = |text: &[u8]| -> Option<(i64, usize)> {
            let negative = text.first() == Some(&b'-');
            let start = usize::from(negative);
            let digits = text[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let end = start + digits;
            if digits == 0 || digits > 18 || (digits > 1 && text[start] == b'0') {
                return None;
            }
            let value: i64 = std::str::from_utf8(&text[start..end]).ok()?.parse().ok()?;
            if matches!(text.get(end), Some(b'.' | b'e' | b'E')) || (negative && value == 0) {
                return None;
            }
            Some((if negative { -value } else { value }, end))
        };
        let mut texts = Vec::new();
        for length in 0..=21 {
            let digits: String = (0..length)
                .map(|i| char::from(b'1' + (i * 7 % 9) as u8))
                .collect();
            for sign in ["", "-"] {
                for lead in ["", "0"] {
                    for after in ["", "}", ",\"x\":1", ".5", "e3", "0", "/", ":", "\u{80}"] {
                        texts.push(format!("{sign}{lead}{digits}{after}"));
                    }
                }
            }
        }
        texts.extend(
            [
                "999999999999999999",
                "1000000000000000000",
                "-0",
                "0",
                "00",
                "9",
            ]
            .map(String::from),
        );
        for text in &texts {
            assert_eq!(
                plain_int(text.as_bytes(), 0),
                slow(text.as_bytes()),
                "{text}"
            );
            // The same text further into a line, so the eight-byte steps fall elsewhere.
            let padded = format!("abc{text}");
            assert_eq!(
                plain_int(padded.as_bytes(), 3),
                slow(text.as_bytes()).map(|(v, end)| (v, end + 3)),
                "{padded}"
            );
        }
    }

    #[test]
    fn strings_of_every_length_end_where_they_end() {
        // Around the eight-byte steps of the string scan, with a special byte at each place.
        for length in 0..20 {
            for special in ["", "é", "\\n", "\\u0041"] {
                for at in 0..=length {
                    let mut key = "k".repeat(length);
                    key.insert_str(at, special);
                    let line = format!(
                        r#"{{"index":0,"time":1,"process":0,"type":"ok","f":"read","x":"{key}","key":"{key}"}}"#
                    );
                    let e = parse(line.as_bytes());
                    if special.starts_with('\\') {
                        assert!(e.is_none(), "{line}");
                    } else {
                        assert_eq!(e.expect(&line).key, Some(key.as_str()));
                    }
                }
            }
        }
    }
}
