//! The layering of the crate, checked on its sources (`docs/architecture.md`).
//!
//! Every top-level module of `src/` sits on a rung; a module may refer only
//! to modules on rungs strictly below its own (modules on one rung may not
//! refer to each other; `lib.rs` may refer to everything). A reference is a
//! path in code that starts at the crate root: `crate::X…` (also `$crate`),
//! inside a `use crate::{X, Y::…}` group, or `super::…` that climbs to the
//! root; a name the root re-exports (`crate::Db`, `crate::Error`) counts as
//! the module it comes from. Comments (doc links included) and string
//! literals do not count. A top-level module missing from [`RUNGS`] fails the
//! test, so a new module must be placed in the order.
//!
//! Inside each folder, no files may import each other in a cycle (as
//! `layered/layer.rs` and `layered/compressed.rs` once did): the sibling
//! modules a file refers to (`super::x`, `crate::…::x`, groups) must form no
//! cycle. A folder's `mod.rs` is its parent module, which declares and
//! re-exports the files, and is not one of the siblings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The rungs, bottom to top. Modules that do not exist yet are listed so
/// that new wings land in the right place.
const RUNGS: &[&[&str]] = &[
    &["error"],
    &["storage"],
    &["format"],
    &["model", "data"],
    &["pager", "log"],
    &["index"],
    &["tune"],
    &["db"],
    &["lsm"],
    &["join"],
    &["registry"],
    &["fuzzing"],
];

fn rung(module: &str) -> Option<usize> {
    RUNGS.iter().position(|r| r.contains(&module))
}

