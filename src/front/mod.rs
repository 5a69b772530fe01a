//! Front ends: everything that reads a file and produces a central type.
//! Topology formats (rscc JSON, generators) and MSCCL XML.

mod builder;
pub mod generate;
pub mod hosts;
pub mod import;
pub mod msccl_xml;
pub mod nccl_xml;
pub mod nvidia_smi;
pub mod rocm_smi;
pub mod topo_json;

use crate::ir::Topology;
use std::fmt;
use std::path::Path;

/// An input file could not be used. Always names the file; `line` is
/// where in it, when one line is at fault; the message names the element
/// and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontError {
    pub file: String,
    pub line: Option<usize>,
    pub msg: String,
}

impl FrontError {
    pub fn new(file: impl Into<String>, msg: impl Into<String>) -> Self {
        FrontError {
            file: file.into(),
            line: None,
            msg: msg.into(),
        }
    }
    /// An error at one line of the file.
    pub fn at_line(file: impl Into<String>, line: usize, msg: impl Into<String>) -> Self {
        FrontError {
            file: file.into(),
            line: Some(line),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for FrontError {
    /// One line: control characters that a message quotes from the input
    /// (newlines, tabs, escapes) are written escaped, as `\n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(
                f,
                "{}: line {l}: {}",
                OneLine(&self.file),
                OneLine(&self.msg)
            ),
            None => write!(f, "{}: {}", OneLine(&self.file), OneLine(&self.msg)),
        }
    }
}

/// Text with its control characters escaped.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for FrontError {}

/// Read a file to a string, with a FrontError naming it on failure.
pub fn read_text(path: &Path) -> Result<String, FrontError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| FrontError::new(&name, e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| {
        FrontError::new(
            &name,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Load a topology from a file. The format is chosen by content: rscc JSON
/// (a leading `{`), NCCL/RCCL topology XML, `nvidia-smi topo -m` or
/// `rocm-smi --showtopo` text (see `import`; defaults for the GPU model).
pub fn load_topology(path: &Path) -> Result<Topology, FrontError> {
    let name = path.display().to_string();
    let text = read_text(path)?;
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        topo_json::parse(&text, &name)
    } else if trimmed.is_empty() {
        Err(FrontError::new(&name, "the file is empty"))
    } else {
        import::import_text(&text, &name, &import::ImportOptions::default()).map(|r| r.topology)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever a message quotes from the input, the error is one line.
    #[test]
    fn errors_are_one_line() {
        let e = FrontError::at_line("a\nb.xml", 3, "bad attribute near \"x\">\n\t<nic>\u{7f}");
        let s = e.to_string();
        assert_eq!(
            s,
            "a\\nb.xml: line 3: bad attribute near \"x\">\\n\\t<nic>\\u{7f}"
        );
        assert!(!s.contains('\n'));
    }
}
