//! A short, fixed-seed run of every fuzz target (src/fuzz.rs): each file of
//! its corpus (`fuzz/corpus/`), a deterministic set of mutations of it, and
//! every recorded finding (`fuzz/regressions/<target>/`). The campaigns
//! themselves run under AFL++ with `bench/fuzz.sh TARGET SECONDS`.

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// xorshift64*: the same mutations on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that reach the readers' edge cases: markup, numbers at the limits
/// of their types, and the formats' own words.
const TOKENS: &[&str] = &[
    "<",
    ">",
    "/>",
    "\"",
    "=",
    " ",
    "\n",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "0",
    "-1",
    "1e308",
    "2147483648",
    "4294967296",
    "18446744073709551616",
    "NaN",
    "null",
    "\"gpu\"",
    "\"rank\"",
    "\"bw_gbps\"",
    "<step",
    "<tb",
    "<gpu",
    "type=\"rrc\"",
    "type=\"s\"",
    "depid=\"0\"",
    "chan=\"31\"",
    "cnt=\"71\"",
    "X",
    "NV12",
    "SYS",
    "PIX",
    "GPU0",
    "XGMI",
    "é",
    "\u{feff}",
];

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                v.splice(at..at, t.iter().copied());
            }
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 if !v.is_empty() => {
                let s = rng.below(v.len());
                let e = (s + 1 + rng.below(128)).min(v.len());
                let piece = v[s..e].to_vec();
                v.splice(at..at, piece);
            }
            4 if !other.is_empty() => {
                let s = rng.below(other.len());
                let e = (s + 1 + rng.below(256)).min(other.len());
                v.truncate(at);
                v.extend_from_slice(&other[s..e]);
            }
            _ if !v.is_empty() => {
                // A digit run replaced by a large or negative number.
                let i = rng.below(v.len());
                if v[i].is_ascii_digit() {
                    let n = ["0", "65535", "2147483647", "-2", "99999999999"][rng.below(5)];
                    let mut e = i;
                    while e < v.len() && v[e].is_ascii_digit() {
                        e += 1;
                    }
                    v.splice(i..e, n.bytes());
                }
            }
            _ => {}
        }
    }
    v
}

#[test]
fn every_target_survives_its_corpus_and_mutations() {
    let mut total = 0usize;
    for t in rscc::fuzz::TARGETS {
        let corpus = files(&fuzz_dir().join("corpus").join(t.corpus));
        assert!(!corpus.is_empty(), "{}: no corpus", t.name);
        let inputs: Vec<Vec<u8>> = corpus.iter().map(|p| std::fs::read(p).unwrap()).collect();
        // A fixed number of mutations per target, spread over the corpus.
        let budget: usize = if t.reader { 2000 } else { 200 };
        let per_file = budget.div_ceil(corpus.len());
        let mut rng = Rng(0x5eed_0000 + t.name.len() as u64);
        for (i, (path, data)) in corpus.iter().zip(&inputs).enumerate() {
            let run = |d: &[u8], what: &str| {
                if std::panic::catch_unwind(|| (t.run)(d)).is_err() {
                    let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                        .join(format!("rscc-fuzz-{}-{what}", t.name));
                    std::fs::write(&keep, d).unwrap();
                    panic!(
                        "{}: {what} ({}) fails; input kept in {}",
                        t.name,
                        path.display(),
                        keep.display()
                    );
                }
            };
            run(data, "corpus");
            let other = &inputs[(i + 1) % inputs.len()];
            for m in 0..per_file {
                run(&mutate(&mut rng, data, other), &format!("mutation-{i}-{m}"));
                total += 1;
            }
        }
    }
    assert!(total > 1000);
}

#[test]
fn every_recorded_finding_is_fixed() {
    for t in rscc::fuzz::TARGETS {
        for path in files(&fuzz_dir().join("regressions").join(t.name)) {
            let data = std::fs::read(&path).unwrap();
            if std::panic::catch_unwind(|| (t.run)(&data)).is_err() {
                panic!("{}: the finding {} is back", t.name, path.display());
            }
        }
    }
}