/// `src` with comments, string and char literals blanked to spaces (line
/// breaks kept, so line numbers stay right).
fn clean(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        let prev_ident = i > 0 && c.get(i - 1).is_some_and(|p| p.is_alphanumeric() || *p == '_');
        if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if !prev_ident && (at(0) == 'r' || (at(0) == 'b' && at(1) == 'r')) && {
            let s = if at(0) == 'b' { 2 } else { 1 };
            let mut h = 0;
            while at(s + h) == '#' {
                h += 1;
            }
            at(s + h) == '"'
        } {
            // Raw string: r#"…"# (or br…).
            let s = if at(0) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(s + hashes) == '#' {
                hashes += 1;
            }
            let open = s + hashes + 1;
            out.extend(std::iter::repeat_n(' ', open));
            i += open;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(c[i]));
                i += 1;
            }
        } else if at(0) == '"' {
            i = quoted(&c, i, '"', &mut out);
        } else if at(0) == '\'' && (at(1) == '\\' || (at(1) != '\'' && at(2) == '\'')) {
            // A char literal ('x', '\n', '\u{1F600}'), not a lifetime.
            i = quoted(&c, i, '\'', &mut out);
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Blanks the literal quoted by `quote` that opens at `c[i]` (escapes
/// skipped, line breaks kept) into `out`; returns the index after it.
fn quoted(c: &[char], mut i: usize, quote: char, out: &mut String) -> usize {
    out.push(' ');
    i += 1;
    while i < c.len() && c[i] != quote {
        if c[i] == '\\' {
            out.push(' ');
            i += 1;
        }
        if let Some(&ch) = c.get(i) {
            out.push(if ch == '\n' { '\n' } else { ' ' });
        }
        i += 1;
    }
    out.push(' ');
    i + 1
}

/// A token of cleaned source: an identifier, `::`, or one punctuation char.
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

fn tokens(clean: &str) -> Vec<Tok> {
    let c: Vec<char> = clean.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The text of token `i`, or `""` past the end.
fn at(toks: &[Tok], i: usize) -> &str {
    toks.get(i).map_or("", |t| t.text.as_str())
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A path from the crate root, and the line it starts on.
#[derive(Debug, Clone, PartialEq)]
struct Ref {
    path: Vec<String>,
    line: usize,
}

/// Parses the path continuing at `toks[i]` (just after a `::`) below
/// `prefix`; appends every full path (group members separately) to `out`.
/// Returns the index after the path.
fn parse_tail(toks: &[Tok], mut i: usize, prefix: Vec<String>, line: usize, out: &mut Vec<Ref>) -> usize {
    let mut path = prefix;
    while let Some(t) = toks.get(i) {
        if t.text == "{" {
            // A group: each member is a path below `path`.
            i += 1;
            loop {
                match toks.get(i).map(|t| t.text.as_str()) {
                    None => return i,
                    Some("}") => return i + 1,
                    Some(",") => i += 1,
                    Some(_) => i = parse_tail(toks, i, path.clone(), line, out),
                }
            }
        }
        if is_ident(&t.text) {
            if t.text != "self" {
                path.push(t.text.clone());
            }
            i += 1;
            if toks.get(i).is_some_and(|t| t.text == "::") {
                i += 1;
                continue;
            }
            if toks.get(i).is_some_and(|t| t.text == "as") {
                i += 2;
            }
        } else if t.text == "*" {
            i += 1;
        }
        break;
    }
    out.push(Ref { path, line });
    i
}

/// Every path from the crate root in `src`, a file of module `module`
/// (`["index", "layered", "kinds"]`; `[]` for `lib.rs`). Paths starting at
/// `super` are resolved through inline `mod x { … }` blocks; in `lib.rs`,
/// `use x::…` paths are relative to the root.
fn references(src: &str, module: &[String]) -> Vec<Ref> {
    let toks = tokens(&clean(src));
    let mut out = Vec::new();
    let mut depth = 0usize;
    // Inline modules: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        match t.text.as_str() {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if is_ident(at(&toks, i + 1)) && at(&toks, i + 2) == "{" => {
                inline.push((at(&toks, i + 1).to_string(), depth + 1));
            }
            _ => {}
        }
        let after_path_sep = i > 0 && toks.get(i - 1).is_some_and(|p| p.text == "::");
        let here = || {
            let mut m = module.to_vec();
            m.extend(inline.iter().map(|(n, _)| n.clone()));
            m
        };
        if !after_path_sep && at(&toks, i + 1) == "::" {
            let base = match t.text.as_str() {
                "crate" => Some(Vec::new()),
                "self" => Some(here()),
                "super" => {
                    let mut m = here();
                    let mut j = i;
                    while toks.get(j).is_some_and(|t| t.text == "super")
                        && toks.get(j + 1).is_some_and(|t| t.text == "::")
                    {
                        m.pop();
                        j += 2;
                    }
                    i = j - 2;
                    Some(m)
                }
                _ => None,
            };
            if let Some(base) = base {
                i = parse_tail(&toks, i + 2, base, t.line, &mut out);
                continue;
            }
        }
        if module.is_empty()
            && t.text == "use"
            && is_ident(at(&toks, i + 1))
            && !["crate", "self", "super", "std"].contains(&at(&toks, i + 1))
        {
            i = parse_tail(&toks, i + 1, Vec::new(), t.line, &mut out);
            continue;
        }
        i += 1;
    }
    out
}

/// The names `lib.rs` re-exports at the root, with the module each comes from.
fn root_exports(lib_src: &str) -> HashMap<String, String> {
    references(lib_src, &[])
        .into_iter()
        .filter(|r| r.path.len() >= 2)
        .filter_map(|r| Some((r.path.last()?.clone(), r.path.first()?.clone())))
        .collect()
}

/// The top-level module a root path refers to, if any: its first segment,
/// or the module a root re-export comes from. `Err` names an unknown name.
fn top_of(path: &[String], exports: &HashMap<String, String>) -> Option<Result<String, String>> {
    let first = path.first()?;
    if rung(first).is_some() {
        return Some(Ok(first.clone()));
    }
    Some(exports.get(first).cloned().ok_or_else(|| first.clone()))
}

/// Violations of the rungs in one file (`name` for messages).
fn upward(name: &str, module: &[String], src: &str, exports: &HashMap<String, String>) -> Vec<String> {
    let Some(me) = module.first() else { return vec![] };
    let Some(mine) = rung(me) else {
        return vec![format!(
            "{name}: top-level module `{me}` is not in the layering order (tests/layering.rs RUNGS); place it there"
        )];
    };
    let mut bad = Vec::new();
    for r in references(src, module) {
        match top_of(&r.path, exports) {
            None => {}
            Some(Err(unknown)) => bad.push(format!(
                "{name}:{}: `crate::{}` names `{unknown}`, which is no top-level module in the layering order",
                r.line,
                r.path.join("::")
            )),
            Some(Ok(other)) if other == *me => {}
            Some(Ok(other)) => {
                let theirs = rung(&other).unwrap_or(usize::MAX);
                if theirs >= mine {
                    bad.push(format!(
                        "{name}:{}: `{me}` (rung {mine}) refers to `crate::{}`; `{other}` (rung {theirs}) is not below it",
                        r.line,
                        r.path.join("::"),
                    ));
                }
            }
        }
    }
    bad
}

/// One source file: its name for messages, its module path, its text.
struct File {
    name: String,
    module: Vec<String>,
    is_mod_rs: bool,
    src: String,
}

/// Imports between sibling files: (folder, from) -> to -> (file name, line).
type Edges = BTreeMap<(Vec<String>, String), BTreeMap<String, (String, usize)>>;

/// Cycles among sibling files of one folder, each as a message naming the
/// files and the line of each import on the cycle.
fn file_cycles(files: &[File]) -> Vec<String> {
    // Folder (parent module) -> sibling names.
    let mut siblings: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        if let Some((last, parent)) = f.module.split_last() {
            siblings.entry(parent.to_vec()).or_default().insert(last.clone());
        }
    }
    let mut edges: Edges = BTreeMap::new();
    for f in files.iter().filter(|f| !f.is_mod_rs) {
        let Some((me, parent)) = f.module.split_last() else {
            continue;
        };
        let sibs = &siblings[parent];
        for r in references(&f.src, &f.module) {
            if r.path.len() > parent.len() && r.path[..parent.len()] == *parent {
                let to = &r.path[parent.len()];
                if to != me && sibs.contains(to) {
                    edges
                        .entry((parent.to_vec(), me.clone()))
                        .or_default()
                        .entry(to.clone())
                        .or_insert((f.name.clone(), r.line));
                }
            }
        }
    }
    // A cycle: a path back to the start; report each cycle once, from its
    // smallest member.
    let mut out = Vec::new();
    for (parent, start) in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            let Some(next) = edges.get(&(parent.clone(), at.clone())) else {
                continue;
            };
            for to in next.keys() {
                if to == start {
                    let mut msg = String::from("file cycle:");
                    let mut ring = trail.clone();
                    ring.push(start.clone());
                    if ring.iter().min() != Some(start) {
                        continue;
                    }
                    for w in ring.windows(2) {
                        let (file, line) = &edges[&(parent.clone(), w[0].clone())][&w[1]];
                        msg.push_str(&format!(" {file}:{line} imports `{}`;", w[1]));
                    }
                    out.push(msg);
                } else if seen.insert(to.clone()) {
                    let mut t = trail.clone();
                    t.push(to.clone());
                    stack.push((to.clone(), t));
                }
            }
        }
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src/").flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The crate's source files with their module paths.
fn crate_files(src: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    rs_files(src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).expect("under src/");
            let mut module: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            let last = module.pop().unwrap_or_default();
            let is_mod_rs = last == "mod.rs";
            if !is_mod_rs && last != "lib.rs" {
                module.push(last.trim_end_matches(".rs").to_string());
            }
            File {
                name: format!("src/{}", rel.display()),
                module,
                is_mod_rs,
                src: std::fs::read_to_string(&p).expect("read a source file"),
            }
        })
        .collect()
}

