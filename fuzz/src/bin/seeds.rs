//! Writes the seed corpora: `corpus/<target>/seed-<i>` for every target
//! (valid encodings of at most 16 KiB), after running each through its
//! target. `RUSTFLAGS="--cfg fuzzing" cargo +nightly run --bin seeds [-- DIR]`
//! (the library's fuzz entry points exist only under `cfg(fuzzing)`; default: `corpus` beside
//! this crate's manifest).

fn main() {
    let root = std::env::args().nth(1).map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        Into::into,
    );
    for (target, inputs) in strata_fuzz::seeds() {
        assert!(!inputs.is_empty(), "no seeds for {target}");
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, input) in inputs.iter().enumerate() {
            strata_fuzz::run(target, input);
            std::fs::write(dir.join(format!("seed-{i}")), input).unwrap();
        }
        println!("{target}: {} seeds", inputs.len());
    }
}
