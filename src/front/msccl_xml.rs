//! MSCCL XML reader (docs/msccl-xml.md; the spec is
//! shared/reference/msccl-xml.md §2, §3, §8.1, §9).
//!
//! Both MSCCL runtimes read algorithm files with NCCL's hand-written reader,
//! which is not an XML parser: it accepts some things XML forbids (bare
//! attribute words, several spaces between attributes, `strtol` numbers
//! with trailing junk) and rejects much that XML allows (declarations, tabs,
//! single quotes, newlines inside tags). A general XML crate such as
//! quick-xml normalises exactly the details that decide whether a runtime
//! loads a file (which whitespace separated what, how many attribute slots
//! a tag used, where a value really ended), so this module has its own
//! byte-level tokenizer that follows the runtime's `xmlGetNode` /
//! `xmlGetToken` / `xmlGetValue` character by character, and then applies
//! every check of the runtime's parser (`mscclGetAlgoFromXmlFile` for the
//! executor, `mscclGetAlgoFromXMLAndSetAlgo` for legacy). A file is
//! accepted iff the runtime's parser accepts it, apart from the deliberate
//! strictness listed in docs/msccl-xml.md (values outside the runtime's
//! 32-bit `int`, tabs or newlines inside tags and values, `hasdep` not 0/1
//! on a `nop`, content of `<gpu>` elements no rank parses).
//!
//! Semantic rules the runtime does not check (pairing, dependency targets,
//! `off + cnt` ranges, the post-condition) are the verifier's job.

use super::{read_text, FrontError};
use crate::ir::{
    Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::ir::msccl::{
    MAX_ATTRS, MAX_NAME_LEN, MAX_PARSE_NODES as MAX_NODES, MAX_SUBS, MAX_TBS_PER_CHANNEL,
    MAX_VALUE_LEN,
};

/// `cnt` must be below this (`MSCCL_MAX_COUNT`).
const MAX_COUNT: i64 = crate::ir::msccl::MAX_COUNT as i64;
/// Largest `chan` the parsers accept (`MAXCHANNELS`; 32 itself is out of
/// bounds at run time, which the verifier reports).
const MAX_CHAN: i64 = crate::ir::msccl::MAX_CHANNELS as i64;

/// Read an MSCCL XML file.
pub fn load(path: &Path) -> Result<Program, FrontError> {
    let text = read_text(path)?;
    parse(&text, &path.display().to_string())
}

/// Parse MSCCL XML text; `file` names the source in error messages.
pub fn parse(text: &str, file: &str) -> Result<Program, FrontError> {
    Parser {
        steps: Vec::new(),
        lx: Lexer {
            s: text.as_bytes(),
            pos: 0,
            line: 1,
            file,
            after_root: false,
            attrs: [Attr::default(); MAX_ATTRS],
            serial: 0,
        },
    }
    .document()
}

// ---------------------------------------------------------------------------
// Tokenizer: NCCL's xmlGetNode, one tag at a time.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `<x …>`
    Open,
    /// `<x …/>`
    Single,
    /// `</x>`
    Close,
}

#[derive(Debug, Clone, Copy, Default)]
struct Attr<'a> {
    key: &'a [u8],
    /// A bare word (`<x foo>`) has an empty value, as in the runtime.
    value: &'a [u8],
}

struct Tag<'a> {
    kind: Kind,
    name: &'a [u8],
    /// Attributes kept (at most 16); they live in `Lexer::attrs` until the
    /// next tag is read.
    nattrs: usize,
    /// Which tag of the lexer this is (to check `Lexer::attrs` is its own).
    serial: u64,
    /// The tag had attributes beyond the 16 slots (dropped, as the runtime).
    extra: bool,
    line: usize,
    /// Byte offset of the `<`, to re-read the tag for messages.
    start: usize,
}

impl<'a> Tag<'a> {
    fn name_str(&self) -> String {
        show(self.name)
    }
}

