//! Size lists for `--sizes`: `64K`, `1K:256M` (powers of two between the
//! ends, both included), `1M,4M,16M`. Suffixes K/M/G are binary (KiB…);
//! a trailing `B` is allowed.

/// Parse one size such as `4096`, `64K`, `1M`, `2GB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64K, 1M, 2G)"))?;
    v.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Parse a size list: single values, `lo:hi` ranges of powers of two
/// (`lo`, 2·lo, … up to `hi`), comma-separated.
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        if let Some((a, b)) = part.split_once(':') {
            let (lo, hi) = (parse_size(a)?, parse_size(b)?);
            if lo == 0 {
                return Err(format!("'{part}': a range must start above 0"));
            }
            if lo > hi {
                return Err(format!("'{part}': the range start is above its end"));
            }
            let mut v = lo;
            while v <= hi {
                out.push(v);
                match v.checked_mul(2) {
                    Some(x) => v = x,
                    None => break,
                }
            }
        } else {
            let v = parse_size(part)?;
            if v == 0 {
                return Err(format!("'{part}': size 0"));
            }
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err(format!("'{s}': no sizes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_suffixes() {
        assert_eq!(parse_sizes("1K:8K").unwrap(), vec![1024, 2048, 4096, 8192]);
        assert_eq!(parse_sizes("64K").unwrap(), vec![65536]);
        assert_eq!(parse_sizes("1M,3").unwrap(), vec![1 << 20, 3]);
        assert_eq!(parse_sizes("2GB").unwrap(), vec![2 << 30]);
        assert_eq!(parse_sizes("1000:3000").unwrap(), vec![1000, 2000]);
        assert!(parse_sizes("8K:1K").is_err());
        assert!(parse_sizes("abc").is_err());
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("").is_err());
        assert!(parse_sizes("99999999999G").is_err());
    }
}
