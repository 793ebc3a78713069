//! A fast path for the lines lockaudit's own recorder writes.
//!
//! serde_json parses a history at about 1M lines/s; the benchmark asks for 5M events/s end
//! to end. This scanner handles the common shape of a line (known fields, integers, strings
//! without escapes, a flat `value` object) in one pass over its bytes, and gives up (`None`)
//! at anything else: the caller then parses the line with serde, which accepts every valid
//! line and explains every invalid one. So the fast path decides nothing on its own: for
//! any line it either agrees with serde or steps aside.

use super::build::{EventRef, Payload, ValueShape};
use super::event::{EventType, Process};

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string with no escapes (anything with a backslash goes to serde).
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = &self.bytes[start..];
        // Strings here are short (keys, names): a plain loop beats any search set-up.
        let mut len = 0;
        let mut high = 0u8;
        loop {
            let b = *rest.get(len)?;
            if b == b'"' {
                break;
            }
            if b == b'\\' || b < 0x20 {
                return None; // escapes and control characters: serde's business
            }
            high |= b;
            len += 1;
        }
        self.at = start + len + 1;
        let text = &rest[..len];
        if high < 0x80 {
            // SAFETY: every byte is below 0x80, and ASCII is valid UTF-8.
            Some(unsafe { std::str::from_utf8_unchecked(text) })
        } else {
            std::str::from_utf8(text).ok()
        }
    }

    /// One of `words`, quoted: its position in `words`. Member names and `type` values are
    /// matched whole against the bytes, without scanning them as strings first.
    fn word(&mut self, words: &[&str], likely: usize) -> Option<usize> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let is = |w: &str| {
            rest.len() > w.len() && rest.starts_with(w.as_bytes()) && rest[w.len()] == b'"'
        };
        // Lines from one writer keep one member order: try the likely word first.
        let found = match words.get(likely) {
            Some(w) if is(w) => likely,
            _ => words.iter().position(|w| is(w))?,
        };
        self.at += words[found].len() + 1;
        Some(found)
    }

    /// An integer that fits i64, with no fraction or exponent.
    fn integer(&mut self) -> Option<i64> {
        self.skip_ws();
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let start = self.at;
        let mut value: i64 = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)?
                .checked_add(i64::from(digit - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        // JSON forbids leading zeros; a fraction or exponent is not an integer.
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(if negative { -value } else { value })
    }

    fn null(&mut self) -> Option<()> {
        self.skip_ws();
        if self.bytes[self.at..].starts_with(b"null") {
            self.at += 4;
            Some(())
        } else {
            None
        }
    }

    fn is_null_next(&mut self) -> bool {
        self.skip_ws();
        self.bytes[self.at..].starts_with(b"null")
    }

    /// After a member: `,` (more follow: true) or `}` (the object ends: false).
    fn next_member(&mut self) -> Option<bool> {
        self.skip_ws();
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(true)
            }
            b'}' => {
                self.at += 1;
                Some(false)
            }
            _ => None,
        }
    }

    fn optional_int(&mut self) -> Option<Option<i64>> {
        if self.is_null_next() {
            self.null()?;
            Some(None)
        } else {
            Some(Some(self.integer()?))
        }
    }

    /// `true`, `false` or `null` (false).
    fn optional_bool(&mut self) -> Option<bool> {
        self.skip_ws();
        let rest = &self.bytes[self.at..];
        let (value, len) = if rest.starts_with(b"null") {
            (false, 4)
        } else if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            return None;
        };
        self.at += len;
        Some(value)
    }

    /// The `value` object's members the builder may use (`PAYLOAD_MEMBERS`); anything else
    /// goes to serde.
    fn payload(&mut self) -> Option<Payload> {
        let mut payload = Payload::default();
        self.eat(b'{')?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(payload);
        }
        let mut seen = 0u8;
        loop {
            let name = self.word(&PAYLOAD_MEMBERS, 0)?;
            self.eat(b':')?;
            match PAYLOAD_MEMBERS[name] {
                "token" => payload.token = self.optional_int()?,
                "lease_ms" => payload.lease_ms = self.optional_int()?,
                "ttl_ms" => payload.ttl_ms = self.optional_int()?,
                "wait_ms" => {
                    self.optional_int()?;
                }
                "reason" => {
                    self.string()?;
                }
                "mode" => {
                    payload.shared = if self.is_null_next() {
                        self.null()?;
                        false
                    } else {
                        self.word(&["exclusive", "shared"], 0)? == 1
                    }
                }
                "fair" => payload.fair = self.optional_bool()?,
                _ => {
                    self.skip_ws();
                    payload.value = match self.peek()? {
                        b'n' => {
                            self.null()?;
                            ValueShape::Null
                        }
                        b'"' => {
                            self.string()?;
                            ValueShape::Other
                        }
                        _ => ValueShape::Int(self.integer()?),
                    };
                }
            }
            let bit = 1u8 << name;
            if seen & bit != 0 {
                return None; // a duplicate field: serde's error message
            }
            seen |= bit;
            if !self.next_member()? {
                return Some(payload);
            }
        }
    }
}