/// Bytes for a message: lossy UTF-8, cut at 40 characters.
fn show(b: &[u8]) -> String {
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
        FrontError::new(file, format!("line {line}: {msg}"))
    } else {
        FrontError::new(file, format!("line {line}: <{elem}>: {msg}"))
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

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
    line: usize,
    file: &'a str,
    /// The root element has been closed (for messages only).
    after_root: bool,
    /// The attributes of the last tag read.
    attrs: [Attr<'a>; MAX_ATTRS],
    /// Tags read so far.
    serial: u64,
}

impl<'a> Lexer<'a> {
    /// Look up several keys among the attributes of `tag`, the last tag
    /// read, in one pass over its slots (first match wins).
    fn get_all<const N: usize>(&self, tag: &Tag<'a>, keys: &[&str; N]) -> [Option<&'a [u8]>; N] {
        debug_assert_eq!(tag.serial, self.serial, "attributes of an older tag");
        let mut out = [None; N];
        for (j, a) in self.attrs[..tag.nattrs].iter().enumerate() {
            // Fast path: attributes in the canonical order of `keys`.
            if j < N && out[j].is_none() && a.key == keys[j].as_bytes() {
                out[j] = Some(a.value);
                continue;
            }
            for (i, k) in keys.iter().enumerate() {
                if out[i].is_none() && a.key == k.as_bytes() {
                    out[i] = Some(a.value);
                    break;
                }
            }
        }
        out
    }

    fn err(&self, line: usize, elem: &str, msg: impl fmt::Display) -> FrontError {
        error(self.file, line, elem, msg)
    }

    /// The next element tag, skipping whitespace and comments; `None` at
    /// the end of the text.
    fn next(&mut self) -> Result<Option<Tag<'a>>, FrontError> {
        loop {
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
            return self.tag(None).map(Some);
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
    fn child(&mut self, parent: &Tag<'a>) -> Result<Option<Tag<'a>>, FrontError> {
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
    fn skip(&mut self, tag: &Tag<'a>) -> Result<(), FrontError> {
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
    fn slot_beyond(&self, tag: &Tag<'a>, key: &str) -> Option<usize> {
        if !tag.extra {
            return None;
        }
        let mut again = Lexer {
            s: self.s,
            pos: tag.start,
            line: tag.line,
            file: self.file,
            after_root: false,
            attrs: [Attr::default(); MAX_ATTRS],
            serial: 0,
        };
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

// ---------------------------------------------------------------------------
// The runtime's parser.

struct Parser<'a> {
    lx: Lexer<'a>,
    /// Steps of the threadblock being read; moved out in one exact-size
    /// allocation per threadblock (growing each TB's Vec would copy every
    /// step about twice).
    steps: Vec<Step>,
}

/// The `<algo>` header, as far as the `<gpu>` checks need it.
struct Header {
    runtime: Runtime,
    coll: Collective,
    coll_str: &'static str,
    ngpus: i64,
    nchunksperloop: i64,
}

const EXECUTOR_COLLS: [(&str, Collective); 3] = [
    ("reducescatter", Collective::ReduceScatter),
    ("allreduce", Collective::AllReduce),
    ("allgather", Collective::AllGather),
];
const OTHER_COLLS: [&str; 9] = [
    "reduce",
    "broadcast",
    "alltoall",
    "send",
    "recv",
    "gather",
    "scatter",
    "alltoallv",
    "custom",
];

impl<'a> Parser<'a> {
    fn err(&self, line: usize, elem: &str, msg: impl fmt::Display) -> FrontError {
        self.lx.err(line, elem, msg)
    }

    fn missing(&self, tag: &Tag<'a>, key: &str, why: &str) -> FrontError {
        let e = tag.name_str();
        match self.lx.slot_beyond(tag, key) {
            Some(n) => self.err(
                tag.line,
                &e,
                format!(
                    "required attribute {key} is attribute number {n}; the runtime keeps only the first {MAX_ATTRS} (every extra space uses one too), so it reports {key} as not found"
                ),
            ),
            None => self.err(tag.line, &e, format!("missing required attribute {key}{why}")),
        }
    }

    fn required(
        &self,
        tag: &Tag<'a>,
        key: &str,
        v: Option<&'a [u8]>,
        why: &str,
    ) -> Result<&'a [u8], FrontError> {
        v.ok_or_else(|| self.missing(tag, key, why))
    }

    /// A C `int` attribute (`strtol` then truncated to 32 bits by the
    /// runtime; rscc rejects values that would be truncated).
    fn int(&self, tag: &Tag<'a>, key: &str, v: &[u8]) -> Result<i64, FrontError> {
        let (n, _) = strtol(v);
        if n < i32::MIN as i64 || n > i32::MAX as i64 {
            return Err(self.err(
                tag.line,
                &tag.name_str(),
                format!(
                    "{key}=\"{}\" does not fit the runtime's 32-bit int",
                    show(v)
                ),
            ));
        }
        Ok(n)
    }

    fn req_int(
        &self,
        tag: &Tag<'a>,
        key: &str,
        v: Option<&'a [u8]>,
        why: &str,
    ) -> Result<i64, FrontError> {
        let v = self.required(tag, key, v, why)?;
        self.int(tag, key, v)
    }

    fn document(mut self) -> Result<Program, FrontError> {
        let Some(root) = self.lx.next()? else {
            return Err(self.err(
                self.lx.line,
                "",
                "no <algo> element: the file is empty or holds only comments",
            ));
        };
        if root.kind == Kind::Close || root.name != b"algo" {
            let shown = if root.kind == Kind::Close {
                format!("/{}", root.name_str())
            } else {
                root.name_str()
            };
            return Err(self.err(
                root.line,
                &shown,
                "the first element must be <algo> (the executor reads the first element's attributes as the algorithm's, whatever its name)",
            ));
        }
        let (mut program, hdr) = self.algo(&root)?;
        let mut counted_gpus = 0usize;
        while let Some(t) = self.lx.child(&root)? {
            if t.name == b"gpu" {
                counted_gpus += 1;
                if counted_gpus > MAX_SUBS {
                    return Err(self.err(
                        t.line,
                        "gpu",
                        format!("more than {MAX_SUBS} <gpu> elements; the runtime's child table holds {MAX_SUBS}"),
                    ));
                }
                let g = self.gpu(&t, &hdr)?;
                program.gpus.push(g);
            } else {
                self.lx.skip(&t)?;
            }
        }
        self.lx.after_root = true;
        while let Some(t) = self.lx.next()? {
            if t.kind == Kind::Close {
                return Err(self.err(
                    t.line,
                    &format!("/{}", t.name_str()),
                    "closing tag with no open element (after </algo>)",
                ));
            }
            // Only the first <algo> counts; later elements are read and
            // skipped, as the runtime does.
            self.lx.skip(&t)?;
        }
        self.node_limit(&program, counted_gpus)?;
        Ok(program)
    }

    /// The runtime keeps, per rank, 1 (algo) + every <gpu> + that rank's
    /// <tb>s and <step>s in a 4096-entry table and fails when it is full
    /// and another node is read, which always happens.
    fn node_limit(&self, p: &Program, ngpu_elems: usize) -> Result<(), FrontError> {
        let mut per_rank: HashMap<i64, usize> = HashMap::new();
        for g in &p.gpus {
            let steps: usize = g.tbs.iter().map(|t| t.steps.len()).sum();
            *per_rank.entry(g.id).or_insert(0) += g.tbs.len() + steps;
        }
        for g in &p.gpus {
            let own = per_rank.get(&g.id).copied().unwrap_or(0);
            let n = 1 + ngpu_elems + own;
            if n >= MAX_NODES {
                return Err(self.err(
                    g.line,
                    "gpu",
                    format!(
                        "rank {} needs {n} parse nodes (1 algo + {ngpu_elems} gpu + {own} tb and step); the runtime's table holds {MAX_NODES} and fails once it is full, so at most {}",
                        g.id,
                        MAX_NODES - 1
                    ),
                ));
            }
        }
        Ok(())
    }

    fn algo(&self, t: &Tag<'a>) -> Result<(Program, Header), FrontError> {
        let [name, proto, nchannels, nchunksperloop, ngpus, coll, inplace, outofplace, min_bytes, max_bytes, nthreads] =
            self.lx.get_all(
                t,
                &[
                    "name",
                    "proto",
                    "nchannels",
                    "nchunksperloop",
                    "ngpus",
                    "coll",
                    "inplace",
                    "outofplace",
                    "minBytes",
                    "maxBytes",
                    "nthreads",
                ],
            );
        let coll_v = self.required(t, "coll", coll, "")?;
        let (coll, runtime, coll_str) = if coll_v == b"reduce_scatter" {
            (Collective::ReduceScatter, Runtime::Legacy, "reduce_scatter")
        } else if let Some(&(s, c)) = EXECUTOR_COLLS.iter().find(|(s, _)| s.as_bytes() == coll_v) {
            (c, Runtime::Executor, s)
        } else if OTHER_COLLS.iter().any(|s| s.as_bytes() == coll_v) {
            return Err(self.err(
                t.line,
                "algo",
                format!(
                    "coll=\"{}\" is an MSCCL collective rscc does not handle; rscc reads reducescatter (executor), reduce_scatter (legacy), allgather and allreduce",
                    show(coll_v)
                ),
            ));
        } else {
            return Err(self.err(
                t.line,
                "algo",
                format!(
                    "unknown coll=\"{}\"; expected reducescatter (executor), reduce_scatter (legacy), allgather or allreduce (exact case)",
                    show(coll_v)
                ),
            ));
        };
        let why = match runtime {
            Runtime::Executor => {
                format!(" (the executor runtime requires it; coll=\"{coll_str}\")")
            }
            Runtime::Legacy => {
                " (the legacy runtime requires it; coll=\"reduce_scatter\")".to_string()
            }
        };
        let why = why.as_str();
        let legacy = runtime == Runtime::Legacy;
        let name = if legacy {
            Some(self.required(t, "name", name, why)?)
        } else {
            name
        };
        let ngpus = self.req_int(t, "ngpus", ngpus, why)?;
        let nchunksperloop = self.req_int(t, "nchunksperloop", nchunksperloop, why)?;
        let nchannels = self.req_int(t, "nchannels", nchannels, why)?;
        let proto_v = self.required(t, "proto", proto, why)?;
        let proto = std::str::from_utf8(proto_v)
            .ok()
            .and_then(Proto::parse)
            .ok_or_else(|| {
                self.err(
                    t.line,
                    "algo",
                    format!(
                        "unknown proto=\"{}\"; expected Simple, LL or LL128 (exact case)",
                        show(proto_v)
                    ),
                )
            })?;
        let inplace = self.req_int(t, "inplace", inplace, why)? != 0;
        let (min_bytes, max_bytes, outofplace) = if legacy {
            let min = match min_bytes {
                Some(v) => strtol(v).0,
                None => 0,
            };
            let max = max_bytes.map(|v| strtol(v).0);
            let eff_max = max.unwrap_or(1 << 27);
            if min > eff_max {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("minBytes={min} is greater than maxBytes={eff_max}; the legacy runtime rejects it"),
                ));
            }
            if min < 0 {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("minBytes={min} is negative; the legacy runtime rejects it"),
                ));
            }
            if eff_max < 0 {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("maxBytes={eff_max} is negative; the legacy runtime rejects it"),
                ));
            }
            if let Some(v) = nthreads {
                let n = self.int(t, "nthreads", v)?;
                if n % 32 != 0 {
                    return Err(self.err(
                        t.line,
                        "algo",
                        format!(
                            "nthreads={n} is not a multiple of 32; the legacy runtime rejects it"
                        ),
                    ));
                }
            }
            // Legacy never reads outofplace: a file is used for calls whose
            // in-place-ness equals `inplace`.
            (min, max, !inplace)
        } else {
            let min = strtol(self.required(t, "minBytes", min_bytes, why)?).0;
            let max = strtol(self.required(t, "maxBytes", max_bytes, why)?).0;
            let oop = self.req_int(t, "outofplace", outofplace, why)? != 0;
            (min, Some(max), oop)
        };
        let name = name
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        let program = Program {
            name,
            proto,
            coll,
            runtime,
            nchannels,
            nchunksperloop,
            ngpus,
            inplace,
            outofplace,
            min_bytes,
            max_bytes,
            gpus: Vec::new(),
        };
        let hdr = Header {
            runtime,
            coll,
            coll_str,
            ngpus,
            nchunksperloop,
        };
        Ok((program, hdr))
    }

    fn gpu(&mut self, t: &Tag<'a>, hdr: &Header) -> Result<GpuProgram, FrontError> {
        let [id, ic, oc, sc] = self
            .lx
            .get_all(t, &["id", "i_chunks", "o_chunks", "s_chunks"]);
        let id = self.req_int(t, "id", id, "")?;
        let i_chunks = self.req_int(t, "i_chunks", ic, "")?;
        let o_chunks = self.req_int(t, "o_chunks", oc, "")?;
        let s_chunks = self.req_int(t, "s_chunks", sc, "")?;
        if s_chunks < 0 {
            return Err(self.err(
                t.line,
                "gpu",
                format!("s_chunks={s_chunks} must not be negative"),
            ));
        }
        if hdr.runtime == Runtime::Legacy {
            let in_mult = if hdr.coll == Collective::AllGather {
                hdr.ngpus
            } else {
                1
            };
            let out_mult = if hdr.coll == Collective::ReduceScatter {
                hdr.ngpus
            } else {
                1
            };
            if (i_chunks > 0 && i_chunks * in_mult != hdr.nchunksperloop)
                || (o_chunks > 0 && o_chunks * out_mult != hdr.nchunksperloop)
            {
                return Err(self.err(
                    t.line,
                    "gpu",
                    format!(
                        "i_chunks={i_chunks} / o_chunks={o_chunks} do not match nchunksperloop={} for coll=\"{}\" (the legacy runtime needs i_chunks×{in_mult} and o_chunks×{out_mult} to equal it when they are > 0)",
                        hdr.nchunksperloop, hdr.coll_str
                    ),
                ));
            }
        }
        let gpu = GpuCtx {
            id,
            chunks: [i_chunks, o_chunks, s_chunks],
            line: t.line,
        };
        let max_tb = hdr.runtime.max_tb_id() as i64;
        let mut first_line: HashMap<i64, usize> = HashMap::new();
        let mut send_tbs = [0usize; MAX_CHAN as usize + 1];
        let mut recv_tbs = [0usize; MAX_CHAN as usize + 1];
        let mut tbs: Vec<Threadblock> = Vec::new();
        while let Some(c) = self.lx.child(t)? {
            if c.name != b"tb" {
                self.lx.skip(&c)?;
                continue;
            }
            if tbs.len() == MAX_SUBS {
                return Err(self.err(
                    c.line,
                    "tb",
                    format!("more than {MAX_SUBS} <tb> elements in one <gpu>; the runtime's child table holds {MAX_SUBS}"),
                ));
            }
            let tb = self.tb(&c, hdr, &gpu, max_tb, &mut first_line, &send_tbs, &recv_tbs)?;
            let chan = tb.chan as usize; // checked 0..=32 in tb()
            if tb.send >= 0 {
                send_tbs[chan] += 1;
            }
            if tb.recv >= 0 {
                recv_tbs[chan] += 1;
            }
            tbs.push(tb);
        }
        // Dense ids: the runtime walks ids upward and fails at the first
        // present id whose predecessor is absent.
        let mut present = vec![false; max_tb.max(0) as usize];
        for tb in &tbs {
            present[tb.id as usize] = true;
        }
        for i in 1..present.len() {
            if present[i] && !present[i - 1] {
                let l = first_line.get(&(i as i64)).copied().unwrap_or(t.line);
                return Err(self.err(
                    t.line,
                    "gpu",
                    format!(
                        "threadblock ids on gpu {id} are not dense: id {} is missing but id {i} exists (line {l}); ids must be 0..n-1",
                        i - 1
                    ),
                ));
            }
        }
        tbs.sort_by_key(|tb| tb.id);
        Ok(GpuProgram {
            id,
            i_chunks,
            o_chunks,
            s_chunks,
            tbs,
            line: t.line,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn tb(
        &mut self,
        t: &Tag<'a>,
        hdr: &Header,
        gpu: &GpuCtx,
        max_tb: i64,
        first_line: &mut HashMap<i64, usize>,
        send_tbs: &[usize; MAX_CHAN as usize + 1],
        recv_tbs: &[usize; MAX_CHAN as usize + 1],
    ) -> Result<Threadblock, FrontError> {
        let [id, send, recv, chan] = self.lx.get_all(t, &["id", "send", "recv", "chan"]);
        let id = self.req_int(t, "id", id, "")?;
        let recv = self.req_int(t, "recv", recv, "")?;
        let send = self.req_int(t, "send", send, "")?;
        let chan = self.req_int(t, "chan", chan, "")?;
        let rt = match hdr.runtime {
            Runtime::Executor => "executor",
            Runtime::Legacy => "legacy",
        };
        if id < 0 {
            return Err(self.err(
                t.line,
                "tb",
                format!("threadblock id {id} must not be negative"),
            ));
        }
        if id >= max_tb {
            return Err(self.err(
                t.line,
                "tb",
                format!("threadblock id {id} is not below {max_tb}, the {rt} runtime's limit"),
            ));
        }
        if let Some(&l) = first_line.get(&id) {
            return Err(self.err(
                t.line,
                "tb",
                format!(
                    "duplicate threadblock id {id} on gpu {} (first on line {l})",
                    gpu.id
                ),
            ));
        }
        first_line.insert(id, t.line);
        for (what, p) in [("send", send), ("recv", recv)] {
            if p == gpu.id {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!(
                        "{what}={p} is the gpu's own rank; a threadblock cannot talk to itself"
                    ),
                ));
            }
            if p < -1 {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!("{what}={p} must be -1 (none) or a rank"),
                ));
            }
            if hdr.runtime == Runtime::Legacy && p >= hdr.ngpus {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!(
                        "{what}={p} is not below ngpus={}; the legacy runtime rejects it",
                        hdr.ngpus
                    ),
                ));
            }
        }
        if !(0..=MAX_CHAN).contains(&chan) {
            return Err(self.err(
                t.line,
                "tb",
                format!("chan={chan} is outside 0..{MAX_CHAN}"),
            ));
        }
        let mut st = TbState {
            pending_deps: 0,
            fusion: None,
        };
        self.steps.clear();
        while let Some(c) = self.lx.child(t)? {
            if c.name != b"step" {
                self.lx.skip(&c)?;
                continue;
            }
            if self.steps.len() == MAX_SUBS {
                return Err(self.err(
                    c.line,
                    "step",
                    format!("more than {MAX_SUBS} <step> elements in one <tb>; the runtime's child table holds {MAX_SUBS}"),
                ));
            }
            let step = self.step(&c, hdr, gpu, send, recv, chan, send_tbs, recv_tbs, &mut st)?;
            // A <step> with content: the runtime calls a null handler on any
            // child element and crashes; comments are fine.
            if let Some(inner) = self.lx.child(&c)? {
                return Err(self.err(
                    inner.line,
                    &inner.name_str(),
                    "element inside <step>; the runtime crashes on a child element of <step>",
                ));
            }
            self.steps.push(step);
        }
        Ok(Threadblock {
            id,
            send,
            recv,
            chan,
            steps: self.steps.drain(..).collect(),
            line: t.line,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        t: &Tag<'a>,
        hdr: &Header,
        gpu: &GpuCtx,
        send: i64,
        recv: i64,
        chan: i64,
        send_tbs: &[usize; MAX_CHAN as usize + 1],
        recv_tbs: &[usize; MAX_CHAN as usize + 1],
        st: &mut TbState,
    ) -> Result<Step, FrontError> {
        let [s, ty, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep] = self.lx.get_all(
            t,
            &[
                "s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
                "hasdep",
            ],
        );
        let s = self.req_int(t, "s", s, "")?;
        let srcoff = self.req_int(t, "srcoff", srcoff, "")?;
        let srcbuf_v = self.required(t, "srcbuf", srcbuf, "")?;
        let dstoff = self.req_int(t, "dstoff", dstoff, "")?;
        let dstbuf_v = self.required(t, "dstbuf", dstbuf, "")?;
        let cnt = self.req_int(t, "cnt", cnt, "")?;
        let ty = self.required(t, "type", ty, "")?;
        let depid = self.req_int(t, "depid", depid, "")?;
        let deps = self.req_int(t, "deps", deps, "")?;
        let hasdep = self.req_int(t, "hasdep", hasdep, "")?;
        let max_steps = hdr.runtime.max_steps() as i64;
        if !(0..max_steps).contains(&s) {
            return Err(self.err(
                t.line,
                "step",
                format!(
                    "s={s} is outside 0..{} (the {} runtime's step limit is {max_steps})",
                    max_steps - 1,
                    rt_name(hdr.runtime)
                ),
            ));
        }
        let kind = match std::str::from_utf8(ty).ok().and_then(StepKind::parse) {
            Some(k) => k,
            None if ty == b"ra" => {
                return Err(self.err(
                    t.line,
                    "step",
                    "type=\"ra\": the legacy parser accepts it but its kernel has no code for it (the threadblock just stops), and the executor rejects it",
                ))
            }
            None => {
                return Err(self.err(
                    t.line,
                    "step",
                    format!("unknown step type=\"{}\"; expected s, r, rcs, rrs, rrc, rrcs, cpy, re or nop", show(ty)),
                ))
            }
        };
        let buf = |key: &str, v: &[u8]| {
            std::str::from_utf8(v)
                .ok()
                .and_then(Buf::parse)
                .ok_or_else(|| {
                    self.err(
                        t.line,
                        "step",
                        format!("{key}=\"{}\" is not a buffer; expected i, o or s", show(v)),
                    )
                })
        };
        let srcbuf = buf("srcbuf", srcbuf_v)?;
        let dstbuf = buf("dstbuf", dstbuf_v)?;
        if hasdep != 0 && hasdep != 1 {
            return Err(self.err(t.line, "step", format!("hasdep={hasdep} must be 0 or 1")));
        }
        if depid >= 0 {
            st.pending_deps += 1;
        }
        if kind != StepKind::Nop {
            if !(0..MAX_COUNT).contains(&cnt) {
                return Err(self.err(
                    t.line,
                    "step",
                    format!(
                        "cnt={cnt} is outside 0..{} (the runtime's MSCCL_MAX_COUNT is {MAX_COUNT})",
                        MAX_COUNT - 1
                    ),
                ));
            }
            let c = chan as usize;
            if kind.sends() {
                if send < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("{kind} step sends, but its threadblock has send=-1"),
                    ));
                }
                if send_tbs[c] >= MAX_TBS_PER_CHANNEL {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("too many threadblocks with a send peer on channel {chan}: the runtime allows {MAX_TBS_PER_CHANNEL}"),
                    ));
                }
            }
            if kind.recvs() {
                if recv < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("{kind} step receives, but its threadblock has recv=-1"),
                    ));
                }
                if recv_tbs[c] >= MAX_TBS_PER_CHANNEL {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("too many threadblocks with a recv peer on channel {chan}: the runtime allows {MAX_TBS_PER_CHANNEL}"),
                    ));
                }
            }
            let (check_src, check_dst) = parser_checked_fields(kind);
            if check_src {
                self.bounds(t, gpu, "src", srcbuf, srcoff)?;
            }
            if check_dst {
                self.bounds(t, gpu, "dst", dstbuf, dstoff)?;
            }
            // Reduce fusion and the nop-chain rule, as the runtime's parser.
            let continuation = kind == StepKind::Reduce
                && st.fusion == Some((dstbuf, dstoff, srcbuf))
                && depid == -1;
            if !continuation {
                if st.pending_deps > 0 && depid < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        "the nop steps before this step carry dependencies, so the step itself must have depid >= 0 (the runtime: \"when there is a chain of dependencies, the last reduction must be a part of the first immediate instruction\")",
                    ));
                }
                st.pending_deps = 0;
            }
            st.fusion = if kind == StepKind::Reduce && hasdep == 0 {
                Some((dstbuf, dstoff, srcbuf))
            } else {
                None
            };
        }
        Ok(Step {
            s,
            kind,
            srcbuf,
            srcoff,
            dstbuf,
            dstoff,
            cnt,
            depid,
            deps,
            hasdep: hasdep == 1,
            line: t.line,
        })
    }

    fn bounds(
        &self,
        t: &Tag<'a>,
        gpu: &GpuCtx,
        which: &str,
        b: Buf,
        off: i64,
    ) -> Result<(), FrontError> {
        let n = gpu.chunks[b as usize];
        if off < -1 || off >= n {
            return Err(self.err(
                t.line,
                "step",
                format!(
                    "{which}off={off} is out of range for buffer {} ({}_chunks={n} on gpu {}, line {}); the runtime's parser requires -1 <= {which}off < {n}",
                    b.letter(),
                    b.letter(),
                    gpu.id,
                    gpu.line
                ),
            ));
        }
        Ok(())
    }
}

