//! The lenient XML parser NCCL/RCCL topology files need: elements with
//! attributes and children, each with its line, read as NCCL's own parser
//! reads them (comments, a stray `<?xml …?>` prolog, tabs, single or double
//! quotes, entities in values), and broken markup refused with its line.

use crate::front::FrontError;

/// Deepest element nesting accepted (real files have < 12 levels).
const MAX_DEPTH: usize = 64;

/// One XML element.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    /// 1-based line of the start tag.
    pub line: usize,
}

impl Element {
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
    pub(super) fn describe(&self) -> String {
        format!("line {}: <{}>", self.line, self.name)
    }
}

/// The `version` attribute of the root `<system>` element, if it can be
/// found cheaply (used by format detection).
pub fn declared_version(text: &str) -> Option<u32> {
    let i = text.find("<system")?;
    let rest = &text[i..];
    let end = rest.find('>')?;
    let tag = &rest[..end];
    let j = tag.find("version")?;
    let v: String = tag[j + 7..]
        .chars()
        .skip_while(|c| *c == '=' || *c == '"' || *c == '\'' || c.is_whitespace())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    v.parse().ok()
}

/// Parse XML text into its root element (lenient; see the module docs).
/// Returns the root and lexical warnings.
pub fn parse_xml(text: &str, file: &str) -> Result<(Element, Vec<String>), FrontError> {
    let err = |line: usize, m: String| FrontError::at_line(file, line, m);
    let b = text.as_bytes();
    let mut i = 0usize;
    let mut line = 1usize;
    let mut warnings = Vec::new();
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut saw_tab = false;
    while i < b.len() {
        let c = b[i];
        if c != b'<' {
            if c == b'\n' {
                line += 1;
            } else if c == b'\t' {
                saw_tab = true;
            }
            i += 1;
            continue;
        }
        let start_line = line;
        // Comment, declaration, doctype.
        if text[i..].starts_with("<!--") {
            let end = text[i + 4..]
                .find("-->")
                .ok_or_else(|| err(start_line, "comment `<!--` is never closed".into()))?;
            line += text[i..i + 4 + end].matches('\n').count();
            i += 4 + end + 3;
            continue;
        }
        if text[i..].starts_with("<?") || text[i..].starts_with("<!") {
            let end = text[i..]
                .find('>')
                .ok_or_else(|| err(start_line, "`<?`/`<!` is never closed".into()))?;
            if text[i..].starts_with("<?xml") {
                warnings.push(format!(
                    "line {start_line}: XML declaration `<?xml …?>` skipped (NCCL and RCCL reject it; remove it before giving the file to NCCL)"
                ));
            }
            line += text[i..i + end].matches('\n').count();
            i += end + 1;
            continue;
        }
        // A tag: find its end, respecting quotes.
        let mut j = i + 1;
        let mut quote: Option<u8> = None;
        while j < b.len() {
            let d = b[j];
            match quote {
                Some(q) if d == q => quote = None,
                Some(_) => {}
                None if d == b'"' || d == b'\'' => quote = Some(d),
                None if d == b'>' => break,
                None if d == b'<' => {
                    return Err(err(
                        line,
                        "`<` inside a tag (a tag is not closed with `>`)".into(),
                    ))
                }
                None => {}
            }
            if d == b'\n' {
                line += 1;
            }
            j += 1;
        }
        if j >= b.len() {
            return Err(err(start_line, "tag is never closed with `>`".into()));
        }
        let inner = &text[i + 1..j];
        i = j + 1;
        if let Some(name) = inner.strip_prefix('/') {
            let name = name.trim();
            let open = stack.pop().ok_or_else(|| {
                err(
                    start_line,
                    format!("closing tag </{name}> without an opening tag"),
                )
            })?;
            if open.name != name {
                return Err(err(
                    start_line,
                    format!(
                        "closing tag </{name}> does not match <{}> opened at line {}",
                        open.name, open.line
                    ),
                ));
            }
            match stack.last_mut() {
                Some(p) => p.children.push(open),
                None => {
                    if root.is_some() {
                        return Err(err(open.line, "more than one root element".into()));
                    }
                    root = Some(open);
                }
            }
            continue;
        }
        let self_closing = inner.trim_end().ends_with('/');
        let body = if self_closing {
            inner.trim_end().trim_end_matches('/')
        } else {
            inner
        };
        let el = parse_tag(body, start_line, file)?;
        if self_closing {
            match stack.last_mut() {
                Some(p) => p.children.push(el),
                None => {
                    if root.is_some() {
                        return Err(err(start_line, "more than one root element".into()));
                    }
                    root = Some(el);
                }
            }
        } else {
            if stack.len() >= MAX_DEPTH {
                return Err(err(
                    start_line,
                    format!("elements nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            if root.is_some() && stack.is_empty() {
                return Err(err(start_line, "more than one root element".into()));
            }
            stack.push(el);
        }
    }
    if let Some(open) = stack.pop() {
        return Err(err(
            open.line,
            format!("<{}> is never closed (end of file reached)", open.name),
        ));
    }
    if saw_tab {
        warnings.push(
            "the file contains tab characters, which NCCL's parser rejects (read anyway)".into(),
        );
    }
    let root = root.ok_or_else(|| {
        FrontError::new(
            file,
            "no XML element found (the file is empty or only comments)",
        )
    })?;
    Ok((root, warnings))
}

fn parse_tag(body: &str, line: usize, file: &str) -> Result<Element, FrontError> {
    let err = |m: String| FrontError::at_line(file, line, m);
    let body = body.trim();
    let name_end = body.find(|c: char| c.is_whitespace()).unwrap_or(body.len());
    let name = &body[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ':')
    {
        return Err(err(format!("bad element name \"{name}\"")));
    }
    let mut attrs = Vec::new();
    let mut rest = body[name_end..].trim_start();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(|| {
            err(format!(
                "<{name}>: attribute without a value near \"{}\"",
                short(rest)
            ))
        })?;
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(err(format!(
                "<{name}>: bad attribute near \"{}\"",
                short(rest)
            )));
        }
        let after = rest[eq + 1..].trim_start();
        let q = after.chars().next().unwrap_or(' ');
        if q != '"' && q != '\'' {
            return Err(err(format!("<{name}>: value of \"{key}\" is not quoted")));
        }
        let close = after[1..]
            .find(q)
            .ok_or_else(|| err(format!("<{name}>: value of \"{key}\" is not closed")))?;
        let val = unescape(&after[1..1 + close]);
        attrs.push((key.to_string(), val));
        rest = after[1 + close + 1..].trim_start();
    }
    Ok(Element {
        name: name.to_string(),
        attrs,
        children: Vec::new(),
        line,
    })
}

fn short(s: &str) -> String {
    s.chars().take(24).collect()
}

fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexer_leniency() {
        let t = "\n<?xml version=\"1.0\"?>\n<!-- c -->\n<system version='1'>\n\t<cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci busid=\"0000:02:00.0\" class=\"0x030200\"/></cpu></system>\n";
        let (root, warns) = parse_xml(t, "t").unwrap();
        assert_eq!(root.name, "system");
        assert_eq!(root.line, 4);
        assert_eq!(root.children[0].children.len(), 2);
        assert_eq!(warns.len(), 2, "{warns:?}");
    }

    #[test]
    fn lexer_errors_name_lines() {
        let e = parse_xml("<system>\n<cpu>\n</system>", "f.xml").unwrap_err();
        assert!(e.to_string().contains("f.xml: line 3"), "{e}");
        let e = parse_xml("<system>\n<cpu numaid=0/>\n</system>", "f.xml").unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("not quoted"),
            "{e}"
        );
        let e = parse_xml("<!-- x", "f.xml").unwrap_err();
        assert!(e.to_string().contains("never closed"));
        let deep = "<a>".repeat(100);
        assert!(parse_xml(&deep, "f").is_err());
    }
}
