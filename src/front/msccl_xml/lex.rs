//! The tokenizer of the runtime-compatible XML subset: NCCL's
//! `xmlGetNode` / `xmlGetToken` / `xmlGetValue`, byte by byte, one tag at a
//! time (element names, attributes in the runtime's 16 slots, quoted values,
//! comments, the text allowed between tags), and C's `strtol` for the
//! numbers in attribute values.

use crate::front::FrontError;
use crate::ir::msccl::{MAX_ATTRS, MAX_NAME_LEN, MAX_VALUE_LEN};
use std::fmt;

// ---------------------------------------------------------------------------
// Tokenizer: NCCL's xmlGetNode, one tag at a time.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `<x …>`
    Open,
    /// `<x …/>`
    Single,
    /// `</x>`
    Close,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Attr<'a> {
    key: &'a [u8],
    /// A bare word (`<x foo>`) has an empty value, as in the runtime.
    value: &'a [u8],
}

pub(super) struct Tag<'a> {
    pub(super) kind: Kind,
    pub(super) name: &'a [u8],
    /// Attributes kept (at most 16); they live in `Lexer::attrs` until the
    /// next tag is read.
    nattrs: usize,
    /// Which tag of the lexer this is (to check `Lexer::attrs` is its own).
    serial: u64,
    /// The tag had attributes beyond the 16 slots (dropped, as the runtime).
    extra: bool,
    /// [`Lexer::plain_step`] read it.
    plain: bool,
    pub(super) line: usize,
    /// Byte offset of the `<`, to re-read the tag for messages.
    start: usize,
}

impl<'a> Tag<'a> {
    pub(super) fn name_str(&self) -> String {
        show(self.name)
    }
}

/// Bytes for a message: lossy UTF-8, cut at 40 characters.
pub(super) fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 40 {
        let cut: String = s.chars().take(40).collect();
        format!("{cut}…")
    } else {
        s.into_owned()
    }
}

fn show_char(c: u8) -> String {
    match c {
        b'\n' => "a newline".into(),
        b'\r' => "a carriage return".into(),
        b'\t' => "a tab".into(),
        c if c.is_ascii_graphic() || c == b' ' => format!("'{}'", c as char),
        c => format!("byte 0x{c:02x}"),
    }
}

fn error(file: &str, line: usize, elem: &str, msg: impl fmt::Display) -> FrontError {
    if elem.is_empty() {
        FrontError::at_line(file, line, msg.to_string())
    } else {
        FrontError::at_line(file, line, format!("<{elem}>: {msg}"))
    }
}

/// Bytes that end a word of a tag: the runtime's delimiters, `=`, and a tab
/// (which rscc rejects inside tags).
const WORD_END: [bool; 256] = {
    let mut t = [false; 256];
    t[b' ' as usize] = true;
    t[b'>' as usize] = true;
    t[b'/' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'=' as usize] = true;
    t[b'\t' as usize] = true;
    t
};

/// The attributes of a `<step>`, in the order rscc and msccl-tools write
/// them.
pub(super) const STEP_KEYS: [&str; 10] = [
    "s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep",
];

/// Bytes a value may hold in [`Lexer::plain_step`]: letters, digits and
/// `-`, none of which ends a value or a word.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = (c as u8).is_ascii_alphanumeric() || c as u8 == b'-';
        c += 1;
    }
    t
};

/// The longest value [`Lexer::plain_step`] reads (far below the runtime's
/// limit, so no value it reads can break it).
const PLAIN_LEN: usize = 24;

/// At `at`: `sep` (`<step key="` or `" key="`), then a value of [`PLAIN`]
/// bytes and its closing quote. Returns the attribute and the value's
/// reading as a short decimal within a C `int`, and moves `at` to the
/// closing quote.
#[inline(always)]
fn plain_attr<'a, const N: usize>(
    s: &'a [u8],
    at: &mut usize,
    sep: &[u8; N],
) -> Option<(Attr<'a>, Option<i64>)> {
    if s.get(*at..*at + N)? != sep {
        return None;
    }
    let key_from = sep.iter().rposition(|&c| c == b' ').unwrap_or(0) + 1;
    let key = &s[*at + key_from..*at + N - 2];
    let from = *at + N;
    let len = s[from..]
        .iter()
        .take(PLAIN_LEN + 1)
        .position(|&c| !PLAIN[c as usize])?;
    if s[from + len] != b'"' {
        return None;
    }
    let value = &s[from..from + len];
    *at = from + len;
    let num = short_decimal(value).filter(|v| i32::try_from(*v).is_ok());
    Some((Attr { key, value }, num))
}

