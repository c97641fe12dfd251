//! `docs/configuration.md` against the programs: its tables of `KBOT_*`
//! variables are generated from the clap definitions of `kbot-server`,
//! `kbot-agent` and `kbot-load`, and every `KBOT_*` name the sources,
//! scripts and deployment files use is in it.
//!
//! After changing a flag: `KBOT_BLESS=1 cargo test -p kbot-cli --test it
//! configuration::` rewrites the generated tables (the text around them is
//! written by hand).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// One variable of one program: its flag, default and meaning, and the
/// commands that take it.
struct Var {
    flag: String,
    default: String,
    secret: bool,
    help: String,
    commands: BTreeSet<String>,
}

/// Every argument with an environment variable in `cmd` and its subcommands.
fn collect(cmd: &clap::Command, path: &str, vars: &mut BTreeMap<String, Var>) {
    for arg in cmd.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        let var = vars.entry(env.to_string()).or_insert_with(|| Var {
            flag: arg
                .get_long()
                .map(|l| format!("`--{l}`"))
                .unwrap_or_default(),
            default: arg
                .get_default_values()
                .iter()
                .map(|v| format!("`{}`", v.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(", "),
            secret: arg.is_hide_env_values_set(),
            help: one_line(
                &arg.get_long_help()
                    .or(arg.get_help())
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ),
            commands: BTreeSet::new(),
        });
        var.commands.insert(path.to_string());
    }
    for sub in cmd.get_subcommands() {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        collect(sub, &sub_path, vars);
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The Markdown table of a program's variables.
fn table(program: &str, cmd: &mut clap::Command) -> String {
    // Propagates global arguments to the subcommands that take them.
    cmd.build();
    let mut vars = BTreeMap::new();
    collect(cmd, "", &mut vars);
    let mut out =
        String::from("| Variable | Flag | Default | Commands | Meaning |\n|---|---|---|---|---|\n");
    for (name, v) in &vars {
        let commands = if v.commands.contains("") {
            "all".to_string()
        } else {
            v.commands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let secret = if v.secret {
            " (a secret: never printed)"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `{name}` | {} | {} | {commands} | {}{secret} |\n",
            v.flag, v.default, v.help
        ));
    }
    out.push_str(&format!(
        "\n{} variables; `{program} --help` and `{program} COMMAND --help` say the same.\n",
        vars.len()
    ));
    out
}

fn begin(program: &str) -> String {
    format!("<!-- BEGIN GENERATED {program}: KBOT_BLESS=1 cargo test -p kbot-cli --test it configuration:: -->\n")
}

fn end(program: &str) -> String {
    format!("<!-- END GENERATED {program} -->")
}

/// `doc` with each program's generated block replaced by `tables`.
fn regenerate(doc: &str, tables: &[(&str, String)]) -> Result<String, String> {
    let mut out = doc.to_string();
    for (program, body) in tables {
        let (b, e) = (begin(program), end(program));
        let start = out
            .find(&b)
            .ok_or_else(|| format!("docs/configuration.md has no `{}`", b.trim()))?
            + b.len();
        let stop = out[start..]
            .find(&e)
            .ok_or_else(|| format!("docs/configuration.md has no `{e}`"))?
            + start;
        out.replace_range(start..stop, body);
    }
    Ok(out)
}

#[test]
fn the_configuration_reference_is_generated_from_the_programs() {
    let path = repo_root().join("docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let tables = [
        (
            "kbot-server",
            table("kbot-server", &mut kbot_cli::cli::Cli::command()),
        ),
        (
            "kbot-agent",
            table("kbot-agent", &mut kbot_agent::config::Cli::command()),
        ),
        (
            "kbot-load",
            table("kbot-load", &mut kbot_load::cli::Cli::command()),
        ),
    ];
    let fresh = regenerate(&doc, &tables).expect("the generated blocks");
    if std::env::var_os("KBOT_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("writing docs/configuration.md");
        return;
    }
    assert!(
        fresh == doc,
        "docs/configuration.md is stale: run `KBOT_BLESS=1 cargo test -p kbot-cli --test it \
         configuration::` and commit it"
    );
}

/// `KBOT_*` names in a file: whole names, not prefixes such as `KBOT_SMTP_`.
fn names_in(text: &str, into: &mut BTreeSet<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("KBOT_") {
        let start = i + at;
        let before_ok =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut stop = start + 5;
        while stop < bytes.len()
            && (bytes[stop].is_ascii_uppercase()
                || bytes[stop].is_ascii_digit()
                || bytes[stop] == b'_')
        {
            stop += 1;
        }
        let name = &text[start..stop];
        if before_ok && !name.ends_with('_') {
            into.insert(name.to_string());
        }
        i = stop;
    }
}

#[test]
fn every_kbot_variable_in_use_is_in_the_configuration_reference() {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).expect("the reference");
    let mut documented = BTreeSet::new();
    names_in(&doc, &mut documented);
    let mut files = vec![
        root.join("docker-compose.yml"),
        root.join("Dockerfile"),
        root.join(".ci/run"),
    ];
    files.extend(kbot_testkit::files_under(&root.join("scripts"), None));
    for krate in [
        "core",
        "api",
        "server",
        "cli",
        "load",
        "agent",
        "workloads",
        "testkit",
    ] {
        files.extend(kbot_testkit::files_under(
            &root.join(krate).join("src"),
            Some("rs"),
        ));
    }
    let mut missing = BTreeMap::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let mut used = BTreeSet::new();
        names_in(&text, &mut used);
        for name in used.difference(&documented) {
            missing.entry(name.clone()).or_insert_with(|| {
                file.strip_prefix(&root)
                    .unwrap_or(&file)
                    .display()
                    .to_string()
            });
        }
    }
    assert!(
        missing.is_empty(),
        "KBOT_* variables used but not in docs/configuration.md (name: first file): {missing:#?}"
    );
}
