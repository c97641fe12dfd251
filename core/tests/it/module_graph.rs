//! No import circle between kbot-core's files: every `crate::` path outside
//! comments and test modules is an edge from the file's module to the
//! deepest module the path names, every folder module (`job/mod.rs`) has an
//! edge to each of its files (it re-exports them, so naming `crate::job`
//! reaches them all), and the graph has no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read core/src") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `job/plan.rs` -> `job::plan`, `job/mod.rs` -> `job`, `lib.rs` -> ``.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without its test module and comment lines.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules named by `crate::a::b::Item` paths in `code`, each cut to
/// the deepest prefix that is a module.
fn targets(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let mut best = None;
        let mut path = String::new();
        for seg in rest[..end].split("::").filter(|s| !s.is_empty()) {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(seg);
            if modules.contains(&path) {
                best = Some(path.clone());
            } else {
                break;
            }
        }
        out.extend(best);
    }
    out
}

fn cycle_from(
    node: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    stack: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = stack.iter().position(|n| n == node) {
        let mut cycle = stack[i..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    stack.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(c) = cycle_from(next, graph, stack, done) {
            return Some(c);
        }
    }
    stack.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn no_file_of_core_imports_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = module_of(&src, file);
        let text = std::fs::read_to_string(file).expect("read source");
        let named: Vec<String> = targets(&code(&text), &modules)
            .into_iter()
            .filter(|t| *t != me && !me.is_empty())
            .collect();
        graph.entry(me).or_default().extend(named);
    }
    for module in &modules {
        if let Some((parent, _)) = module.rsplit_once("::") {
            graph
                .entry(parent.to_string())
                .or_default()
                .insert(module.clone());
        }
    }
    assert!(
        graph["needs"].contains("machine") && graph["job::resolve"].contains("units"),
        "the scan sees imports: {graph:?}"
    );
    assert!(graph["machine"].is_empty(), "machine.rs is a leaf");
    assert!(graph["units"].is_empty(), "units.rs is a leaf");
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = cycle_from(node, &graph, &mut Vec::new(), &mut done) {
            panic!("import circle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn a_circle_is_found_and_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &[][..]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    let cycle = cycle_from("a", &graph, &mut Vec::new(), &mut BTreeSet::new());
    assert_eq!(
        cycle.map(|c| c.join(" -> ")).as_deref(),
        Some("a -> b -> c -> a")
    );
    assert_eq!(
        cycle_from("d", &graph, &mut Vec::new(), &mut BTreeSet::new()),
        None
    );
}