pub(super) struct Lexer<'a> {
    pub(super) s: &'a [u8],
    pub(super) pos: usize,
    pub(super) line: usize,
    pub(super) file: &'a str,
    /// The root element has been closed (for messages only).
    pub(super) after_root: bool,
    /// The attributes of the last tag read.
    pub(super) attrs: [Attr<'a>; MAX_ATTRS],
    /// Tags read so far.
    pub(super) serial: u64,
    /// The short decimals among the values of the last tag, when
    /// [`Lexer::plain_step`] read it.
    decimals: [Option<i64>; STEP_KEYS.len()],
}

impl<'a> Lexer<'a> {
    /// A lexer of `s` (from `file`) at byte `pos`, which is on line `line`.
    pub(super) fn new(s: &'a [u8], file: &'a str, pos: usize, line: usize) -> Lexer<'a> {
        Lexer {
            s,
            pos,
            line,
            file,
            after_root: false,
            attrs: [Attr::default(); MAX_ATTRS],
            serial: 0,
            decimals: [None; STEP_KEYS.len()],
        }
    }

    /// Look up several keys among the attributes of `tag`, the last tag
    /// read, in one pass over its slots (first match wins).
    pub(super) fn get_all<const N: usize>(
        &self,
        tag: &Tag<'a>,
        keys: &[&str; N],
    ) -> [Option<&'a [u8]>; N] {
        debug_assert_eq!(tag.serial, self.serial, "attributes of an older tag");
        let mut out = [None; N];
        // Keys are a few bytes: compared inline, not through memcmp.
        let same =
            |a: &[u8], k: &str| a.len() == k.len() && a.iter().zip(k.bytes()).all(|(x, y)| *x == y);
        for (j, a) in self.attrs[..tag.nattrs].iter().enumerate() {
            // Fast path: attributes in the canonical order of `keys`.
            if j < N && out[j].is_none() && same(a.key, keys[j]) {
                out[j] = Some(a.value);
                continue;
            }
            for (i, k) in keys.iter().enumerate() {
                if out[i].is_none() && same(a.key, k) {
                    out[i] = Some(a.value);
                    break;
                }
            }
        }
        out
    }

    pub(super) fn err(&self, line: usize, elem: &str, msg: impl fmt::Display) -> FrontError {
        error(self.file, line, elem, msg)
    }

    /// The next element tag, skipping whitespace and comments; `None` at
    /// the end of the text.
    pub(super) fn next(&mut self) -> Result<Option<Tag<'a>>, FrontError> {
        loop {
            self.skip_space();
            let Some(&c) = self.s.get(self.pos) else {
                return Ok(None);
            };
            if c != b'<' {
                return Err(self.stray(c));
            }
            if self.s[self.pos..].starts_with(b"<!--") {
                self.comment()?;
                continue;
            }
            if let Some(t) = self.plain_step() {
                return Ok(Some(t));
            }
            return self.tag(None).map(Some);
        }
    }

    /// Skip the spaces and line ends between tags.
    pub(super) fn skip_space(&mut self) {
        while let Some(&c) = self.s.get(self.pos) {
            match c {
                b' ' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                }
                _ => break,
            }
        }
    }

    fn stray(&self, c: u8) -> FrontError {
        if self.pos == 0 && self.s.starts_with(&[0xef, 0xbb, 0xbf]) {
            return self.err(
                self.line,
                "",
                "the file starts with a byte-order mark (BOM); the runtime's reader needs '<' as the very first character",
            );
        }
        if c == b'\t' {
            return self.err(
                self.line,
                "",
                "tab character between elements; only spaces and line ends are allowed (the runtime fails with \"expecting '<', got '\\t'\")",
            );
        }
        let rest = &self.s[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'<')
            .unwrap_or(rest.len());
        let text = show(&rest[..end]);
        if self.after_root {
            self.err(
                self.line,
                "",
                format!("stray text \"{text}\" after </algo>; only elements, comments, spaces and line ends may follow it"),
            )
        } else {
            self.err(
                self.line,
                "",
                format!("text content \"{text}\" outside a tag; the runtime's reader accepts only elements, comments, spaces and line ends between tags"),
            )
        }
    }

    /// Skip `<!-- … -->`. The runtime first reads the comment's first word
    /// as an element name (so a `=` in it is an error), then looks for
    /// `-->` anywhere after `<!--`.
    fn comment(&mut self) -> Result<(), FrontError> {
        let line = self.line;
        let word = self.pos + 1;
        let mut i = word;
        loop {
            let Some(&c) = self.s.get(i) else {
                return Err(self.err(
                    line,
                    "",
                    "unterminated comment (no \"-->\" before the end of the file)",
                ));
            };
            if c == b'=' {
                return Err(self.err(
                    line,
                    "",
                    "'=' in the first word of a comment; the runtime's reader reads that word as an element name and fails (put a space after \"<!--\")",
                ));
            }
            if i - word == MAX_NAME_LEN + 1 {
                return Err(self.err(line, "", "the first word of a comment is longer than the runtime's 253-character name limit"));
            }
            if matches!(c, b' ' | b'>' | b'/' | b'\n' | b'\r') {
                break;
            }
            i += 1;
        }
        let body = self.pos + 4;
        let Some(k) = self.s[body..].windows(3).position(|w| w == b"-->") else {
            return Err(self.err(
                line,
                "",
                "unterminated comment (no \"-->\" before the end of the file)",
            ));
        };
        let end = body + k + 3;
        self.line += self.s[self.pos..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.pos = end;
        Ok(())
    }

    /// A word of a tag, as the runtime's `xmlGetToken` reads it: up to
    /// ` `, `>`, `/`, newline, carriage return or `=`. Returns the word and
    /// the byte that ended it.
    fn word(&mut self, line: usize, elem: &[u8]) -> Result<(&'a [u8], u8), FrontError> {
        let start = self.pos;
        let rest = &self.s[start..];
        let Some(o) = rest.iter().position(|&c| WORD_END[c as usize]) else {
            return Err(self.err(line, &show(elem), "unexpected end of file inside a tag"));
        };
        let c = rest[o];
        // The runtime fails once a word reaches index 254, except that a
        // '=' there still ends it.
        if o > MAX_NAME_LEN + usize::from(c == b'=') {
            return Err(self.err(
                line,
                &show(elem),
                format!(
                    "name \"{}\" is longer than the runtime's limit of {MAX_NAME_LEN} characters",
                    show(&rest[..o])
                ),
            ));
        }
        if c == b'\t' {
            return Err(self.err(
                line,
                &show(elem),
                "tab character inside a tag; separate attributes with single spaces",
            ));
        }
        self.pos = start + o + 1;
        Ok((&rest[..o], c))
    }

    /// The message for a tag that did not end with `>` where it had to.
    fn bad_end(&self, line: usize, elem: &[u8], c: u8) -> FrontError {
        let msg = match c {
            b'\n' | b'\r' => "newline inside a tag; each tag must be on one line (the runtime fails with \"expected >\")".to_string(),
            b'=' => "unexpected '=' (an element name or closing tag cannot carry a value)".to_string(),
            c => format!("expected '>' (or a space before the next attribute, or \"/>\"), found {}", show_char(c)),
        };
        self.err(line, &show(elem), msg)
    }

    /// An element tag starting at `self.pos` (which holds `<`). With `all`,
    /// every attribute key is also collected there, beyond the 16 slots.
    fn tag(&mut self, mut all: Option<&mut Vec<&'a [u8]>>) -> Result<Tag<'a>, FrontError> {
        let line = self.line;
        let start = self.pos;
        self.pos += 1;
        if self.s.get(self.pos) == Some(&b'?') {
            return Err(self.err(
                line,
                "",
                "XML declaration or processing instruction \"<?…?>\"; the runtime's reader fails on it (\"expected >, got '?'\"): remove it",
            ));
        }
        let (name, mut c) = self.word(line, b"")?;
        if c == b'=' {
            return Err(self.bad_end(line, name, c));
        }
        if name.is_empty() && c == b'/' {
            let (name, c) = self.word(line, b"")?;
            if c != b'>' {
                if c == b' ' {
                    return Err(self.err(
                        line,
                        &format!("/{}", show(name)),
                        "closing tag must end with '>' right after its name",
                    ));
                }
                return Err(self.bad_end(line, &[b"/", name].concat(), c));
            }
            return Ok(Tag {
                kind: Kind::Close,
                name,
                nattrs: 0,
                serial: 0,
                extra: false,
                plain: false,
                line,
                start,
            });
        }
        let mut tag = Tag {
            kind: Kind::Open,
            name,
            nattrs: 0,
            serial: 0,
            extra: false,
            plain: false,
            line,
            start,
        };
        while c == b' ' {
            let (key, d) = self.word(line, name)?;
            let mut value: &'a [u8] = &[];
            c = d;
            if d == b'=' {
                let (v, d) = self.value(line, name, key)?;
                value = v;
                c = d;
            }
            if let Some(all) = all.as_deref_mut() {
                all.push(key);
            }
            if tag.nattrs < MAX_ATTRS {
                self.attrs[tag.nattrs] = Attr { key, value };
                tag.nattrs += 1;
            } else {
                tag.extra = true;
            }
        }
        if c == b'/' {
            tag.kind = Kind::Single;
            let (_, d) = self.word(line, name)?;
            c = d;
        }
        if c != b'>' {
            return Err(self.bad_end(line, name, c));
        }
        self.serial += 1;
        tag.serial = self.serial;
        Ok(tag)
    }

    /// A `<step>` tag at `self.pos` written as rscc and msccl-tools write
    /// it: the [`STEP_KEYS`] in order, each `key="value"` after one space,
    /// values of [`PLAIN`] bytes up to [`PLAIN_LEN`] long, closed by
    /// `"/>`. Steps are nearly all of a file's bytes, and this reads one
    /// with a few fixed comparisons where [`Lexer::tag`] takes each byte
    /// through the runtime's word and value rules. It reads what `tag`
    /// would (the same tag, attributes and end position; a test holds
    /// them side by side), and also the values that are short decimals
    /// within a C `int` ([`Lexer::decimal`]); for any other text it
    /// returns None having consumed nothing, and `tag` reads it, errors
    /// included.
    fn plain_step(&mut self) -> Option<Tag<'a>> {
        let (s, start) = (self.s, self.pos);
        let mut at = start;
        // Each separator a constant, so that its comparison is a few loads.
        let read = [
            plain_attr(s, &mut at, b"<step s=\"")?,
            plain_attr(s, &mut at, b"\" type=\"")?,
            plain_attr(s, &mut at, b"\" srcbuf=\"")?,
            plain_attr(s, &mut at, b"\" srcoff=\"")?,
            plain_attr(s, &mut at, b"\" dstbuf=\"")?,
            plain_attr(s, &mut at, b"\" dstoff=\"")?,
            plain_attr(s, &mut at, b"\" cnt=\"")?,
            plain_attr(s, &mut at, b"\" depid=\"")?,
            plain_attr(s, &mut at, b"\" deps=\"")?,
            plain_attr(s, &mut at, b"\" hasdep=\"")?,
        ];
        if s.get(at..at + 3)? != b"\"/>" {
            return None;
        }
        for (i, (attr, num)) in read.into_iter().enumerate() {
            debug_assert_eq!(attr.key, STEP_KEYS[i].as_bytes());
            self.attrs[i] = attr;
            self.decimals[i] = num;
        }
        self.pos = at + 3;
        self.serial += 1;
        Some(Tag {
            kind: Kind::Single,
            name: &s[start + 1..start + 5],
            nattrs: STEP_KEYS.len(),
            serial: self.serial,
            extra: false,
            plain: true,
            line: self.line,
            start,
        })
    }

    /// The [`STEP_KEYS`] values of `tag`, a `<step>` and the last tag read
    /// ([`Lexer::get_all`]'s answer, without the search when
    /// [`Lexer::plain_step`] read it).
    pub(super) fn step_values(&self, tag: &Tag<'a>) -> [Option<&'a [u8]>; STEP_KEYS.len()] {
        if tag.plain {
            debug_assert_eq!(tag.serial, self.serial, "attributes of an older tag");
            std::array::from_fn(|i| Some(self.attrs[i].value))
        } else {
            self.get_all(tag, &STEP_KEYS)
        }
    }

    /// Value `i` of [`STEP_KEYS`] of `tag`, the last tag read, when
    /// [`Lexer::plain_step`] read it and it is a short decimal within a C
    /// `int`: what [`strtol`] reads from it.
    pub(super) fn decimal(&self, tag: &Tag<'a>, i: usize) -> Option<i64> {
        if tag.plain {
            debug_assert_eq!(tag.serial, self.serial, "attributes of an older tag");
            self.decimals[i]
        } else {
            None
        }
    }

    /// A `"`-quoted value after `=`; returns it and the byte after the
    /// closing quote.
    fn value(
        &mut self,
        line: usize,
        elem: &[u8],
        key: &[u8],
    ) -> Result<(&'a [u8], u8), FrontError> {
        // This runs for every value: messages are built only on error.
        let fail = |msg: String| self.err(line, &show(elem), msg);
        let k = show;
        let Some(&q) = self.s.get(self.pos) else {
            return Err(fail("unexpected end of file inside a tag".into()));
        };
        if q == b'\'' {
            return Err(fail(format!(
                "attribute {} has a single-quoted value; the runtime reads a value opened with ' up to the next \", so use double quotes",
                k(key)
            )));
        }
        if q != b'"' {
            return Err(fail(format!(
                "attribute {} has an unquoted value; values must be in double quotes",
                k(key)
            )));
        }
        let start = self.pos + 1;
        let Some(len) = self.s[start..]
            .iter()
            .position(|&b| b == b'"' || b == b'\n' || b == b'\r')
        else {
            return Err(fail(format!("unterminated value of attribute {}", k(key))));
        };
        if self.s[start + len] != b'"' {
            return Err(fail(format!(
                "newline inside the value of attribute {}; each tag must be on one line",
                k(key)
            )));
        }
        if len > MAX_VALUE_LEN {
            return Err(fail(format!(
                "value of attribute {} is {len} characters long; the runtime's buffer holds at most {MAX_VALUE_LEN} (longer values overflow it)",
                k(key)
            )));
        }
        let Some(&d) = self.s.get(start + len + 1) else {
            return Err(fail("unexpected end of file inside a tag".into()));
        };
        self.pos = start + len + 2;
        Ok((&self.s[start..start + len], d))
    }

    /// The next child of `parent`, or `None` once its closing tag is read.
    pub(super) fn child(&mut self, parent: &Tag<'a>) -> Result<Option<Tag<'a>>, FrontError> {
        if parent.kind == Kind::Single {
            return Ok(None);
        }
        match self.next()? {
            None => Err(self.err(
                parent.line,
                &parent.name_str(),
                "unterminated element: the file ends before its closing tag",
            )),
            Some(t) if t.kind == Kind::Close => {
                if t.name == parent.name {
                    Ok(None)
                } else {
                    Err(self.err(
                        t.line,
                        &format!("/{}", t.name_str()),
                        format!(
                            "closing tag does not match <{}> opened on line {}",
                            parent.name_str(),
                            parent.line
                        ),
                    ))
                }
            }
            Some(t) => Ok(Some(t)),
        }
    }

    /// Skip an element and everything inside it (the runtime's handling of
    /// unknown elements), still checking the lexical rules.
    pub(super) fn skip(&mut self, tag: &Tag<'a>) -> Result<(), FrontError> {
        if tag.kind == Kind::Single {
            return Ok(());
        }
        let mut stack: Vec<(&'a [u8], usize)> = vec![(tag.name, tag.line)];
        while let Some(&(name, line)) = stack.last() {
            match self.next()? {
                None => {
                    return Err(self.err(
                        line,
                        &show(name),
                        "unterminated element: the file ends before its closing tag",
                    ))
                }
                Some(t) => match t.kind {
                    Kind::Close if t.name == name => {
                        stack.pop();
                    }
                    Kind::Close => {
                        return Err(self.err(
                            t.line,
                            &format!("/{}", t.name_str()),
                            format!(
                                "closing tag does not match <{}> opened on line {line}",
                                show(name)
                            ),
                        ))
                    }
                    Kind::Open => stack.push((t.name, t.line)),
                    Kind::Single => {}
                },
            }
        }
        Ok(())
    }

    /// Where `key` sits among all attributes of `tag` (1-based), when it is
    /// beyond the 16 kept slots.
    pub(super) fn slot_beyond(&self, tag: &Tag<'a>, key: &str) -> Option<usize> {
        if !tag.extra {
            return None;
        }
        let mut again = Lexer::new(self.s, self.file, tag.start, tag.line);
        let mut all = Vec::new();
        again.tag(Some(&mut all)).ok()?;
        all.iter()
            .position(|k| *k == key.as_bytes())
            .filter(|&i| i >= MAX_ATTRS)
            .map(|i| i + 1)
    }
}

// ---------------------------------------------------------------------------
// Numbers: C's strtol(s, NULL, 0).

/// `strtol(s, NULL, 0)` / `strtoll`: leading white space, a sign, `0x` hex,
/// leading-`0` octal or decimal, up to the first byte that is not a digit;
/// no digits gives 0; overflow saturates. The second value is `false` on
/// overflow.
pub fn strtol(s: &[u8]) -> (i64, bool) {
    match short_decimal(s) {
        Some(v) => (v, true),
        None => strtol_c(s),
    }
}

/// Nearly every value is a short decimal, maybe negative: read directly
/// (a leading 0 means octal, so only "0" itself is one). None for any
/// other text.
fn short_decimal(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if !(1..=18).contains(&digits.len())
        || (digits[0] == b'0' && digits.len() > 1)
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |v, &d| v * 10 + i64::from(d - b'0'));
    Some(if digits.len() < s.len() { -v } else { v })
}

/// [`strtol`] in full, as C reads it.
fn strtol_c(s: &[u8]) -> (i64, bool) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let mut base = 10u32;
    if i + 1 < s.len()
        && s[i] == b'0'
        && (s[i + 1] | 0x20) == b'x'
        && s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
    {
        base = 16;
        i += 2;
    } else if i < s.len() && s[i] == b'0' {
        base = 8;
    }
    let mut v: i128 = 0;
    let mut ok = true;
    while i < s.len() {
        let Some(d) = (s[i] as char).to_digit(base) else {
            break;
        };
        if ok {
            v = v * base as i128 + d as i128;
            if v > i64::MAX as i128 + 1 {
                ok = false;
            }
        }
        i += 1;
    }
    let v = if neg { -v } else { v };
    if !ok || v > i64::MAX as i128 || v < i64::MIN as i128 {
        (if neg { i64::MIN } else { i64::MAX }, false)
    } else {
        (v as i64, true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn short_decimals_read_as_c_reads_them() {
        // Every string of up to four characters from these, and long ones.
        let alphabet = b"-+0189 xa";
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> = cases
                .iter()
                .flat_map(|c| alphabet.iter().map(move |&b| [&c[..], &[b]].concat()))
                .collect();
            cases.extend(longer);
        }
        cases.sort();
        cases.dedup();
        for long in [
            "123456789012345678",
            "1234567890123456789",
            "-999999999999999999",
        ] {
            cases.push(long.as_bytes().to_vec());
        }
        for c in &cases {
            assert_eq!(strtol(c), strtol_c(c), "{:?}", String::from_utf8_lossy(c));
        }
        assert!(short_decimal(b"-17").is_some() && short_decimal(b"017").is_none());
    }

    #[test]
    fn strtol_matches_c() {
        assert_eq!(strtol(b"12"), (12, true));
        assert_eq!(strtol(b"-1"), (-1, true));
        assert_eq!(strtol(b"0x10"), (16, true));
        assert_eq!(strtol(b"0X1f"), (31, true));
        assert_eq!(strtol(b"010"), (8, true));
        assert_eq!(strtol(b"08"), (0, true));
        assert_eq!(strtol(b"3abc"), (3, true));
        assert_eq!(strtol(b""), (0, true));
        assert_eq!(strtol(b"abc"), (0, true));
        assert_eq!(strtol(b"0x"), (0, true));
        assert_eq!(strtol(b"0xg"), (0, true));
        assert_eq!(strtol(b" +7"), (7, true));
        assert_eq!(strtol(b"\t5"), (5, true));
        assert_eq!(strtol(b"99999999999999999999"), (i64::MAX, false));
        assert_eq!(strtol(b"-99999999999999999999"), (i64::MIN, false));
        assert_eq!(strtol(b"-9223372036854775808"), (i64::MIN, true));
    }

    #[test]
    fn attribute_slots_beyond_16_are_not_found() {
        // 7 extra empty slots (extra spaces) push hasdep to slot 17.
        let attrs = OK_STEP.replace(" cnt=", "        cnt=");
        let e = err(&gpu0(&step(&attrs)));
        assert!(
            e.contains("line 4") && e.contains("hasdep is attribute number 17"),
            "{e}"
        );
        // Two spaces once are fine.
        let attrs = OK_STEP.replace(" cnt=", "  cnt=");
        parse(&gpu0(&step(&attrs)), "t.xml").unwrap();
    }

    #[test]
    fn lexical_edge_cases() {
        assert!(err("").contains("no <algo>"));
        assert!(err("<!-- only -->").contains("no <algo>"));
        assert!(err("<gpu/>").contains("first element must be <algo>"));
        assert!(err(&gpu0(&step(OK_STEP)).replace("</algo>", "</algx>")).contains("does not match"));
        assert!(err(&gpu0(&step(OK_STEP)).replace("</algo>\n", "")).contains("unterminated"));
        assert!(err("<!--x=1 -->").contains("'='"));
        assert!(err("<!-- never closed").contains("unterminated comment"));
        let long = "v".repeat(255);
        let t = gpu0(&step(OK_STEP)).replace("name=\"t\"", &format!("name=\"{long}\""));
        assert!(err(&t).contains("255 characters"));
        let ok = "v".repeat(254);
        parse(
            &gpu0(&step(OK_STEP)).replace("name=\"t\"", &format!("name=\"{ok}\"")),
            "t.xml",
        )
        .unwrap();
        // Names: 253 characters are fine, 254 are not (a bare word here).
        let name =
            |n: usize| gpu0(&step(OK_STEP)).replace("<tb ", &format!("<tb {} ", "k".repeat(n)));
        parse(&name(253), "t.xml").unwrap();
        assert!(err(&name(254)).contains("longer than the runtime's limit of 253"));
        // A bare attribute word is read with an empty value, as the runtime.
        parse(&gpu0(&step(OK_STEP)).replace("<tb ", "<tb extra "), "t.xml").unwrap();
        // Closing tag with a space.
        assert!(err(&gpu0(&step(OK_STEP)).replace("</tb>", "</tb >")).contains("closing tag"));
        // Out of the runtime's int.
        assert!(err(&gpu0(&step(
            &OK_STEP.replace("cnt=\"1\"", "cnt=\"4294967297\"")
        )))
        .contains("32-bit int"));
    }

    fn lexer(s: &[u8]) -> Lexer<'_> {
        Lexer::new(s, "t.xml", 0, 1)
    }

    /// `plain_step` on `text` either reads nothing or reads what `tag`
    /// reads: the same tag, attributes, end position and serial.
    fn plain_step_reads_as_tag(text: &[u8]) -> bool {
        let (mut fast, mut full) = (lexer(text), lexer(text));
        let Some(a) = fast.plain_step() else {
            assert_eq!((fast.pos, fast.serial), (0, 0), "consumed on None");
            return false;
        };
        let b = full
            .tag(None)
            .expect("plain_step read a tag that tag rejects");
        assert_eq!(
            (a.kind, a.name, a.nattrs, a.serial, a.extra, a.line, a.start),
            (b.kind, b.name, b.nattrs, b.serial, b.extra, b.line, b.start),
        );
        for (x, y) in fast.attrs[..a.nattrs].iter().zip(&full.attrs[..b.nattrs]) {
            assert_eq!((x.key, x.value), (y.key, y.value));
        }
        for (i, v) in fast.step_values(&a).iter().enumerate() {
            assert_eq!(*v, full.get_all(&b, &STEP_KEYS)[i]);
            // A decimal read on the way is what the general reading gives.
            if let Some(n) = fast.decimal(&a, i) {
                assert_eq!(strtol(v.unwrap()), (n, true));
                assert!(i32::try_from(n).is_ok());
            }
        }
        assert_eq!((fast.pos, fast.serial), (full.pos, full.serial));
        true
    }

    #[test]
    fn plain_steps_read_as_the_runtime_reads_them() {
        let ok = format!("<step {OK_STEP}/>\n");
        assert!(plain_step_reads_as_tag(ok.as_bytes()));
        for (v, n) in [
            ("-1", Some(-1)),
            ("2147483647", Some(i32::MAX as i64)),
            ("2147483648", None),
            ("0x1f", None),
            ("017", None),
            ("", None),
            ("rrcs", None),
            (&"9".repeat(PLAIN_LEN), None),
        ] {
            let t = ok.replace("cnt=\"1\"", &format!("cnt=\"{v}\""));
            assert!(plain_step_reads_as_tag(t.as_bytes()), "{t}");
            let mut lx = lexer(t.as_bytes());
            let tag = lx.plain_step().unwrap();
            assert_eq!(lx.decimal(&tag, 6), n, "{t}");
            assert_eq!((lx.decimal(&tag, 0), lx.decimal(&tag, 1)), (Some(0), None));
        }
        // Everything else is left to `tag`, which reads it or says why not.
        for (from, to) in [
            (
                "cnt=\"1\"",
                format!("cnt=\"{}\"", "9".repeat(PLAIN_LEN + 1)),
            ),
            ("cnt=\"1\"", "cnt=\"1 \"".into()),
            ("cnt=\"1\"", "cnt='1'".into()),
            ("cnt=\"1\"", "cnt=1".into()),
            ("cnt=\"1\"", "cnt=\"+1\"".into()),
            ("cnt=\"1\"", "cnt=\"1\n\"".into()),
            (" cnt=", "  cnt=".into()),
            (" cnt=", "\tcnt=".into()),
            (" cnt=", " cnt =".into()),
            (" cnt=\"1\"", String::new()),
            (" hasdep=\"0\"", " hasdep=\"0\" x=\"1\"".into()),
            ("s=\"0\" type=\"s\"", "type=\"s\" s=\"0\"".into()),
            ("/>", ">".into()),
            ("/>", " />".into()),
            ("/>", "/x>".into()),
            ("<step ", "<steps ".into()),
        ] {
            let t = ok.replacen(from, &to, 1);
            assert_ne!(t, ok);
            assert!(!plain_step_reads_as_tag(t.as_bytes()), "{t}");
        }
        // Cut anywhere.
        for n in 0..ok.len() {
            plain_step_reads_as_tag(&ok.as_bytes()[..n]);
        }
    }

    proptest::proptest! {
        /// Any bytes changed anywhere in a step: `plain_step` reads what
        /// `tag` reads, or nothing.
        #[test]
        fn plain_step_never_reads_otherwise(
            edits in proptest::collection::vec((0usize..140, 0usize..16), 1..4)
        ) {
            let mut t = format!("<step {OK_STEP}/>\n<step {OK_STEP}/>").into_bytes();
            let alphabet = b" \"=/>\n\r\t'a0-x9<s!";
            for (at, b) in edits {
                let at = at % t.len();
                t[at] = alphabet[b];
            }
            plain_step_reads_as_tag(&t);
        }
    }

    #[test]
    fn comments() {
        let t = gpu0(&step(OK_STEP));
        parse(
            &format!("<!---->\n<!-- a -- b -->\n{t}<!--\n\n-->\n"),
            "t.xml",
        )
        .unwrap();
        assert!(err(&format!("<!-->\n{t}")).contains("unterminated comment"));
        let p = parse(&format!("<!--\n\n-->{t}"), "t.xml").unwrap();
        assert_eq!(p.gpus[0].line, 4);
    }
}
