//! Index specifications: `KIND[:key=value,...]`.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::{Error, Result};

/// An index kind and its parameters, as written on the command line:
/// `pgm:epsilon=64,epsilon_rec=4`.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    /// Kind name.
    pub kind: String,
    /// Parameters as given.
    pub params: Params,
}

impl IndexSpec {
    /// A spec with no parameters.
    pub fn new(kind: &str) -> Self {
        IndexSpec {
            kind: kind.to_string(),
            params: Params::default(),
        }
    }

    /// Adds a parameter.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.params.map.insert(key.to_string(), value.into());
        self
    }
}

impl FromStr for IndexSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (s, None),
        };
        if kind.is_empty() {
            return Err(Error::invalid(format!("empty index kind in {s:?}")));
        }
        let mut map = Map::new();
        for part in rest
            .into_iter()
            .flat_map(|r| r.split(','))
            .filter(|p| !p.is_empty())
        {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Error::invalid(format!("parameter {part:?} of {s:?} must be key=value")))?;
            map.insert(k.trim().to_string(), parse_value(v.trim()));
        }
        Ok(IndexSpec {
            kind: kind.to_string(),
            params: Params::from_map(map),
        })
    }
}

impl fmt::Display for IndexSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        let mut first = true;
        for (k, v) in &self.params.map {
            write!(f, "{}{}={}", if first { ":" } else { "," }, k, value_text(v))?;
            first = false;
        }
        Ok(())
    }
}

fn parse_value(v: &str) -> Value {
    if let Ok(i) = v.parse::<u64>() {
        return Value::from(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        if f.is_finite() {
            return Value::from(f);
        }
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(v.to_string()),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Parameters of an index kind. Getters record the value they return
/// (given or default) so the *resolved* configuration can be stored with the
/// index and printed in reports; [`Params::finish`] rejects parameters that
/// no getter asked for (typos).
#[derive(Debug, Default)]
pub struct Params {
    map: Map<String, Value>,
    /// Behind a lock so a spec can move to another thread (a build on a pool
    /// of its own: `strata build --threads`).
    resolved: Mutex<Map<String, Value>>,
}

impl Clone for Params {
    fn clone(&self) -> Self {
        Params {
            map: self.map.clone(),
            resolved: Mutex::new(self.resolved_map().clone()),
        }
    }
}

impl Params {
    /// Parameters from a JSON object.
    pub fn from_map(map: Map<String, Value>) -> Self {
        Params {
            map,
            resolved: Mutex::new(Map::new()),
        }
    }

    /// The parameters as given.
    pub fn given(&self) -> &Map<String, Value> {
        &self.map
    }

    fn record(&self, key: &str, v: Value) {
        self.resolved_map().insert(key.to_string(), v);
    }

    /// The resolved map (a poisoned lock still holds a whole map: an insert
    /// cannot leave it half-written).
    fn resolved_map(&self) -> std::sync::MutexGuard<'_, Map<String, Value>> {
        self.resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An unsigned integer parameter.
    pub fn u64(&self, key: &str, default: u64) -> Result<u64> {
        let v = match self.map.get(key) {
            None => default,
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19)
                        .map(|f| f as u64)
                })
                .ok_or_else(|| {
                    Error::invalid(format!("parameter {key} must be a non-negative integer, got {n}"))
                })?,
            Some(Value::String(s)) => parse_size(s).ok_or_else(|| {
                Error::invalid(format!(
                    "parameter {key} must be a non-negative integer, got {s:?}"
                ))
            })?,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "parameter {key} must be an integer, got {other}"
                )));
            }
        };
        self.record(key, Value::from(v));
        Ok(v)
    }

    /// A `usize` parameter.
    pub fn usize(&self, key: &str, default: usize) -> Result<usize> {
        let v = self.u64(key, default as u64)?;
        usize::try_from(v).map_err(|_| Error::invalid(format!("parameter {key}={v} is too large")))
    }

    /// A floating-point parameter.
    pub fn f64(&self, key: &str, default: f64) -> Result<f64> {
        let v = match self.map.get(key) {
            None => default,
            Some(Value::Number(n)) => n.as_f64().unwrap_or(default),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "parameter {key} must be a number, got {other}"
                )));
            }
        };
        self.record(key, Value::from(v));
        Ok(v)
    }

    /// A string parameter.
    pub fn str(&self, key: &str, default: &str) -> Result<String> {
        let v = match self.map.get(key) {
            None => default.to_string(),
            Some(v) => value_text(v),
        };
        self.record(key, Value::String(v.clone()));
        Ok(v)
    }

    /// A boolean parameter.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        let v = match self.map.get(key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) if n.as_u64() == Some(0) => false,
            Some(Value::Number(n)) if n.as_u64() == Some(1) => true,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "parameter {key} must be true or false, got {other}"
                )));
            }
        };
        self.record(key, Value::Bool(v));
        Ok(v)
    }

    /// Rejects parameters that were never asked for.
    pub fn finish(&self, kind: &str) -> Result<()> {
        let resolved = self.resolved_map();
        let unknown: Vec<&String> = self.map.keys().filter(|k| !resolved.contains_key(*k)).collect();
        if !unknown.is_empty() {
            let known: Vec<&String> = resolved.keys().collect();
            return Err(Error::invalid(format!(
                "unknown parameter(s) {unknown:?} for index kind {kind}; it takes {known:?}"
            )));
        }
        Ok(())
    }

    /// The resolved configuration: every parameter asked for, with its value.
    pub fn resolved(&self) -> Map<String, Value> {
        self.resolved_map().clone()
    }
}

