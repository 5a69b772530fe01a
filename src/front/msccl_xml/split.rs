//! Reading a large file's `<gpu>` elements on several cores.
//!
//! A `<gpu>` element is read without any state from the elements before
//! it except the lexer's position and line, so the text after the `<algo>`
//! tag can be cut into parts that each start at a `<gpu` tag, the parts
//! read at once, and their ranks joined in order. Where a cut falls is a
//! guess (a `<gpu` at the start of a line); each part checks it: reading
//! part k must end exactly where part k + 1 starts, on the line counted
//! for it. Any mismatch, any error and any count the runtime would refuse
//! sends the caller back to reading the file from the same point in one
//! pass, so the result — the Program or the first error — is always
//! exactly what that one pass gives.

use super::lex::{Lexer, Tag};
use super::parser::{Header, Parser};
use crate::ir::msccl::MAX_SUBS;
use crate::ir::GpuProgram;

/// How many parts, from what size of `<gpu>` text on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Split {
    /// Parts to cut the text into (1: one pass).
    pub(super) parts: usize,
    /// Below this many bytes one pass is as fast.
    pub(super) min_bytes: usize,
}

impl Split {
    /// For this machine: a few parts per core (parts differ in size, so a
    /// few each keep the cores even), from 4 MiB on.
    pub(super) fn machine() -> Split {
        let cores = crate::par::threads(usize::MAX);
        Split {
            parts: if cores > 1 { 4 * cores } else { 1 },
            min_bytes: 4 << 20,
        }
    }
}

/// Where the `<gpu>` children end: the ranks in order, the lexer's
/// position and line after `</algo>`.
pub(super) struct Read {
    pub(super) gpus: Vec<GpuProgram>,
    pub(super) pos: usize,
    pub(super) line: usize,
}

/// The `<gpu>` children of `root` read in parts on the machine's cores,
/// from the lexer's position in `parser` on; None when one pass must do it
/// (a small file, one core, a cut that did not hold, an error anywhere).
pub(super) fn gpus<'a>(parser: &Parser<'a>, root: &Tag<'a>, hdr: &Header) -> Option<Read> {
    let lx = &parser.lx;
    let s = lx.s;
    let from = lx.pos;
    let Split { parts, min_bytes } = parser.split;
    if parts < 2 || s.len() - from < min_bytes {
        return None;
    }
    let cuts = cuts(s, from, parts);
    if cuts.len() < 2 {
        return None;
    }
    // The line each part starts on.
    let spans: Vec<(usize, usize)> = cuts
        .iter()
        .enumerate()
        .map(|(k, &a)| (a, cuts.get(k + 1).copied().unwrap_or(s.len())))
        .collect();
    let newlines = crate::par::map(&spans, |&(a, b)| {
        s[a..b].iter().filter(|&&c| c == b'\n').count()
    });
    let mut lines = Vec::with_capacity(spans.len() + 1);
    lines.push(lx.line);
    for n in &newlines {
        lines.push(lines[lines.len() - 1] + n);
    }
    let parts: Vec<usize> = (0..spans.len()).collect();
    let read = crate::par::map(&parts, |&k| {
        let last = k + 1 == spans.len();
        let end = (!last).then(|| (spans[k].1, lines[k + 1]));
        part(s, lx.file, spans[k].0, lines[k], end, root, hdr)
    });
    let mut gpus = Vec::new();
    let mut after = None;
    for r in read {
        let (mut g, at) = r?;
        gpus.append(&mut g);
        after = at;
    }
    if gpus.len() > MAX_SUBS {
        return None;
    }
    let (pos, line) = after?;
    Some(Read { gpus, pos, line })
}

/// Up to `parts` cut points from `from` on, evenly spaced, each moved
/// forward to the next `<gpu` tag that starts a line (after spaces only);
/// `from` itself is the first.
fn cuts(s: &[u8], from: usize, parts: usize) -> Vec<usize> {
    let len = s.len() - from;
    let mut cuts = vec![from];
    for k in 1..parts {
        let want = from + len / parts * k;
        let Some(at) = gpu_tag_from(s, want.max(cuts[cuts.len() - 1] + 1)) else {
            break;
        };
        if at > cuts[cuts.len() - 1] {
            cuts.push(at);
        }
    }
    cuts
}

/// The first `<gpu` tag at or after `from` whose line holds only spaces
/// before it.
fn gpu_tag_from(s: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(o) = s[i..].iter().position(|&c| c == b'<') {
        let at = i + o;
        let name_ends = matches!(s.get(at + 4), Some(b' ' | b'>' | b'/'));
        if s[at + 1..].starts_with(b"gpu") && name_ends {
            let line_start = s[..at]
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |n| n + 1);
            if s[line_start..at].iter().all(|&c| c == b' ') && line_start > 0 {
                return Some(at);
            }
        }
        i = at + 1;
    }
    None
}

