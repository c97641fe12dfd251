//! Every table has owners (`kbot_server::TABLE_OWNERS`, beside the layers in
//! `src/lib.rs`): only an owner writes it (`INSERT INTO`, `UPDATE`,
//! `DELETE FROM`), and a module reads it (`FROM`, `JOIN`) only when an
//! owner is in its layer or below; the dashboard, the pages that span
//! features, reads anything. The test reads the product code of
//! `server/src` (comments and `#[cfg(test)]` modules left out) and fails on
//! any break, naming the files. A module that needs another's table calls
//! its owner (the jobs lease an agent with `agents::BUSY_SQL`, a bisection
//! tells its regressions its state, a list registers its address with
//! `mail::followers`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kbot_server::TABLE_OWNERS;

use crate::layering::{identifier, product_sql};

/// The verbs and the SQL words that make them.
const VERBS: [(&str, &[&str]); 2] = [
    ("writes", &["INSERT INTO", "UPDATE", "DELETE FROM"]),
    ("reads", &["FROM", "JOIN"]),
];

/// The layer order of the features, from the crate docs' list.
fn feature_order() -> Vec<String> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let line = lib
        .lines()
        .skip_while(|l| !l.starts_with("//! 3. features:"))
        .take_while(|l| !l.starts_with("//! 4."))
        .collect::<Vec<_>>()
        .join(" ");
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The tables `code` names after one of `words`.
fn named<'a>(code: &str, words: &[&str], tables: &[&'a str]) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    for word in words {
        for (at, _) in code.match_indices(&format!("{word} ")) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let name = identifier(&code[at + word.len() + 1..]);
            if let Some(t) = tables.iter().find(|t| **t == name) {
                out.insert(*t);
            }
        }
    }
    out
}

#[test]
fn tables_are_written_by_their_owners_and_read_from_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = feature_order();
    // A base module (and `web`) sits below every feature.
    let rank = |module: &str| order.iter().position(|f| f == module).map_or(0, |i| i + 1);
    let owners: BTreeMap<&str, &[&str]> = TABLE_OWNERS.iter().copied().collect();
    let tables: Vec<&str> = owners.keys().copied().collect();
    let mut found: BTreeMap<(String, &str, &str), BTreeSet<String>> = BTreeMap::new();
    for file in kbot_testkit::files_under(&src, Some("rs")) {
        let rel = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let module = rel
            .split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_owned();
        let code = product_sql(&file);
        for (verb, words) in VERBS {
            for table in named(&code, words, &tables) {
                let own = owners[table];
                let broken = match verb {
                    "writes" => !own.contains(&module.as_str()),
                    _ => module != "dashboard" && !own.iter().any(|o| rank(o) <= rank(&module)),
                };
                if broken {
                    found
                        .entry((module.clone(), verb, table))
                        .or_default()
                        .insert(rel.clone());
                }
            }
        }
    }
    let breaks: Vec<String> = found
        .iter()
        .map(|((m, v, t), files)| format!("{m} {v} {t} ({files:?}), owned by {:?}", owners[t]))
        .collect();
    assert!(
        breaks.is_empty(),
        "tables used against their owners: {breaks:#?}"
    );
}

#[test]
fn every_table_of_the_schema_has_owners() {
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/sqlite");
    let sqls: Vec<String> = kbot_testkit::files_under(&migrations, Some("sql"))
        .iter()
        .map(|file| std::fs::read_to_string(file).expect("read"))
        .collect();
    let after = |sql: &'_ str, word: &str| -> Vec<String> {
        sql.match_indices(word)
            .map(|(at, _)| {
                let rest = &sql[at + word.len()..];
                identifier(rest.trim_start_matches("IF EXISTS ")).to_owned()
            })
            .collect()
    };
    let mut created: BTreeSet<String> = sqls
        .iter()
        .flat_map(|sql| after(sql, "CREATE TABLE "))
        .filter(|name| !name.ends_with("_new") && !name.ends_with("_keep"))
        .collect();
    // Tables a migration dropped, unless it renamed a rebuilt copy into place.
    for sql in &sqls {
        for name in after(sql, "DROP TABLE ") {
            if !sql.contains(&format!("ALTER TABLE {name}_new RENAME TO {name}")) {
                created.remove(&name);
            }
        }
    }
    let listed: BTreeSet<String> = TABLE_OWNERS.iter().map(|(t, _)| (*t).to_owned()).collect();
    assert_eq!(
        created, listed,
        "tables in the schema vs kbot_server::TABLE_OWNERS"
    );
}
