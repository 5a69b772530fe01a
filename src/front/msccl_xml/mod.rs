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
//!
//! The reader is in three parts: `lex`'s tokenizer (tags, attributes,
//! values and comments, as the runtime's reader reads them, and C's
//! `strtol`), and the runtime's parser on top of it: the `<algo>` root and
//! its header in `parser`, the `<gpu>`, `<tb>` and `<step>` elements in
//! `gpu`. `split` reads a large file's `<gpu>` elements on several cores,
//! with exactly one pass's result.

mod gpu;
mod lex;
mod parser;
mod split;

pub use lex::strtol;

use super::{read_utf8, FrontError};
use crate::ir::Program;
use lex::Lexer;
use parser::Parser;
use std::path::Path;

/// Read an MSCCL XML file.
pub fn load(path: &Path) -> Result<Program, FrontError> {
    let text = read_utf8(path)?;
    parse_in(&text, &path.display().to_string(), split::Split::machine())
}

/// Parse MSCCL XML text; `file` names the source in error messages.
pub fn parse(text: &str, file: &str) -> Result<Program, FrontError> {
    parse_in(text.as_bytes(), file, split::Split::machine())
}

/// [`parse`] of UTF-8 bytes, the `<gpu>` elements read in the parts
/// `split` allows.
fn parse_in(text: &[u8], file: &str, split: split::Split) -> Result<Program, FrontError> {
    Parser {
        split,
        steps: Vec::new(),
        lx: Lexer::new(text, file, 0, 1),
    }
    .document()
}

/// Small test files, shared by the unit tests of the parts.
#[cfg(test)]
mod testing {
    use super::parse;

    pub(super) const HEAD: &str = r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="reducescatter" inplace="1" outofplace="1" minBytes="0" maxBytes="0">"#;

    pub(super) fn doc(body: &str) -> String {
        format!("{HEAD}\n{body}\n</algo>\n")
    }

    pub(super) fn gpu0(steps: &str) -> String {
        doc(&format!(
            "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n{steps}\n    </tb>\n  </gpu>"
        ))
    }

    pub(super) fn step(attrs: &str) -> String {
        format!("      <step {attrs}/>")
    }

    pub(super) const OK_STEP: &str = r#"s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0""#;

    pub(super) fn err(text: &str) -> String {
        parse(text, "t.xml").unwrap_err().to_string()
    }
}
