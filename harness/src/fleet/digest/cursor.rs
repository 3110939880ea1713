//! A strict cursor over JSON text, for the fleet's fast reading of a
//! report. It takes only JSON that serde_json also takes, and less: any
//! text it is not sure of (a control character in a string, a `\u` escape
//! of a surrogate, a number that may not fit an f64, nesting deeper than
//! any report's) makes it [`Decline`], and the report is read by serde_json,
//! which says what is wrong with it. What it keeps, it reads as serde_json
//! does: a string with escapes and every number it keeps are handed to
//! serde_json itself.

use std::borrow::Cow;

/// The cursor does not take this text: serde_json reads it instead.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Decline;

/// What a cursor step gives.
pub(super) type Step<T> = Result<T, Decline>;

/// Deeper than any report nests (and under serde_json's limit of 128).
const MAX_DEPTH: u32 = 64;

/// How a byte in a string is read: most are text; the quote ends it, the
/// backslash starts an escape, a control character is not JSON.
const TEXT: u8 = 0;
const QUOTE: u8 = 1;
const BACKSLASH: u8 = 2;
const CONTROL: u8 = 3;

static IN_STRING: [u8; 256] = {
    let mut t = [TEXT; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = CONTROL;
        c += 1;
    }
    t[b'"' as usize] = QUOTE;
    t[b'\\' as usize] = BACKSLASH;
    t
};

