//! The server's layers, checked from its sources: every module of
//! `server/src` belongs to the layer the crate docs (`src/lib.rs`, "Layers")
//! put it in, and names only modules its layer may name. The test reads
//! every `crate::` and `super::` path of the product code (comments and
//! `#[cfg(test)]` modules left out) and fails naming the file and the path
//! that break a rule; it also fails when the top-level modules form an
//! import circle, and prints the sizes of the graph's strongly connected
//! components (the largest is the "largest circle" figure).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, as the crate docs list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    /// Names other base modules only.
    Base,
    /// The render library; names base modules only.
    Web,
    /// Names base modules, `web`, and features before it in the order (the
    /// index).
    Feature(usize),
    /// Names anything.
    Assembly,
}

/// A node of the import graph: a top-level module.
type Node = String;

struct Layers {
    of: BTreeMap<String, Layer>,
}

impl Layers {
    /// Reads the "Layers" list of the crate docs: lines `//! N. name: ...`
    /// naming modules in backticks, continued on indented lines.
    fn from_crate_docs(lib: &str) -> Layers {
        let mut entries: Vec<(String, Vec<String>)> = Vec::new();
        for line in lib.lines() {
            let Some(text) = line.strip_prefix("//!") else {
                continue;
            };
            let trimmed = text.trim_start();
            let starts_entry = trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if starts_entry && text.starts_with(' ') && !text.starts_with("  ") {
                let (_, rest) = trimmed.split_once(". ").expect("entry");
                let (name, body) = rest.split_once(':').unwrap_or((rest, ""));
                entries.push((name.trim().to_owned(), backticked(body)));
            } else if text.starts_with("    ") {
                if let Some((_, names)) = entries.last_mut() {
                    names.extend(backticked(text));
                }
            }
        }
        let mut of = BTreeMap::new();
        let mut features = 0;
        for (name, modules) in entries {
            for module in modules {
                let layer = match name.as_str() {
                    "base" => Layer::Base,
                    "web" => Layer::Web,
                    "features" => {
                        features += 1;
                        Layer::Feature(features)
                    }
                    "assembly" => Layer::Assembly,
                    other => panic!("src/lib.rs names an unknown layer {other:?}"),
                };
                of.insert(module, layer);
            }
        }
        assert!(
            of.values().any(|l| matches!(l, Layer::Feature(_))),
            "src/lib.rs lists no layers (`//! N. layer: `module`, ...` lines): {of:?}"
        );
        Layers { of }
    }

    fn layer(&self, node: &str) -> Option<Layer> {
        self.of.get(node).copied()
    }

    /// Why `from` may not name `to`, if it may not.
    fn refuses(&self, from: &str, to: &str) -> Option<&'static str> {
        let (a, b) = (self.layer(from)?, self.layer(to)?);
        match a {
            Layer::Base if b != Layer::Base => Some("a base module names a module above the base"),
            Layer::Web if b != Layer::Base => Some("`web` names a module other than base modules"),
            Layer::Feature(i) => match b {
                Layer::Feature(j) if j > i => Some("a feature names one after it in the order"),
                Layer::Assembly => Some("a feature names the assembly"),
                _ => None,
            },
            _ => None,
        }
    }
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// One `crate::`/`super::` path of a file, resolved to the node it names.
struct Import {
    file: String,
    path: String,
    to: Node,
}

/// The source without comments and `#[cfg(test)]` modules.
pub(crate) fn product_code(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        let code = line.split("//").next().unwrap_or_default();
        if code.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.contains('{'))
        {
            let mut depth = 0i64;
            for skipped in lines.by_ref() {
                let code = skipped.split("//").next().unwrap_or_default();
                depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                if depth <= 0 && code.contains('}') {
                    break;
                }
            }
            continue;
        }
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// A source file's product code with all whitespace runs made one space,
/// so that the SQL of a `\`-continued string literal reads as one line.
pub(crate) fn product_sql(file: &Path) -> String {
    product_code(&std::fs::read_to_string(file).expect("read"))
        .replace("\\\n", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The module path of a file under `src` (`bisect/engine.rs` -> bisect,
/// engine; `bisect/mod.rs` -> bisect; `lib.rs` -> nothing).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The node of a module path: its top-level module.
fn node_of(path: &[String]) -> Node {
    match path {
        [] => "lib".to_owned(),
        [top, ..] => top.clone(),
    }
}

pub(crate) fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first-level names of a `{a, b::c, d::{e}}` group.
fn group_heads(group: &str) -> Vec<(String, String)> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let inner = &group[1..];
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                push_head(&inner[start..i], &mut heads);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                push_head(&inner[start..i], &mut heads);
                start = i + 1;
            }
            _ => {}
        }
    }
    heads
}

fn push_head(item: &str, heads: &mut Vec<(String, String)>) {
    let item = item.trim();
    let head = identifier(item);
    if !head.is_empty() {
        let rest = item[head.len()..].strip_prefix("::").unwrap_or_default();
        heads.push((head.to_owned(), identifier(rest).to_owned()));
    }
}

