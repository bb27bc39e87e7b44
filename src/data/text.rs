//! Text keys: words and URLs for the string-key experiments (Liu §5.3).
//!
//! [`generate_text`] makes `n` distinct keys of a [`TextDist`] from a seed,
//! sorted bytewise; [`write_text_keys`] writes them one per line (a *text
//! key file*, what `strata gen --dist words|urls` writes and
//! `strata kvbench --key-file` reads).
//!
//! - `words`: word-like keys of 3 to 20 lowercase letters, made of 1 to 6
//!   syllables (onset, vowel, coda), the shorter words more frequent.
//! - `urls`: `https://www.<host>.<tld>/<seg>/<seg>/...` with 300 hosts drawn
//!   with Zipf popularity (s = 1.1), 0 to 5 path segments (a Zipf choice
//!   among 2,000 words), and an ending of `?id=N`, `item-N.html` or nothing.
//!   Every key shares `https://www.` and most keys of a table share a host
//!   and a first path segment too: long common prefixes, and keys whose 8
//!   bytes after the prefix agree (collisions of the key map).

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64Mcg;

use crate::{Error, Result};

/// A distribution of text keys for `strata gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextDist {
    /// Word-like keys, 3 to 20 bytes.
    Words,
    /// URLs with long shared prefixes (hosts with Zipf popularity).
    Urls,
}

impl TextDist {
    /// Names accepted by [`TextDist::from_str`].
    pub const NAMES: &'static [&'static str] = &["words", "urls"];

    /// The distribution's name.
    pub fn name(self) -> &'static str {
        match self {
            TextDist::Words => "words",
            TextDist::Urls => "urls",
        }
    }
}

impl FromStr for TextDist {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "words" => Ok(TextDist::Words),
            "urls" => Ok(TextDist::Urls),
            _ => Err(Error::invalid(format!(
                "unknown text distribution {s:?}; one of {}",
                TextDist::NAMES.join(", ")
            ))),
        }
    }
}

/// Shortest and longest word of `words`.
pub const WORD_LEN: std::ops::RangeInclusive<usize> = 3..=20;
/// Hosts of `urls`.
pub const URL_HOSTS: u64 = 300;

const ONSETS: &[&str] = &[
    "", "", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br",
    "ch", "cl", "cr", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr",
];
const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "a", "e", "ai", "ea", "ou", "io", "y"];
const CODAS: &[&str] = &["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck"];
const TLDS: &[&str] = &["com", "com", "com", "org", "net", "io", "de", "co.uk"];

/// A random element of a non-empty table.
fn pick<'a>(r: &mut Pcg64Mcg, table: &[&'a str]) -> &'a str {
    table.get(r.random_range(0..table.len())).copied().unwrap_or("")
}

/// One word of 3 to 20 bytes: 1 to 6 syllables, fewer more often.
fn word(r: &mut Pcg64Mcg) -> String {
    loop {
        // Syllables: 1 + a geometric-like count, capped at 6.
        let mut syllables = 1;
        while syllables < 6 && r.random::<f64>() < 0.55 {
            syllables += 1;
        }
        let mut w = String::new();
        for _ in 0..syllables {
            w.push_str(pick(r, ONSETS));
            w.push_str(pick(r, VOWELS));
            w.push_str(pick(r, CODAS));
        }
        if WORD_LEN.contains(&w.len()) {
            return w;
        }
    }
}

/// `n` distinct values of `draw`, sorted; an error if `draw` fails to give
/// `n` distinct values in `100 n + 10,000` draws.
fn distinct(n: usize, mut draw: impl FnMut() -> String) -> Result<Vec<String>> {
    let mut seen: HashSet<String> = HashSet::new();
    seen.try_reserve(n)
        .map_err(|_| Error::invalid(format!("cannot generate {n} text keys: not enough memory")))?;
    let budget = n.saturating_mul(100).saturating_add(10_000);
    let mut draws = 0usize;
    while seen.len() < n {
        if draws >= budget {
            return Err(Error::invalid(format!(
                "gave up after {draws} draws with {} distinct keys of the {n} asked",
                seen.len()
            )));
        }
        draws += 1;
        seen.insert(draw());
    }
    let mut keys: Vec<String> = seen.into_iter().collect();
    keys.sort_unstable();
    Ok(keys)
}

