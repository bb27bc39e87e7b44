//! `strata tune`: choose the layers of an index for a storage profile with
//! AirTune and build it (kind `air`), or only report the design.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};
use strata::index::{self, BuildOptions, IndexSpec, Params};
use strata::storage::StorageProfile;
use strata::tune::{DEFAULT_SAMPLES, Tuned, Tuner, model_spec, options_from_params};
use strata::{Error, Result};

use crate::{KeyFileArgs, progress, read_key_file, resolve_profile};

#[derive(Args, Debug)]
pub(crate) struct TuneArgs {
    #[command(flatten)]
    keys: KeyFileArgs,
    /// Storage profile: optane, nvme, sata-ssd, hdd, azure-ssd, nfs,
    /// custom:LAT_US:BW_MB_S, or local (the device is measured first).
    #[arg(long, default_value = "nvme")]
    profile: String,
    /// Directory to build the tuned index in (kind `air`).
    #[arg(long, required_unless_present_any = ["no_build", "map_latency_us", "profiles"])]
    out: Option<PathBuf>,
    /// Candidates kept per layer of the search (AirIndex's k).
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Memory for pinned top layers (bytes, or 64k, 1M, ...); 0 = the
    /// fastest cold index.
    #[arg(long, default_value = "0")]
    memory_budget: String,
    /// Layer builders: all, airindex, or names joined by `+` (gstep, gband,
    /// eband, zone, zband, leco, leco-d, cpr).
    #[arg(long, default_value = "all")]
    builders: String,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Sampled lookups of the cost model.
    #[arg(long, default_value_t = DEFAULT_SAMPLES)]
    samples: usize,
    /// Page size of the index files.
    #[arg(long, default_value_t = 4096)]
    page: usize,
    /// Write the report (design, timings, comparisons) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Tune and report only (the tuning time is measured alone); write no index.
    #[arg(long)]
    no_build: bool,
    /// Model another layered configuration on the same keys and profile
    /// (repeatable), e.g. btree-static or pgm:epsilon=64.
    #[arg(long = "compare")]
    compare: Vec<String>,
    /// List every fixed design the tuner evaluated (builder × granularity × layers).
    #[arg(long)]
    grid: bool,
    /// Design map: tune for each of these latencies (µs) ...
    #[arg(long, value_delimiter = ',', requires = "map_bandwidth_mb_s")]
    map_latency_us: Vec<f64>,
    /// ... times each of these bandwidths (MB/s); reports the designs, writes no index.
    #[arg(long, value_delimiter = ',', requires = "map_latency_us")]
    map_bandwidth_mb_s: Vec<f64>,
    /// Tune for each of these profiles (comma-separated names, as --profile)
    /// with one tuner, so layers are built once; reports every design (with
    /// --grid and --compare per profile), writes no index.
    #[arg(long, value_delimiter = ',', conflicts_with = "map_latency_us")]
    profiles: Vec<String>,
}