/// Every path of `code` starting at `crate::` or `super::`, as (module path
/// named, the text found).
fn paths(code: &str, here: &[String]) -> Vec<(Vec<String>, String)> {
    let starts = code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
        .map(|(at, _)| at);
    let mut found = Vec::new();
    for at in starts {
        // `super::super::` is one path; `kbot_crate::` is none.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at..];
        let text: String = rest
            .chars()
            .take_while(|c| !matches!(c, ';' | '\n'))
            .take(80)
            .collect();
        let (base, tail) = match rest.strip_prefix("crate::") {
            Some(tail) => (Vec::new(), tail),
            None => {
                let (mut base, mut tail) = (here.to_vec(), rest);
                while let Some(t) = tail.strip_prefix("super::") {
                    base.pop();
                    tail = t;
                }
                (base, tail)
            }
        };
        let heads = if tail.starts_with('{') {
            group_heads(tail)
        } else {
            let head = identifier(tail);
            let next = tail[head.len()..]
                .strip_prefix("::")
                .map(identifier)
                .unwrap_or_default();
            vec![(head.to_owned(), next.to_owned())]
        };
        for (head, next) in heads {
            let mut path = base.clone();
            path.push(head);
            if !next.is_empty() {
                path.push(next);
            }
            found.push((path, text.clone()));
        }
    }
    found
}

struct Graph {
    /// Node -> the files of it.
    files: BTreeMap<Node, BTreeSet<String>>,
    imports: BTreeMap<Node, Vec<Import>>,
}

fn read_graph(src: &Path) -> Graph {
    let files = kbot_testkit::files_under(src, Some("rs"));
    let mut graph = Graph {
        files: BTreeMap::new(),
        imports: BTreeMap::new(),
    };
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let here = module_path(rel);
        let from = node_of(&here);
        let rel_name = rel.to_string_lossy().into_owned();
        graph
            .files
            .entry(from.clone())
            .or_default()
            .insert(rel_name.clone());
        let code = product_code(&std::fs::read_to_string(&file).expect("read"));
        for (path, text) in paths(&code, &here) {
            let to = node_of(&path);
            if to != from && !path.is_empty() {
                graph.imports.entry(from.clone()).or_default().push(Import {
                    file: rel_name.clone(),
                    path: text,
                    to,
                });
            }
        }
    }
    graph
}

/// Strongly connected components (Tarjan), largest first.
fn components(graph: &Graph) -> Vec<Vec<Node>> {
    struct Walk<'g> {
        edges: BTreeMap<&'g str, BTreeSet<&'g str>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<Node>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on_stack.insert(v);
        let next: Vec<&str> = w.edges.get(v).into_iter().flatten().copied().collect();
        for u in next {
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.on_stack.contains(u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                component.push(u.to_owned());
                if u == v {
                    break;
                }
            }
            w.out.push(component);
        }
    }
    let mut walk = Walk {
        edges: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for (from, imports) in &graph.imports {
        for import in imports {
            if graph.files.contains_key(&import.to) {
                walk.edges
                    .entry(from.as_str())
                    .or_default()
                    .insert(import.to.as_str());
            }
        }
    }
    for node in graph.files.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    let mut out = walk.out;
    out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layers() -> Layers {
    Layers::from_crate_docs(&std::fs::read_to_string(src_dir().join("lib.rs")).expect("lib.rs"))
}

#[test]
fn every_module_has_a_layer() {
    let (layers, graph) = (layers(), read_graph(&src_dir()));
    let unplaced: Vec<&Node> = graph
        .files
        .keys()
        .filter(|node| layers.layer(node).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer of src/lib.rs's \"Layers\" list: {unplaced:?}"
    );
}

#[test]
fn modules_name_only_what_their_layer_may() {
    let (layers, graph) = (layers(), read_graph(&src_dir()));
    let mut broken = Vec::new();
    for (from, imports) in &graph.imports {
        for import in imports {
            if let Some(why) = layers.refuses(from, &import.to) {
                broken.push(format!(
                    "{}: `{}` ({from} -> {}): {why}",
                    import.file, import.path, import.to
                ));
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn top_level_modules_form_no_circle() {
    let library = read_graph(&src_dir());
    let components = components(&library);
    let sizes: Vec<usize> = components.iter().map(Vec::len).collect();
    let largest = &components[0];
    let files: usize = largest.iter().map(|n| library.files[n].len()).sum();
    println!(
        "import graph of server/src: {} modules; strongly connected component sizes {sizes:?}; \
         largest circle: {} modules, {files} files {largest:?}",
        library.files.len(),
        largest.len(),
    );
    assert_eq!(
        largest.len(),
        1,
        "these top-level modules import each other in a circle: {largest:?}"
    );
}

/// The reader itself: a planted import of each kind is found and refused.
#[test]
fn the_reader_finds_planted_imports() {
    let code = product_code(
        "use crate::{error::Error, web::{render, PageResult}};\n\
         // use crate::dashboard;\n\
         fn f() { crate::bisect::advance_all(); super::super::mail::x(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::routes;\n}\n",
    );
    let here = vec!["comparisons".to_owned(), "store".to_owned()];
    let named: BTreeSet<Node> = paths(&code, &here)
        .iter()
        .map(|(p, _)| node_of(p))
        .collect();
    let expected: BTreeSet<Node> = ["error", "web", "bisect", "mail"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(named, expected);
    let layers = layers();
    assert!(layers.refuses("comparisons", "bisect").is_some());
    assert!(layers.refuses("error", "dashboard").is_some());
    assert!(layers.refuses("web", "submissions").is_some());
    assert!(layers.refuses("bisect", "comparisons").is_none());
}