fn rt_name(r: Runtime) -> &'static str {
    match r {
        Runtime::Executor => "executor",
        Runtime::Legacy => "legacy",
    }
}

/// Which start offsets the runtime's parser checks per step type (§4).
fn parser_checked_fields(k: StepKind) -> (bool, bool) {
    match k {
        StepKind::Send | StepKind::RecvReduceSend => (true, false),
        StepKind::Recv | StepKind::RecvCopySend => (false, true),
        StepKind::RecvReduceCopy | StepKind::Nop => (false, false),
        StepKind::RecvReduceCopySend | StepKind::Copy | StepKind::Reduce => (true, true),
    }
}

struct GpuCtx {
    id: i64,
    /// i, o, s chunk counts, indexed by `Buf as usize`.
    chunks: [i64; 3],
    line: usize,
}

/// Per-threadblock state of the runtime's parser.
struct TbState {
    /// Dependencies (`depid >= 0`) seen since the last non-fused real step.
    pending_deps: usize,
    /// `(dstbuf, dstoff, srcbuf)` of an `re` the next `re` may fuse with.
    fusion: Option<(Buf, i64, Buf)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="reducescatter" inplace="1" outofplace="1" minBytes="0" maxBytes="0">"#;

    fn doc(body: &str) -> String {
        format!("{HEAD}\n{body}\n</algo>\n")
    }