/// One parameter an index kind takes, for `strata list` and the docs: its
/// name and what it means. Its default is not written here but found by
/// asking the kind ([`Registry::params_of`](super::Registry::params_of)),
/// so it is always the value a build uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ParamDoc {
    /// The name, as in `kind:name=value`.
    pub name: &'static str,
    /// What it sets and which values it takes, in one sentence.
    pub meaning: &'static str,
}

impl ParamDoc {
    /// A parameter `name` meaning `meaning`.
    pub const fn new(name: &'static str, meaning: &'static str) -> Self {
        ParamDoc { name, meaning }
    }
}

/// A parameter of a kind with its default: what
/// [`Registry::params_of`](super::Registry::params_of) returns and `strata
/// list --json` prints.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KindParam {
    /// The name, as in `kind:name=value`.
    pub name: &'static str,
    /// The value a build takes when the parameter is not given, as the
    /// kind resolves it (`null`: the kind does without it, as its meaning
    /// says; `pgm-disk`'s `page_slack`).
    pub default: Option<Value>,
    /// What it sets and which values it takes.
    pub meaning: &'static str,
}

/// Parses `4096`, `64k`, `16KiB`, `8M`, `1g` as a byte count.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        let s: IndexSpec = "pgm:epsilon=64,mode=fast,x=1.5".parse().unwrap();
        assert_eq!(s.kind, "pgm");
        assert_eq!(s.params.u64("epsilon", 1).unwrap(), 64);
        assert_eq!(s.params.str("mode", "").unwrap(), "fast");
        assert_eq!(s.params.f64("x", 0.0).unwrap(), 1.5);
        assert_eq!(s.params.u64("missing", 7).unwrap(), 7);
        s.params.finish("pgm").unwrap();
        assert_eq!(s.params.resolved().len(), 4);
        assert_eq!(s.to_string(), "pgm:epsilon=64,mode=fast,x=1.5");
        let t: IndexSpec = "btree".parse().unwrap();
        assert_eq!(t.kind, "btree");
        assert!("pgm:epsilon".parse::<IndexSpec>().is_err());
        assert!(":x=1".parse::<IndexSpec>().is_err());
    }

    #[test]
    fn unknown_and_bad_params_are_errors() {
        let s: IndexSpec = "pgm:epsilom=64".parse().unwrap();
        s.params.u64("epsilon", 64).unwrap();
        let e = s.params.finish("pgm").unwrap_err().to_string();
        assert!(e.contains("epsilom"), "{e}");
        let b: IndexSpec = "pgm:epsilon=-3".parse().unwrap();
        assert!(b.params.u64("epsilon", 1).is_err());
        let c: IndexSpec = "btree:page=16k".parse().unwrap();
        assert_eq!(c.params.u64("page", 4096).unwrap(), 16384);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("8M"), Some(8 << 20));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
    }
}