#[test]
fn no_module_refers_to_one_above_it_and_no_files_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate_files(&src);
    let lib = files.iter().find(|f| f.module.is_empty()).expect("src/lib.rs");
    let exports = root_exports(&lib.src);
    let mut bad: Vec<String> = files
        .iter()
        .flat_map(|f| upward(&f.name, &f.module, &f.src, &exports))
        .collect();
    bad.extend(file_cycles(&files));
    assert!(
        bad.is_empty(),
        "the layering is broken (order, bottom to top: {}):\n{}",
        RUNGS.iter().map(|r| r.join(", ")).collect::<Vec<_>>().join(" < "),
        bad.join("\n")
    );
    assert!(files.len() > 20, "only {} files found under src/", files.len());
}

fn m(path: &str) -> Vec<String> {
    path.split("::").map(String::from).collect()
}

fn exports() -> HashMap<String, String> {
    root_exports("pub mod db;\npub use db::Db;\npub use error::{Error, Result};\n")
}

#[test]
fn an_upward_use_fails() {
    let bad = upward(
        "src/storage/mod.rs",
        &m("storage"),
        "use crate::db::Db;\n",
        &exports(),
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("src/storage/mod.rs:1:") && bad[0].contains("crate::db::Db"),
        "{bad:?}"
    );
}