    fn gpu0(steps: &str) -> String {
        doc(&format!(
            "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n{steps}\n    </tb>\n  </gpu>"
        ))
    }

    fn step(attrs: &str) -> String {
        format!("      <step {attrs}/>")
    }

    const OK_STEP: &str = r#"s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0""#;

    fn err(text: &str) -> String {
        parse(text, "t.xml").unwrap_err().to_string()
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
    fn minimal_file_parses() {
        let p = parse(&gpu0(&step(OK_STEP)), "t.xml").unwrap();
        assert_eq!(p.runtime, Runtime::Executor);
        assert_eq!(p.coll, Collective::ReduceScatter);
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(p.gpus[0].line, 2);
        assert_eq!(p.gpus[0].tbs[0].line, 3);
        let s = &p.gpus[0].tbs[0].steps[0];
        assert_eq!(s.line, 4);
        assert_eq!(s.kind, StepKind::Send);
        assert_eq!((s.srcoff, s.depid, s.deps), (1, -1, -1));
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
    fn nop_chain_must_end_in_a_dependent_step() {
        let nop = r#"s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0""#;
        let snd = OK_STEP.replace("s=\"0\"", "s=\"1\"");
        let e = err(&gpu0(&format!("{}\n{}", step(nop), step(&snd))));
        assert!(e.contains("line 5") && e.contains("depid >= 0"), "{e}");
    }

    #[test]
    fn checked_offsets_and_peers() {
        let e = err(&gpu0(&step(
            &OK_STEP.replace("srcoff=\"1\"", "srcoff=\"2\""),
        )));
        assert!(e.contains("srcoff=2 is out of range"), "{e}");
        // rrc's fields are not checked by the parser.
        let rrc = OK_STEP
            .replace("type=\"s\"", "type=\"rrc\"")
            .replace("srcoff=\"1\"", "srcoff=\"9\"");
        parse(&gpu0(&step(&rrc)), "t.xml").unwrap();
        let t = gpu0(&step(OK_STEP)).replace("send=\"1\"", "send=\"-1\"");
        assert!(err(&t).contains("send=-1"));
        let t = gpu0(&step(OK_STEP)).replace("send=\"1\"", "send=\"0\"");
        assert!(err(&t).contains("own rank"));
        let t = gpu0(&step(OK_STEP)).replace("chan=\"0\"", "chan=\"33\"");
        assert!(err(&t).contains("chan=33"));
    }

    #[test]
    fn node_limit() {
        // 1 algo + 1 gpu + 4 tb + 4090 steps = 4096 nodes: rejected.
        let many = |n: usize| {
            let tbs: Vec<String> = (0..4)
                .map(|t| {
                    let k = n / 4 + usize::from(t < n % 4);
                    let s: Vec<String> = (0..k).map(|_| step(OK_STEP)).collect();
                    format!(
                        "    <tb id=\"{t}\" send=\"1\" recv=\"1\" chan=\"0\">\n{}\n    </tb>",
                        s.join("\n")
                    )
                })
                .collect();
            doc(&format!(
                "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n{}\n  </gpu>",
                tbs.join("\n")
            ))
        };
        let e = err(&many(4090));
        assert!(e.contains("4096 parse nodes"), "{e}");
        parse(&many(4089), "t.xml").unwrap();
    }

    #[test]
    fn step_children_crash_the_runtime() {
        let t = gpu0(&format!("      <step {OK_STEP}><x/></step>"));
        assert!(err(&t).contains("inside <step>"));
        let t = gpu0(&format!("      <step {OK_STEP}><!-- fine --></step>"));
        parse(&t, "t.xml").unwrap();
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

    #[test]
    fn legacy_only_checks() {
        let legacy = |extra: &str, gpu_attrs: &str| {
            gpu0(&step(OK_STEP))
                .replace(
                    "coll=\"reducescatter\"",
                    &format!("coll=\"reduce_scatter\"{extra}"),
                )
                .replace(" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"", "")
                .replace("i_chunks=\"2\" o_chunks=\"1\"", gpu_attrs)
        };
        let ok = "i_chunks=\"2\" o_chunks=\"1\"";
        parse(&legacy("", ok), "t.xml").unwrap();
        parse(
            &legacy(" nthreads=\"64\" minBytes=\"5\" maxBytes=\"5\"", ok),
            "t.xml",
        )
        .unwrap();
        assert!(
            err(&legacy(" minBytes=\"6\" maxBytes=\"5\"", ok)).contains("greater than maxBytes")
        );
        assert!(err(&legacy(" minBytes=\"-1\"", ok)).contains("negative"));
        assert!(err(&legacy(" nthreads=\"33\"", ok)).contains("multiple of 32"));
        // o_chunks × ngpus must be nchunksperloop when > 0; 0 is not checked.
        assert!(err(&legacy("", "i_chunks=\"2\" o_chunks=\"2\""))
            .contains("do not match nchunksperloop"));
        parse(&legacy("", "i_chunks=\"2\" o_chunks=\"0\""), "t.xml").unwrap();
        // The executor checks none of these.
        let exec = gpu0(&step(OK_STEP)).replace("o_chunks=\"1\"", "o_chunks=\"2\"");
        parse(&exec.replace("minBytes=\"0\"", "minBytes=\"9\""), "t.xml").unwrap();
    }

    #[test]
    fn per_channel_and_children_limits() {
        // 33 threadblocks with a send peer on channel 0, each sending.
        let tbs: Vec<String> = (0..33)
            .map(|t| {
                format!(
                    "    <tb id=\"{t}\" send=\"1\" recv=\"-1\" chan=\"0\">\n{}\n    </tb>",
                    step(OK_STEP)
                )
            })
            .collect();
        let text = doc(&format!(
            "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n{}\n  </gpu>",
            tbs.join("\n")
        ));
        let e = err(&text);
        assert!(
            e.contains("too many threadblocks with a send peer on channel 0"),
            "{e}"
        );
        assert!(e.contains(&format!("line {}", 2 + 32 * 3 + 2)), "{e}");
        parse(
            &text.replace(
                "<tb id=\"32\" send=\"1\" recv=\"-1\" chan=\"0\">",
                "<tb id=\"32\" send=\"1\" recv=\"-1\" chan=\"1\">",
            ),
            "t.xml",
        )
        .unwrap();
        // More than 1024 steps in one threadblock.
        let steps: Vec<String> = (0..1025).map(|_| step(OK_STEP)).collect();
        assert!(err(&gpu0(&steps.join("\n"))).contains("more than 1024 <step>"));
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

    #[test]
    fn legacy_dialect() {
        let t = gpu0(&step(OK_STEP))
            .replace("coll=\"reducescatter\"", "coll=\"reduce_scatter\"")
            .replace(" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"", "");
        let p = parse(&t, "t.xml").unwrap();
        assert_eq!(p.runtime, Runtime::Legacy);
        assert_eq!(p.max_bytes, None);
        assert!(p.inplace && !p.outofplace);
        assert!(err(&t.replace("name=\"t\" ", "")).contains("missing required attribute name"));
        assert!(err(&t.replace("send=\"1\"", "send=\"2\"")).contains("not below ngpus"));
        // Executor requires outofplace.
        let t = gpu0(&step(OK_STEP)).replace(" outofplace=\"1\"", "");
        assert!(err(&t).contains("missing required attribute outofplace"));
    }
}