/// A position in a JSON text.
pub(super) struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    /// At the start of `text`.
    pub fn new(text: &'a str) -> Cursor<'a> {
        Cursor { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        let bytes = self.bytes();
        loop {
            match bytes.get(self.at) {
                Some(b' ' | b'\r' | b'\t') => self.at += 1,
                Some(b'\n') => {
                    self.at += 1;
                    // A pretty-printed report indents each line: the
                    // indent's spaces are counted eight bytes at a time.
                    while let Some(v) = word_at(bytes, self.at) {
                        let other = v ^ spread(b' ');
                        if other != 0 {
                            self.at += (other.trailing_zeros() / 8) as usize;
                            break;
                        }
                        self.at += 8;
                    }
                }
                _ => return,
            }
        }
    }

    /// The first byte of the next value or token, not taken.
    pub fn peek(&mut self) -> Step<u8> {
        self.skip_whitespace();
        self.bytes().get(self.at).copied().ok_or(Decline)
    }

    fn take(&mut self, byte: u8) -> Step<()> {
        if self.peek()? == byte {
            self.at += 1;
            Ok(())
        } else {
            Err(Decline)
        }
    }

    /// Whether only whitespace is left.
    pub fn end(&mut self) -> Step<()> {
        self.skip_whitespace();
        if self.at == self.text.len() {
            Ok(())
        } else {
            Err(Decline)
        }
    }

    /// A string's span: where its text starts and ends (quotes excluded)
    /// and whether it holds escapes.
    fn string_span(&mut self) -> Step<(usize, usize, bool)> {
        self.take(b'"')?;
        let bytes = self.bytes();
        let start = self.at;
        let mut i = start;
        let mut escaped = false;
        loop {
            i = plain_text_end(bytes, i);
            let b = *bytes.get(i).ok_or(Decline)?;
            match IN_STRING[usize::from(b)] {
                TEXT => i += 1,
                QUOTE => break,
                BACKSLASH => {
                    escaped = true;
                    i = escape_end(bytes, i + 1)?;
                }
                _ => return Err(Decline),
            }
        }
        self.at = i + 1;
        Ok((start, i, escaped))
    }

    /// A string's text, borrowed when it holds no escape; one that does is
    /// unescaped by serde_json.
    pub fn string(&mut self) -> Step<Cow<'a, str>> {
        let (start, end, escaped) = self.string_span()?;
        if escaped {
            serde_json::from_str::<String>(&self.text[start - 1..=end])
                .map(Cow::Owned)
                .map_err(|_| Decline)
        } else {
            Ok(Cow::Borrowed(&self.text[start..end]))
        }
    }

    /// A number's text, of JSON's grammar.
    pub fn number_text(&mut self) -> Step<&'a str> {
        self.skip_whitespace();
        let bytes = self.bytes();
        let start = self.at;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(Decline),
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            if !digits(&mut i) {
                return Err(Decline);
            }
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = bytes.get(i) {
            exponent = true;
            i += 1;
            if let Some(b'+' | b'-') = bytes.get(i) {
                i += 1;
            }
            if !digits(&mut i) {
                return Err(Decline);
            }
        }
        let text = &self.text[start..i];
        // A number serde_json may find out of range is left to it.
        if (exponent || text.len() > 24) && !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(Decline);
        }
        self.at = i;
        Ok(text)
    }

    /// A number, as serde_json reads it into an f64.
    pub fn f64(&mut self) -> Step<f64> {
        number(self.number_text()?)
    }

    /// An integer, as serde_json reads it into an i64.
    pub fn i64(&mut self) -> Step<i64> {
        serde_json::from_str(self.number_text()?).map_err(|_| Decline)
    }

    /// Whether the number is the integer 1, written so.
    pub fn is_one(&mut self) -> Step<bool> {
        Ok(self.number_text()? == "1")
    }

    fn literal(&mut self, word: &str) -> Step<()> {
        self.skip_whitespace();
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Decline)
        }
    }

    /// `true` or `false`.
    pub fn bool(&mut self) -> Step<bool> {
        match self.peek()? {
            b't' => self.literal("true").map(|()| true),
            b'f' => self.literal("false").map(|()| false),
            _ => Err(Decline),
        }
    }

    /// `null`.
    pub fn null(&mut self) -> Step<()> {
        self.literal("null")
    }

    /// `null` as `None`, else what `read` makes of the value.
    pub fn or_null<T>(&mut self, read: impl FnOnce(&mut Self) -> Step<T>) -> Step<Option<T>> {
        if self.peek()? == b'n' {
            self.null().map(|()| None)
        } else {
            read(self).map(Some)
        }
    }

    /// An object: `each` reads the value of every key, in order.
    pub fn object(
        &mut self,
        mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Step<()>,
    ) -> Step<()> {
        self.items(b'{', b'}', |c| {
            let key = c.string()?;
            c.take(b':')?;
            each(c, key)
        })
    }

    /// An array: `each` reads every element, in order.
    pub fn array(&mut self, each: impl FnMut(&mut Self) -> Step<()>) -> Step<()> {
        self.items(b'[', b']', each)
    }

    /// Items between `open` and `close`, separated by commas, each read
    /// by `each`.
    fn items(
        &mut self,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Self) -> Step<()>,
    ) -> Step<()> {
        self.take(open)?;
        if self.peek()? == close {
            self.at += 1;
            return Ok(());
        }
        loop {
            each(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Decline),
            }
        }
    }

    /// Any value, checked and passed over.
    pub fn skip(&mut self) -> Step<()> {
        self.skip_within(0)
    }

    fn skip_within(&mut self, depth: u32) -> Step<()> {
        if depth > MAX_DEPTH {
            return Err(Decline);
        }
        match self.peek()? {
            b'"' => self.string_span().map(drop),
            b'{' => self.object(|c, _| c.skip_within(depth + 1)),
            b'[' => self.array(|c| c.skip_within(depth + 1)),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.null(),
            _ => self.number_text().map(drop),
        }
    }
}

/// A number's text (as [`Cursor::number_text`] took it) as serde_json
/// reads it into an f64.
pub(super) fn number(text: &str) -> Step<f64> {
    serde_json::from_str(text).map_err(|_| Decline)
}