/// Read the children of `root` from `pos` (on `line`) as one pass would:
/// up to `end` (position and the line one pass would be on there), or for
/// the last part through `</algo>`. Returns the ranks and, for the last
/// part, the lexer's position and line after `</algo>`; None if the part
/// does not end where it must or reads anything wrong.
#[allow(clippy::type_complexity)]
fn part<'a>(
    s: &'a [u8],
    file: &'a str,
    pos: usize,
    line: usize,
    end: Option<(usize, usize)>,
    root: &Tag<'a>,
    hdr: &Header,
) -> Option<(Vec<GpuProgram>, Option<(usize, usize)>)> {
    let mut p = Parser {
        split: Split {
            parts: 1,
            min_bytes: 0,
        },
        steps: Vec::new(),
        lx: Lexer::new(s, file, pos, line),
    };
    let mut gpus = Vec::new();
    loop {
        p.lx.skip_space();
        if let Some((at, at_line)) = end {
            if p.lx.pos >= at {
                return (p.lx.pos == at && p.lx.line == at_line).then_some((gpus, None));
            }
        }
        match p.lx.child(root).ok()? {
            None => {
                return match end {
                    None => Some((gpus, Some((p.lx.pos, p.lx.line)))),
                    Some(_) => None,
                }
            }
            Some(t) if t.name == b"gpu" => gpus.push(p.gpu(&t, hdr).ok()?),
            Some(t) => p.lx.skip(&t).ok()?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_in;
    use super::Split;

    const ONE_PASS: Split = Split {
        parts: 1,
        min_bytes: 0,
    };

    fn in_parts(parts: usize) -> Split {
        Split {
            parts,
            min_bytes: 0,
        }
    }

    fn shipped() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schedules/dgx-a100x4/rs.xml");
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn parts_read_what_one_pass_reads() {
        let text = shipped();
        let one = parse_in(text.as_bytes(), "rs.xml", ONE_PASS).unwrap();
        for parts in [2, 3, 8, 64] {
            assert_eq!(
                parse_in(text.as_bytes(), "rs.xml", in_parts(parts)).unwrap(),
                one
            );
        }
        // Everything after </algo> is still read (and checked) once.
        let tail = format!("{text}<!-- after -->\n<x/>\n");
        let one = parse_in(tail.as_bytes(), "rs.xml", ONE_PASS).unwrap();
        assert_eq!(
            parse_in(tail.as_bytes(), "rs.xml", in_parts(8)).unwrap(),
            one
        );
    }

    #[test]
    fn a_cut_inside_a_comment_falls_back_to_one_pass() {
        // `<gpu` lines inside a comment look like places to cut.
        let text = shipped();
        let at = text.find("  <gpu id=\"1\"").unwrap();
        let fake: String = (0..2000)
            .map(|k| format!("  <gpu id=\"{k}\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"))
            .collect();
        let commented = format!("{}<!-- old\n{fake}-->\n{}", &text[..at], &text[at..]);
        let one = parse_in(commented.as_bytes(), "rs.xml", ONE_PASS).unwrap();
        let plain = parse_in(text.as_bytes(), "rs.xml", ONE_PASS).unwrap();
        assert_eq!(one.gpus.len(), plain.gpus.len());
        for parts in [2, 8, 64] {
            assert_eq!(
                parse_in(commented.as_bytes(), "rs.xml", in_parts(parts)).unwrap(),
                one
            );
        }
    }

    /// The error one pass gives for `text`, checked to be the error in
    /// parts too.
    fn one_pass_error(text: &str) -> String {
        let one = parse_in(text.as_bytes(), "rs.xml", ONE_PASS)
            .unwrap_err()
            .to_string();
        let parts = parse_in(text.as_bytes(), "rs.xml", in_parts(8))
            .unwrap_err()
            .to_string();
        assert_eq!(parts, one);
        one
    }

    #[test]
    fn errors_are_one_pass_errors() {
        let text = shipped();
        // A bad step in the last rank, and a second one in the first: the
        // first in the file is reported, on its line.
        let last = text.rfind("type=\"s\"").unwrap();
        let bad = format!("{}type=\"zz\"{}", &text[..last], &text[last + 8..]);
        let e = one_pass_error(&bad);
        assert!(e.contains("zz"), "{e}");
        let first = bad.find("type=\"s\"").unwrap();
        let both = format!("{}type=\"yy\"{}", &bad[..first], &bad[first + 8..]);
        let e = one_pass_error(&both);
        assert!(e.contains("yy"), "{e}");
        // An unterminated file.
        one_pass_error(&text[..text.len() * 2 / 3]);
    }
}