/// Runs `strata tune`.
pub(crate) fn run(a: TuneArgs, quiet: bool) -> Result<()> {
    let keys = read_key_file(&a.keys, quiet)?;
    if !a.map_latency_us.is_empty() || !a.profiles.is_empty() {
        return design_map(&a, &keys, quiet);
    }
    let near = a.out.clone().unwrap_or_else(|| a.keys.data.clone());
    let profile = resolve_profile(&a.profile, &near, quiet)?;
    let profile_param = if a.profile == "local" {
        format!("custom:{}:{}", profile.latency_us(), profile.bandwidth_mb_s())
    } else {
        a.profile.clone()
    };
    let spec: IndexSpec = format!(
        "air:profile={profile_param},top_k={},memory_budget={},builders={},threads={},samples={},page={}",
        a.top_k,
        a.memory_budget,
        a.builders.replace(',', "+"),
        a.threads,
        a.samples,
        a.page
    )
    .parse()?;
    let mut report = json!({
        "spec": spec.to_string(),
        "n": keys.len(),
        "profile": {
            "name": a.profile,
            "latency_us": profile.latency_us(),
            "bandwidth_mb_s": profile.bandwidth_mb_s(),
        },
        "threads": a.threads,
    });
    let per_page = strata::format::records_per_page(a.page);
    let (opts, samples) = options_from_params(&spec.params)?;
    let tuner = Tuner::new(&keys, per_page, a.page, samples)?;
    let mut tuned: Option<Tuned> = None;
    let notes = if a.no_build {
        let pb = progress(
            quiet,
            None,
            &format!("tuning {} keys for {}", keys.len(), a.profile),
        );
        let t0 = Instant::now();
        let t = tuner.tune(&opts);
        let secs = t0.elapsed().as_secs_f64();
        pb.finish_and_clear();
        let t = t?;
        report["tune_s"] = json!(secs);
        report["tune_ns_per_key"] = json!(secs * 1e9 / keys.len().max(1) as f64);
        let notes = t.notes();
        tuned = Some(t);
        notes
    } else {
        let out = a
            .out
            .as_deref()
            .ok_or_else(|| Error::invalid("--out is required"))?;
        let pb = progress(quiet, None, &format!("tuning and building {} keys", keys.len()));
        let built = strata::registry::build(&spec, &keys, out, &BuildOptions { page_size: a.page });
        pb.finish_and_clear();
        let built = built?;
        report["build"] = serde_json::to_value(&built).map_err(|e| Error::invalid(e.to_string()))?;
        report["out"] = json!(out.display().to_string());
        let m = index::Manifest::load(crate::open_dir(out)?.as_ref())?;
        m.description.get("notes").cloned().unwrap_or(Value::Null)
    };
    report["design"] = notes.clone();
    if a.grid {
        let t = match tuned.take() {
            Some(t) => t,
            None => tuner.tune(&opts)?,
        };
        report["fixed"] = serde_json::to_value(&t.fixed).map_err(|e| Error::invalid(e.to_string()))?;
    }
    let mut compared = Vec::new();
    for c in &a.compare {
        let s: IndexSpec = c.parse()?;
        let (cost, views, layers) = model_spec(&s, &keys, a.page, tuner.sample())?;
        compared.push(json!({
            "spec": c,
            "modelled_ns": cost.expected_ns(&profile),
            "read_bytes": cost.mean_bytes(),
            "calls": cost.calls(),
            "layers": views.len(),
            "shape": layers,
        }));
    }
    report["compare"] = Value::Array(compared);
    if let Some(p) = &a.json {
        write_json(p, &report)?;
    }
    print!("{}", table(&report));
    Ok(())
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| Error::invalid(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// What the design's `source` says, in words: AirTune's guided search won,
/// or a fixed design (one builder at one granularity on every layer) was
/// cheaper than what the search found.
fn chosen_by(source: &str) -> String {
    match source {
        "search" => "found by the layer search".to_string(),
        "fixed" => "a fixed design beat the layer search".to_string(),
        other => format!("chosen by {other}"),
    }
}

/// The human-readable report.
fn table(r: &Value) -> String {
    let d = &r["design"];
    let layers = d
        .get("layers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "air for {} (latency {:.1} µs, bandwidth {:.1} MB/s) over {} keys: {} layer(s), {:.1} µs per cold lookup, {:.0} bytes read",
        s(&r["profile"], "name"),
        f(&r["profile"], "latency_us"),
        f(&r["profile"], "bandwidth_mb_s"),
        r["n"],
        layers.len(),
        f(d, "modelled_ns") / 1e3,
        f(d, "expected_read_bytes"),
    );
    if let Some(t) = r.get("tune_s").and_then(Value::as_f64) {
        let _ = writeln!(
            out,
            "tuned in {t:.2} s ({:.0} ns per key)",
            f(r, "tune_ns_per_key")
        );
    }
    if let Some(b) = r.get("build") {
        let _ = writeln!(
            out,
            "tuned and built in {:.2} s into {}",
            f(b, "build_s"),
            s(r, "out")
        );
    }
    // Per layer: the bytes of the layer below (or of the data) a lookup
    // reads after this layer's prediction, and that read's modelled time.
    let _ = writeln!(
        out,
        "{:<6} {:<7} {:>9} {:<28} {:>10} {:>11} {:>8} {:>14} {:>15}",
        "layer",
        "builder",
        "λ (B)",
        "param",
        "entries",
        "bytes",
        "pinned",
        "read below (B)",
        "read below (µs)"
    );
    let page = r["build"]["config"]["page"].as_f64().unwrap_or(4096.0);
    for (i, l) in layers.iter().enumerate().rev() {
        let name = if i + 1 == layers.len() {
            format!("{i} root")
        } else {
            i.to_string()
        };
        let _ = writeln!(
            out,
            "{:<6} {:<7} {:>9} {:<28} {:>10} {:>11} {:>8} {:>14.0} {:>15.1}",
            name,
            s(l, "builder"),
            s(l, "lambda"),
            s(l, "param"),
            s(l, "entries"),
            s(l, "bytes"),
            s(l, "resident"),
            f(l, "reads_below_bytes"),
            f(l, "reads_below_ns") / 1e3,
        );
    }
    let _ = writeln!(
        out,
        "root read {:.0} bytes: {:.1} µs; {}; best fixed design {}",
        f(&d["root"], "bytes"),
        f(&d["root"], "modelled_ns") / 1e3,
        chosen_by(&s(d, "source")),
        d.get("best_fixed").map_or(String::new(), |b| format!(
            "{}(λ={}) × {}: {:.1} µs",
            s(b, "builder"),
            s(b, "lambda"),
            s(b, "layers"),
            f(b, "cost_ns") / 1e3
        )),
    );
    let _ = page;
    if let Some(fixed) = r.get("fixed").and_then(Value::as_array) {
        let _ = writeln!(out, "fixed designs ({}):", fixed.len());
        for x in fixed {
            let _ = writeln!(
                out,
                "  {:<7} λ={:<9} layers={} {:>12.1} µs {:>12.0} bytes",
                s(x, "builder"),
                s(x, "lambda"),
                s(x, "layers"),
                f(x, "cost_ns") / 1e3,
                f(x, "read_bytes")
            );
        }
    }
    if let Some(cmp) = r
        .get("compare")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    {
        let air = f(d, "modelled_ns");
        let _ = writeln!(
            out,
            "{:<34} {:>12} {:>12} {:>8} {:>10}",
            "modelled", "µs", "bytes", "layers", "vs air"
        );
        for c in cmp {
            let ns = f(c, "modelled_ns");
            let _ = writeln!(
                out,
                "{:<34} {:>12.1} {:>12.0} {:>8} {:>9.2}x",
                s(c, "spec"),
                ns / 1e3,
                f(c, "read_bytes"),
                s(c, "layers"),
                if air > 0.0 { ns / air } else { 0.0 }
            );
        }
    }
    out
}

/// Tunes for every (latency, bandwidth) pair, or for every profile of
/// `--profiles`, with one tuner (layers are built once and shared) and
/// reports each design; `--compare` specs are modelled once and costed under
/// every profile.
fn design_map(a: &TuneArgs, keys: &[u64], quiet: bool) -> Result<()> {
    let per_page = strata::format::records_per_page(a.page);
    let params = Params::from_map(serde_json::Map::from_iter([
        ("top_k".to_string(), json!(a.top_k)),
        ("builders".to_string(), json!(a.builders.replace(',', "+"))),
        ("threads".to_string(), json!(a.threads)),
        ("samples".to_string(), json!(a.samples)),
        ("memory_budget".to_string(), json!(a.memory_budget)),
    ]));
    let (base, samples) = options_from_params(&params)?;
    let mut profiles: Vec<StorageProfile> = Vec::new();
    for name in &a.profiles {
        profiles.push(resolve_profile(name, &a.keys.data, quiet)?);
    }
    for &lat in &a.map_latency_us {
        for &bw in &a.map_bandwidth_mb_s {
            profiles.push(StorageProfile::new(format!("custom:{lat}:{bw}"), lat, bw * 1e6)?);
        }
    }
    let tuner = Tuner::new(keys, per_page, a.page, samples)?;
    let mut compared = Vec::new();
    for c in &a.compare {
        let s: IndexSpec = c.parse()?;
        let (cost, views, shape) = model_spec(&s, keys, a.page, tuner.sample())?;
        compared.push((c.clone(), cost, views.len(), shape));
    }
    let pb = progress(quiet, Some(profiles.len() as u64), "tuning");
    let t0 = Instant::now();
    let mut points = Vec::new();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:>12} {:>12} {:>7} {:>14} {:>14} {:>12}  layers",
        "latency µs", "MB/s", "height", "read bytes", "µs", "best fixed µs"
    );
    for prof in &profiles {
        let mut o = base.clone();
        o.profile = prof.clone();
        let t1 = Instant::now();
        let t = tuner.tune(&o)?;
        let tune_s = t1.elapsed().as_secs_f64();
        let names: Vec<String> = t
            .layers
            .iter()
            .map(|l| format!("{}({})", l.builder, l.lambda))
            .collect();
        let best_fixed = t.best_fixed().map_or(f64::NAN, |b| b.cost_ns);
        let _ = writeln!(
            text,
            "{:>12.1} {:>12.1} {:>7} {:>14.0} {:>14.1} {:>12.1}  {}",
            prof.latency_us(),
            prof.bandwidth_mb_s(),
            t.layers.len(),
            t.read_bytes,
            t.cost_ns / 1e3,
            best_fixed / 1e3,
            names.join(" < ")
        );
        let mut point = json!({
            "profile": prof.name,
            "latency_us": prof.latency_us(),
            "bandwidth_mb_s": prof.bandwidth_mb_s(),
            "layers": t.layers.len(),
            "read_bytes": t.read_bytes,
            "cost_ns": t.cost_ns,
            "builders": names,
            "source": t.source,
            "tune_s": tune_s,
        });
        if !a.profiles.is_empty() {
            point["design"] = t.notes();
            point["compare"] = Value::Array(
                compared
                    .iter()
                    .map(|(spec, cost, layers, shape)| {
                        json!({
                            "spec": spec,
                            "modelled_ns": cost.expected_ns(prof),
                            "read_bytes": cost.mean_bytes(),
                            "calls": cost.calls(),
                            "layers": layers,
                            "shape": shape,
                        })
                    })
                    .collect(),
            );
        }
        if a.grid {
            point["fixed"] = serde_json::to_value(&t.fixed).map_err(|e| Error::invalid(e.to_string()))?;
        }
        points.push(point);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let report = json!({
        "n": keys.len(),
        "top_k": a.top_k,
        "builders": a.builders,
        "latency_us": a.map_latency_us,
        "bandwidth_mb_s": a.map_bandwidth_mb_s,
        "profiles": a.profiles,
        "points": points,
        "map_s": t0.elapsed().as_secs_f64(),
    });
    if let Some(p) = &a.json {
        write_json(p, &report)?;
    }
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunes_builds_and_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("k.keys");
        let keys = strata::data::generate("fb-like".parse().unwrap(), 50_000, 1).unwrap();
        strata::format::write_keys(&data, &keys).unwrap();
        let out = tmp.path().join("idx");
        let json_out = tmp.path().join("r.json");
        let args = TuneArgs {
            keys: KeyFileArgs {
                data: data.clone(),
                dedup: false,
                u32: false,
            },
            profile: "nfs".into(),
            out: Some(out.clone()),
            top_k: 2,
            memory_budget: "0".into(),
            builders: "all".into(),
            threads: 1,
            samples: 5000,
            page: 4096,
            json: Some(json_out.clone()),
            no_build: false,
            compare: vec!["btree-static".into(), "pgm:epsilon=64".into()],
            grid: true,
            map_latency_us: vec![],
            map_bandwidth_mb_s: vec![],
            profiles: vec![],
        };
        run(args, true).unwrap();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
        let air = r["design"]["modelled_ns"].as_f64().unwrap();
        assert!(air > 0.0);
        for c in r["compare"].as_array().unwrap() {
            assert!(air <= c["modelled_ns"].as_f64().unwrap(), "{c}");
        }
        assert!(!r["fixed"].as_array().unwrap().is_empty());
        let idx = strata::registry::open(&out, &Default::default()).unwrap();
        assert_eq!(idx.get(keys[777]).unwrap(), Some(777));
        let t = table(&r);
        assert!(t.contains("root"), "{t}");
        // The column of a byte count says so; the winner's source in words.
        assert!(t.contains("read below (B)") && !t.contains("reads below"), "{t}");
        assert!(!t.contains("source"), "{t}");
        assert!(
            t.contains("found by the layer search") || t.contains("a fixed design beat the layer search"),
            "{t}"
        );
    }

    #[test]
    fn design_map_and_bad_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("k.keys");
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * i).collect();
        strata::format::write_keys(&data, &keys).unwrap();
        let json_out = tmp.path().join("m.json");
        let base = || TuneArgs {
            keys: KeyFileArgs {
                data: data.clone(),
                dedup: false,
                u32: false,
            },
            profile: "nvme".into(),
            out: None,
            top_k: 2,
            memory_budget: "0".into(),
            builders: "airindex".into(),
            threads: 0,
            samples: 2000,
            page: 4096,
            json: Some(json_out.clone()),
            no_build: true,
            compare: vec![],
            grid: false,
            map_latency_us: vec![1.0, 1000.0],
            map_bandwidth_mb_s: vec![1.0, 1000.0],
            profiles: vec![],
        };
        run(base(), true).unwrap();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
        assert_eq!(r["points"].as_array().unwrap().len(), 4);
        // Named profiles with the grid and comparisons, one tuner.
        let mut named = base();
        named.map_latency_us = vec![];
        named.map_bandwidth_mb_s = vec![];
        named.profiles = vec!["nvme".into(), "nfs".into()];
        named.grid = true;
        named.compare = vec!["btree-static".into()];
        run(named, true).unwrap();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
        let points = r["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        for p in points {
            let air = p["cost_ns"].as_f64().unwrap();
            assert!(air <= p["compare"][0]["modelled_ns"].as_f64().unwrap());
            assert!(!p["fixed"].as_array().unwrap().is_empty());
            assert_eq!(p["design"]["modelled_ns"].as_f64().unwrap(), air);
        }
        assert_eq!(points[1]["profile"], "nfs");
        let mut bad = base();
        bad.map_latency_us = vec![];
        bad.memory_budget = "lots".into();
        assert!(run(bad, true).is_err());
        let mut bad = base();
        bad.map_latency_us = vec![];
        bad.compare = vec!["btree".into()];
        assert!(run(bad, true).is_err());
        let mut bad = base();
        bad.builders = "nope".into();
        assert!(run(bad, true).is_err());
    }
}