/// The payload members the fast paths read (8: one bit each in a `u8`).
const PAYLOAD_MEMBERS: [&str; 8] = [
    "token", "lease_ms", "value", "reason", "ttl_ms", "mode", "fair", "wait_ms",
];

/// Reads a line in exactly the layout `HistoryWriter` writes (compact, members in their
/// declared order, an `error` but no node or wall): a run of fixed byte strings and numbers. About three
/// times faster than `parse`'s general scan; any deviation returns `None`.
fn parse_canonical(line: &[u8]) -> Option<EventRef<'_>> {
    let mut c = Cursor { bytes: line, at: 0 };
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
    let f = c.plain_string()?;
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
    c.lit(b"}")?;
    (c.at == line.len()).then_some(EventRef {
        index,
        time,
        process,
        ty,
        f,
        key,
        payload,
        wrong: &[],
    })
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

    fn int(&mut self) -> Option<i64> {
        let negative = self.bytes.get(self.at) == Some(&b'-');
        let start = self.at + usize::from(negative);
        let mut at = start;
        let mut value: i64 = 0;
        while let Some(&digit @ b'0'..=b'9') = self.bytes.get(at) {
            value = value
                .checked_mul(10)?
                .checked_add(i64::from(digit - b'0'))?;
            at += 1;
        }
        let digits = at - start;
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
            return None;
        }
        if matches!(self.bytes.get(at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at = at;
        Some(if negative { -value } else { value })
    }

    /// The rest of a string whose opening quote is consumed: ASCII, no escapes.
    fn plain_string(&mut self) -> Option<&'a str> {
        let rest = &self.bytes[self.at..];
        // Keys and operation names are short: one plain pass checks and finds the end.
        let mut len = 0;
        loop {
            match *rest.get(len)? {
                b'"' => break,
                b'\\' | 0..=0x1f | 0x80..=0xff => return None,
                _ => len += 1,
            }
        }
        self.at += len + 1;
        // SAFETY: every byte was just checked to be printable ASCII, which is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(&rest[..len]) })
    }
}

/// The members a line may have, in the order the writer puts them.
const MEMBERS: [&str; 10] = [
    "index", "time", "process", "type", "f", "key", "value", "error", "node", "wall",
];