/// Generates `n` distinct keys of `dist` from `seed`, sorted bytewise
/// (strictly increasing). The same arguments give the same keys on every
/// machine.
///
/// Errors: [`Error::InvalidInput`] when the keys do not fit in memory or the
/// distribution runs out of distinct keys.
pub fn generate_text(dist: TextDist, n: usize, seed: u64) -> Result<Vec<String>> {
    let mut r = Pcg64Mcg::seed_from_u64(seed ^ 0x7465_7874_6b65_7973);
    match dist {
        TextDist::Words => distinct(n, || word(&mut r)),
        TextDist::Urls => {
            let hosts: Vec<String> = (0..URL_HOSTS)
                .map(|_| {
                    let tld = pick(&mut r, TLDS);
                    if r.random::<f64>() < 0.5 {
                        format!("https://www.{}-{}.{tld}", word(&mut r), word(&mut r))
                    } else {
                        format!("https://www.{}.{tld}", word(&mut r))
                    }
                })
                .collect();
            let segments: Vec<String> = (0..2000).map(|_| word(&mut r)).collect();
            let zipf = |k: usize| Zipf::new(k as f64, 1.1).map_err(|e| Error::invalid(format!("zipf: {e}")));
            let (host_z, seg_z) = (zipf(hosts.len())?, zipf(segments.len())?);
            distinct(n, || {
                // Zipf draws are in 1..=k.
                let h = host_z.sample(&mut r) as usize - 1;
                let mut url = hosts.get(h).cloned().unwrap_or_default();
                let depth = r.random_range(0..=5);
                for _ in 0..depth {
                    let s = seg_z.sample(&mut r) as usize - 1;
                    url.push('/');
                    url.push_str(segments.get(s).map_or("", String::as_str));
                }
                match r.random_range(0..3) {
                    0 => {
                        if depth == 0 {
                            url.push('/');
                        }
                        url.push_str(&format!("?id={}", r.random_range(0..1_000_000u32)));
                    }
                    1 => url.push_str(&format!("/item-{}.html", r.random_range(0..100_000u32))),
                    _ => {}
                }
                url
            })
        }
    }
}

/// Writes `keys` to `path`, one per line (each followed by `\n`). A key
/// holding a `\n` (or an empty key) could not be read back and is refused
/// before the file is created.
pub fn write_text_keys(path: &Path, keys: &[String]) -> Result<()> {
    if let Some((i, _)) = keys
        .iter()
        .enumerate()
        .find(|(_, k)| k.is_empty() || k.contains('\n'))
    {
        return Err(Error::invalid(format!(
            "text key {i} is empty or holds a newline: it cannot be written one per line"
        )));
    }
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = std::io::BufWriter::new(f);
    for k in keys {
        w.write_all(k.as_bytes())
            .and_then(|_| w.write_all(b"\n"))
            .map_err(|e| Error::io(path, e))?;
    }
    w.flush().map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make(d: TextDist, n: usize, seed: u64) -> Vec<String> {
        generate_text(d, n, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn names_round_trip() {
        for n in TextDist::NAMES {
            assert_eq!(n.parse::<TextDist>().map(|d| d.name()).ok(), Some(*n));
        }
        assert!("fb-like".parse::<TextDist>().is_err());
    }

    #[test]
    fn words_are_sorted_distinct_and_in_range() {
        let w = make(TextDist::Words, 20_000, 1);
        assert_eq!(w.len(), 20_000);
        assert!(w.windows(2).all(|p| p[0] < p[1]), "strictly increasing");
        assert!(w.iter().all(|k| WORD_LEN.contains(&k.len())));
        assert!(w.iter().all(|k| k.bytes().all(|b| b.is_ascii_lowercase())));
        assert_eq!(w, make(TextDist::Words, 20_000, 1), "deterministic");
        assert_ne!(w, make(TextDist::Words, 20_000, 2), "seeded");
    }

    #[test]
    fn urls_share_long_prefixes() {
        let u = make(TextDist::Urls, 20_000, 3);
        assert_eq!(u.len(), 20_000);
        assert!(u.windows(2).all(|p| p[0] < p[1]));
        assert!(u.iter().all(|k| k.starts_with("https://www.")));
        let hosts: HashSet<&str> = u
            .iter()
            .filter_map(|k| k.get(8..).and_then(|rest| rest.split('/').next()))
            .collect();
        assert!(
            hosts.len() > 50 && hosts.len() <= URL_HOSTS as usize,
            "{}",
            hosts.len()
        );
        // Neighbours share far more than the scheme: the mean common prefix
        // of adjacent keys is longer than `https://www.` plus a host.
        let common: usize = u
            .windows(2)
            .map(|p| p[0].bytes().zip(p[1].bytes()).take_while(|(a, b)| a == b).count())
            .sum();
        assert!(common / (u.len() - 1) > 25, "{}", common / (u.len() - 1));
        assert_eq!(u, make(TextDist::Urls, 20_000, 3));
    }

    #[test]
    fn writes_one_key_per_line() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("k.txt");
        let keys = make(TextDist::Words, 100, 4);
        write_text_keys(&p, &keys).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        let back: Vec<String> = text.lines().map(str::to_string).collect();
        assert_eq!(back, keys);
        assert!(write_text_keys(&p, &["a\nb".to_string()]).is_err());
        assert!(write_text_keys(&p, &[String::new()]).is_err());
    }
}
