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
    String::from_utf8(bytes).map_err(|e| not_utf8(&name, e.utf8_error()))
}

/// The error for a file that is not UTF-8 ([`read_text`], [`read_utf8`]).
fn not_utf8(name: &str, e: std::str::Utf8Error) -> FrontError {
    FrontError::new(
        name,
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ),
    )
}

/// From this size on, [`read_utf8`] reads and checks a file in parts on
/// the machine's cores.
const PARTS_FROM: usize = 16 << 20;

/// A file's bytes, checked to be UTF-8 text as [`read_text`] checks them
/// (the same message on failure), for readers that work on bytes. A large
/// file is read and checked in parts on the machine's cores: the check
/// cuts at ASCII bytes, which never sit inside a character, so the parts
/// are UTF-8 exactly when the whole is.
pub fn read_utf8(path: &Path) -> Result<Vec<u8>, FrontError> {
    let name = path.display().to_string();
    let bytes = read_bytes(path).map_err(|e| FrontError::new(&name, e.to_string()))?;
    if !utf8_in_parts(&bytes) {
        if let Err(e) = std::str::from_utf8(&bytes) {
            return Err(not_utf8(&name, e));
        }
    }
    Ok(bytes)
}

/// `std::fs::read`, a large regular file in parts on the cores (each part
/// at its offset; a file whose size changed meanwhile is read again in one
/// pass, which also reports any error).
fn read_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        let len = meta.len() as usize;
        if meta.is_file() && len >= PARTS_FROM && crate::par::threads(usize::MAX) > 1 {
            let mut buf = vec![0u8; len];
            let failed = std::sync::atomic::AtomicBool::new(false);
            crate::par::for_parts(&mut buf, 1, |at, part| {
                if file.read_exact_at(part, at as u64).is_err() {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            });
            let same = file.metadata().is_ok_and(|m| m.len() as usize == len);
            if !failed.into_inner() && same {
                return Ok(buf);
            }
        }
    }
    std::fs::read(path)
}

/// Whether `b` is UTF-8, checked in parts cut at ASCII bytes on the
/// machine's cores when it is large.
fn utf8_in_parts(b: &[u8]) -> bool {
    let cores = crate::par::threads(usize::MAX);
    if b.len() < PARTS_FROM || cores < 2 {
        return std::str::from_utf8(b).is_ok();
    }
    let mut cuts = vec![0];
    for k in 1..cores {
        let want = b.len() / cores * k;
        let at = b[want..]
            .iter()
            .position(|&c| c.is_ascii())
            .map_or(b.len(), |o| want + o);
        if at > cuts[cuts.len() - 1] && at < b.len() {
            cuts.push(at);
        }
    }
    cuts.push(b.len());
    let spans: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    crate::par::map(&spans, |&(x, y)| std::str::from_utf8(&b[x..y]).is_ok())
        .into_iter()
        .all(|ok| ok)
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

    /// Large files are read and checked in parts; the bytes and the
    /// message for a bad byte are one pass's.
    #[test]
    fn large_files_read_in_parts() {
        let dir = std::env::temp_dir().join(format!("rscc-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.txt");
        // Two- and three-byte characters everywhere, so cuts fall beside them.
        let unit = "<gpu é ∑ id=\"1\">\n";
        let mut text = unit.repeat(PARTS_FROM / unit.len() + 1000).into_bytes();
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_utf8(&path).unwrap(), text);
        assert_eq!(read_text(&path).unwrap().as_bytes(), &text[..]);
        // A lone continuation byte late in the file.
        let bad = text.len() - 100;
        text[bad] = 0x80;
        std::fs::write(&path, &text).unwrap();
        let e = read_utf8(&path).unwrap_err().to_string();
        assert_eq!(e, read_text(&path).unwrap_err().to_string());
        assert!(e.contains(&format!("offset {bad}")), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