/// Parses `line` if it has the common shape; `None` means "ask serde".
pub fn parse(line: &[u8]) -> Option<EventRef<'_>> {
    if let Some(event) = parse_canonical(line) {
        return Some(event);
    }
    let mut s = Scanner { bytes: line, at: 0 };
    s.eat(b'{')?;
    let (mut index, mut time, mut process, mut ty, mut f) = (None, None, None, None, None);
    let mut key = None;
    let mut payload = Payload::default();
    let mut seen = 0u16;
    let mut next = 0;
    loop {
        let name = s.word(&MEMBERS, next)?;
        next = name + 1;
        s.eat(b':')?;
        let bit = match MEMBERS[name] {
            "index" => {
                index = Some(u64::try_from(s.integer()?).ok()?);
                1
            }
            "time" => {
                time = Some(s.integer()?);
                2
            }
            "process" => {
                s.skip_ws();
                process = Some(if s.peek()? == b'"' {
                    match s.string()? {
                        "nemesis" => Process::Nemesis,
                        _ => return None,
                    }
                } else {
                    Process::Client(u64::try_from(s.integer()?).ok()?)
                });
                4
            }
            "type" => {
                ty = Some(match s.word(&["invoke", "ok", "fail", "info"], 0)? {
                    0 => EventType::Invoke,
                    1 => EventType::Ok,
                    2 => EventType::Fail,
                    _ => EventType::Info,
                });
                8
            }
            "f" => {
                f = Some(s.string()?);
                16
            }
            "key" => {
                key = if s.is_null_next() {
                    s.null()?;
                    None
                } else {
                    Some(s.string()?)
                };
                32
            }
            "value" => {
                if s.is_null_next() {
                    s.null()?;
                } else {
                    payload = s.payload()?;
                }
                64
            }
            "error" | "node" => {
                if s.is_null_next() {
                    s.null()?;
                } else {
                    s.string()?;
                }
                128
            }
            "wall" => {
                s.optional_int()?;
                256
            }
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        if !s.next_member()? {
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
    fn the_canonical_and_general_paths_agree() {
        for line in [
            &br#"{"index":3,"time":7,"process":1,"type":"fail","f":"acquire","key":"k","value":{"reason":"held"}}"#[..],
            br#"{"index":3,"time":7,"process":1,"type":"ok","f":"acquire","key":"k","value":{"lease_ms":300,"token":-4}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"ok","f":"read","key":"k","value":{"value":null}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"info","f":"read","key":"k","error":"killed"}"#,
            br#"{"index":3,"time":7,"process":"nemesis","type":"info","f":"kill","value":{}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"ttl_ms":2000}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"fair":true,"mode":"shared","ttl_ms":null,"wait_ms":50}}"#,
            br#"{"index":3,"time":7,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"fair":false,"mode":"exclusive","wait_ms":0}}"#,
        ] {
            let canonical = parse_canonical(line).expect("canonical");
            let mut spaced = String::from_utf8(line.to_vec()).unwrap().replace(',', ", ");
            spaced.insert(1, ' ');
            let general = parse(spaced.as_bytes()).expect("general");
            assert_eq!(format!("{canonical:?}"), format!("{general:?}"));
        }
    }

    #[test]
    fn reads_the_acquire_options_on_both_paths() {
        let line = br#"{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k","value":{"fair":true,"mode":"shared","ttl_ms":2000,"wait_ms":50}}"#;
        let canonical = parse_canonical(line).expect("canonical");
        let p = &canonical.payload;
        assert_eq!((p.ttl_ms, p.shared, p.fair), (Some(2000), true, true));
        let spaced = String::from_utf8(line.to_vec()).unwrap().replace(':', ": ");
        let general = parse(spaced.as_bytes()).expect("general");
        assert_eq!(general.payload, canonical.payload);
    }

    #[test]
    fn steps_aside_for_anything_unusual() {
        for line in [
            &br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a\"b"}"#[..],
            br#"{"index":1,"time":1.5,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","extra":1}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","key":"b"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire"} x"#,
            br#"{"index":1,"time":1,"process":"nemesis","type":"info","f":"kill","value":{"processes":[1]}}"#,
            br#"{"index":01,"time":1,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":99999999999999999999,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"done","f":"acquire","key":"a"}"#,
            br#"{"time":1,"process":0,"type":"ok","f":"acquire","key":"a"}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"mode":"read"}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"fair":1}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"a","value":{"ttl_ms":1.5}}"#,
            br#"{"index":1,"time":1,"process":0,"type":"ok","f":"acquire","key":"a","value":[5,1000]}"#,
            br#"[1,1,0,"ok","acquire","a"]"#,
        ] {
            assert!(parse(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
    }
}