/// Where the plain text of a string that goes on at `i` ends: at the
/// first quote, backslash or control character, found eight bytes at a
/// time (a report's text is mostly strings).
#[inline]
fn plain_text_end(bytes: &[u8], mut i: usize) -> usize {
    // The high bit of each byte of `v` that is zero, the first one exactly.
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    while let Some(v) = word_at(bytes, i) {
        let stops = zero(v ^ spread(b'"'))
            | zero(v ^ spread(b'\\'))
            | (v.wrapping_sub(spread(0x20)) & !v & HIGH);
        if stops != 0 {
            return i + (stops.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// `byte` in each of a word's eight bytes.
const fn spread(byte: u8) -> u64 {
    ONES * byte as u64
}

/// The eight bytes at `i`, when there are eight.
#[inline]
fn word_at(bytes: &[u8], i: usize) -> Option<u64> {
    let chunk = bytes.get(i..i + 8)?;
    let mut word = [0; 8];
    word.copy_from_slice(chunk);
    Some(u64::from_le_bytes(word))
}

/// Where the escape whose letter is at `i` ends; a `\u` escape of a
/// surrogate is left to serde_json, which checks its pair.
fn escape_end(bytes: &[u8], i: usize) -> Step<usize> {
    match bytes.get(i).ok_or(Decline)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(i + 1),
        b'u' => {
            let hex = bytes.get(i + 1..i + 5).ok_or(Decline)?;
            let hex = std::str::from_utf8(hex).map_err(|_| Decline)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Decline);
            }
            let unit = u16::from_str_radix(hex, 16).map_err(|_| Decline)?;
            if (0xd800..0xe000).contains(&unit) {
                return Err(Decline);
            }
            Ok(i + 5)
        }
        _ => Err(Decline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The cursor's reading of a whole text as one value, or `None`.
    fn skips(text: &str) -> bool {
        let mut c = Cursor::new(text);
        c.skip().and_then(|()| c.end()).is_ok()
    }

    #[test]
    fn strings_are_borrowed_unless_escaped_and_odd_text_declines() {
        let mut c = Cursor::new(r#" "gpu0" "a\"b\u00e9" "#);
        assert!(matches!(c.string(), Ok(Cow::Borrowed("gpu0"))));
        assert_eq!(c.string().unwrap(), "a\"b\u{e9}");
        for odd in [
            "\"a\u{1}b\"",
            r#""\ud800\udc00""#,
            r#""\x""#,
            r#""\u12g4""#,
            "\"open",
        ] {
            assert_eq!(Cursor::new(odd).string(), Err(Decline), "{odd}");
        }
    }

    #[test]
    fn numbers_follow_json_and_leave_the_doubtful_to_serde() {
        for (text, value) in [
            ("0", 0.0),
            ("-1.5", -1.5),
            ("2e3", 2000.0),
            ("719.53", 719.53),
        ] {
            assert_eq!(Cursor::new(text).f64(), Ok(value), "{text}");
        }
        for odd in ["01", "1.", ".5", "-", "1e", "+1", "1e400", "NaN"] {
            assert!(!skips(odd), "{odd}");
        }
        assert_eq!(Cursor::new("9223372036854775808").i64(), Err(Decline));
        assert!(Cursor::new("1").is_one().unwrap());
        assert!(!Cursor::new("1.0").is_one().unwrap());
    }

    #[test]
    fn skipping_takes_json_and_stops_at_depth() {
        assert!(skips(
            r#" {"a": [1, -2.5e-3, "x\n", {"b": null}], "c": true, "d": false} "#
        ));
        for odd in ["{\"a\" 1}", "[1,]", "{,}", "[1 2]", "tru", "{\"a\":1}x", ""] {
            assert!(!skips(odd), "{odd}");
        }
        let deep = "[".repeat(70) + &"]".repeat(70);
        assert!(!skips(&deep));
        assert!(skips(&("[".repeat(20) + &"]".repeat(20))));
    }

    proptest! {
        /// Whatever the text, a cursor that takes it as one value takes
        /// JSON serde_json takes too; it never panics.
        #[test]
        fn what_it_takes_serde_json_takes(text in r#"[ \[\]{}",:0-9a-z.eE+\-\\\x00-\x1f\u{e9}]{0,40}"#) {
            if skips(&text) {
                prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{}", text);
            }
        }

        /// Every JSON value serde_json writes, the cursor takes.
        #[test]
        fn it_takes_what_serde_json_writes(v in any::<Vec<(String, Option<i32>, bool)>>(), f in -1e9f64..1e9) {
            let text = serde_json::to_string_pretty(&serde_json::json!({"v": v, "f": f})).unwrap();
            prop_assert!(skips(&text), "{}", text);
        }
    }
}