#[test]
fn an_upward_path_inside_a_function_body_fails() {
    let src =
        "use crate::Result;\n\nfn f() -> Result<()> {\n    let x = 1;\n    crate::tune::air_design(x)\n}\n";
    let bad = upward("src/index/x.rs", &m("index::x"), src, &exports());
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("src/index/x.rs:5:") && bad[0].contains("`tune`"),
        "{bad:?}"
    );
}

#[test]
fn a_grouped_use_is_checked_member_by_member() {
    let src = "use crate::{\n    format::Page,\n    storage::{IoStats, Storage},\n    db::{Db, Options},\n    Error,\n};\n";
    let bad = upward("src/index/x.rs", &m("index::x"), src, &exports());
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad.iter().all(|b| b.contains("crate::db::")), "{bad:?}");
    // A root re-export counts as the module it comes from.
    let bad = upward(
        "src/format/x.rs",
        &m("format::x"),
        "use crate::{Db, Error};\n",
        &exports(),
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("crate::Db") && bad[0].contains("`db`"), "{bad:?}");
}

#[test]
fn comments_and_strings_do_not_count() {
    let src = "//! See [`crate::db::Db`].\n/// Used by crate::db.\n/* crate::tune::Tuner */\nfn f() -> &'static str {\n    let _c = '\"';\n    \"crate::db\"\n}\nconst R: &str = r#\"crate::lsm\"#;\n";
    assert!(upward("src/storage/x.rs", &m("storage::x"), src, &exports()).is_empty());
}

#[test]
fn same_rung_and_unknown_modules_fail() {
    let bad = upward(
        "src/model/x.rs",
        &m("model::x"),
        "use crate::data::Dist;\n",
        &exports(),
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    let bad = upward(
        "src/index/x.rs",
        &m("index::x"),
        "use crate::nowhere::X;\n",
        &exports(),
    );
    assert!(bad.len() == 1 && bad[0].contains("`nowhere`"), "{bad:?}");
    let bad = upward("src/wing/mod.rs", &m("wing"), "", &exports());
    assert!(
        bad.len() == 1 && bad[0].contains("not in the layering order"),
        "{bad:?}"
    );
}

#[test]
fn super_paths_resolve_through_inline_modules() {
    // From src/tune/mod.rs, `super::db` climbs to the root; inside its inline
    // `mod tests`, `super::` is tune itself.
    let src = "mod tests {\n    use super::builders::X;\n}\nuse super::db::Db;\n";
    let refs = references(src, &m("tune"));
    assert_eq!(refs[0].path, m("tune::builders::X"));
    assert_eq!(refs[1].path, m("db::Db"));
    assert_eq!(upward("src/tune/mod.rs", &m("tune"), src, &exports()).len(), 1);
}

#[test]
fn files_importing_each_other_are_a_cycle() {
    let file = |name: &str, module: &str, src: &str| File {
        name: name.into(),
        module: m(module),
        is_mod_rs: name.ends_with("mod.rs"),
        src: src.into(),
    };
    let files = vec![
        file(
            "src/index/layered/mod.rs",
            "index::layered",
            "mod layer;\npub use layer::Access;\n",
        ),
        file(
            "src/index/layered/layer.rs",
            "index::layered::layer",
            "use super::compressed::Decoded;\n",
        ),
        file(
            "src/index/layered/compressed.rs",
            "index::layered::compressed",
            "\nuse crate::index::layered::{layer::BandEntry, LayeredIndex};\n",
        ),
        file(
            "src/index/layered/entries.rs",
            "index::layered::entries",
            "use super::LayeredIndex;\n",
        ),
    ];
    let cycles = file_cycles(&files);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("src/index/layered/compressed.rs:2 imports `layer`")
            && cycles[0].contains("src/index/layered/layer.rs:1 imports `compressed`"),
        "{cycles:?}"
    );
    // Importing the shared file downward is no cycle.
    let files = vec![
        file(
            "src/index/layered/layer.rs",
            "index::layered::layer",
            "use super::entries::BandEntry;\n",
        ),
        file(
            "src/index/layered/compressed.rs",
            "index::layered::compressed",
            "use super::entries::BandEntry;\n",
        ),
        file("src/index/layered/entries.rs", "index::layered::entries", ""),
    ];
    assert!(file_cycles(&files).is_empty());
}
