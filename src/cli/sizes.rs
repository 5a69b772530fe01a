//! Message-size lists for the command line: `1K:1G` (powers of two from
//! 1 KiB to 1 GiB), `1K:1G:4` (factor 4), single values (`4M`, `1000`), and
//! comma-separated mixtures. Suffixes K, M, G, T are binary (1024-based),
//! case-insensitive, optionally followed by `B` or `iB`.

/// A note for every size outside `prog`'s [minBytes, maxBytes] window
/// (`Program::serves`): the runtime would not use the file for it, and a
/// window below some size can be what makes a schedule safe (docs/
/// verifier.md). `run` and `simulate` go on and report them.
pub fn window_notes(prog: &crate::ir::Program, sizes: &[u64]) {
    let outside: Vec<String> = sizes
        .iter()
        .filter(|&&s| !prog.serves(s))
        .map(|s| s.to_string())
        .collect();
    if !outside.is_empty() {
        eprintln!(
            "note: {} B {} outside the file's window (minBytes {}, maxBytes {}): MSCCL would not use it there, and the verifier's guarantee covers only the window",
            outside.join(", "),
            if outside.len() == 1 { "is" } else { "are" },
            prog.min_bytes,
            prog.max_bytes.map_or("absent".to_string(), |m| m.to_string())
        );
    }
}

/// Parse a size list. Errors name the offending item.
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!("empty item in size list \"{s}\""));
        }
        let parts: Vec<&str> = item.split(':').collect();
        match parts.as_slice() {
            [one] => out.push(parse_size(one)?),
            [lo, hi] | [lo, hi, _] => {
                let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
                let factor = match parts.get(2) {
                    Some(f) => f
                        .trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|&f| f >= 2)
                        .ok_or_else(|| format!("\"{item}\": the factor must be an integer ≥ 2"))?,
                    None => 2,
                };
                if lo == 0 {
                    return Err(format!("\"{item}\": a range must start above 0"));
                }
                if lo > hi {
                    return Err(format!("\"{item}\": the range starts above its end"));
                }
                let mut v = lo;
                loop {
                    out.push(v);
                    match v.checked_mul(factor) {
                        Some(n) if n <= hi => v = n,
                        _ => break,
                    }
                }
            }
            _ => return Err(format!("\"{item}\": expected SIZE or MIN:MAX[:FACTOR]")),
        }
    }
    Ok(out)
}

/// Parse one size: digits with an optional K/M/G/T suffix (binary).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some('t') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("\"{t}\" is not a size (e.g. 1024, 64K, 1M, 1G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{t}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_values() {
        let v = parse_sizes("1K:1G").unwrap();
        assert_eq!(v.len(), 21);
        assert_eq!(v[0], 1024);
        assert_eq!(*v.last().unwrap(), 1 << 30);
        assert_eq!(
            parse_sizes("1K:1M:4").unwrap(),
            vec![1024, 4096, 16384, 65536, 262144, 1 << 20]
        );
        assert_eq!(parse_sizes("4M").unwrap(), vec![4 << 20]);
        assert_eq!(
            parse_sizes("1000, 2kB,1GiB").unwrap(),
            vec![1000, 2048, 1 << 30]
        );
        assert_eq!(parse_sizes("3K:10K").unwrap(), vec![3072, 6144]);
    }

    #[test]
    fn errors() {
        for bad in [
            "",
            "x",
            "1K:",
            "0:1K",
            "2K:1K",
            "1K:1M:1",
            "1:2:3:4",
            "99999999999T",
            "-5",
        ] {
            assert!(parse_sizes(bad).is_err(), "{bad}");
        }
    }
}
