//! The SQLite and PostgreSQL migrations build the same schema: the same
//! tables with the same columns, each of the same type class (integer,
//! real, text, bytes, boolean) and nullability. One SQL path serves both
//! backends (sqlx's Any driver), so a column missing or typed apart on one
//! side is a bug that only that backend's users would meet.
//!
//! It runs against the real PostgreSQL (KBOT_TEST_DATABASE_URL); without
//! it the test fails under CI and says it was skipped elsewhere.

use std::collections::BTreeMap;

use kbot_server::db::Db;
use kbot_testkit::{Backend, TestStore};
use sqlx::Row;

/// What is compared of one column.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    class: &'static str,
    not_null: bool,
}

/// Table name → column name → column.
type Schema = BTreeMap<String, BTreeMap<String, Column>>;

/// The class of a declared SQLite type or a PostgreSQL `data_type`.
fn class(declared: &str) -> &'static str {
    let t = declared.to_ascii_lowercase();
    if t.contains("int") {
        "integer"
    } else if t.contains("double") || t.contains("real") || t.contains("float") || t == "numeric" {
        "real"
    } else if t.contains("char") || t == "text" || t.starts_with("json") {
        "text"
    } else if t == "blob" || t == "bytea" {
        "bytes"
    } else if t.starts_with("bool") {
        "boolean"
    } else {
        "other"
    }
}

async fn sqlite_schema(db: &Db) -> Schema {
    let tables = sqlx::query(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%'",
    )
    .fetch_all(db.read())
    .await
    .expect("tables");
    let mut schema = Schema::new();
    for t in tables {
        let table: String = t.get(0);
        // An INTEGER PRIMARY KEY is the rowid: never NULL, whatever notnull says.
        let columns = sqlx::query(
            "SELECT name, type, \"notnull\" OR pk > 0 FROM pragma_table_info($1) ORDER BY cid",
        )
        .bind(&table)
        .fetch_all(db.read())
        .await
        .expect("columns");
        let entry = schema.entry(table).or_default();
        for c in columns {
            let declared: String = c.get(1);
            entry.insert(
                c.get(0),
                Column {
                    class: class(&declared),
                    not_null: c.get::<i64, _>(2) != 0,
                },
            );
        }
    }
    schema
}

async fn postgres_schema(db: &Db) -> Schema {
    let rows = sqlx::query(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
         FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name NOT LIKE '\\_sqlx%' \
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(db.read())
    .await
    .expect("columns");
    let mut schema = Schema::new();
    for r in rows {
        let declared: String = r.get(2);
        let nullable: String = r.get(3);
        schema.entry(r.get(0)).or_default().insert(
            r.get(1),
            Column {
                class: class(&declared),
                not_null: nullable == "NO",
            },
        );
    }
    schema
}

/// Every difference, one line each.
fn differences(sqlite: &Schema, postgres: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    for (table, columns) in sqlite {
        let Some(other) = postgres.get(table) else {
            out.push(format!("table {table}: only on SQLite"));
            continue;
        };
        for (name, col) in columns {
            match other.get(name) {
                None => out.push(format!("{table}.{name}: only on SQLite")),
                Some(pg) if pg != col => {
                    out.push(format!("{table}.{name}: SQLite {col:?}, PostgreSQL {pg:?}"))
                }
                Some(_) => {}
            }
        }
        for name in other.keys().filter(|n| !columns.contains_key(*n)) {
            out.push(format!("{table}.{name}: only on PostgreSQL"));
        }
    }
    for table in postgres.keys().filter(|t| !sqlite.contains_key(*t)) {
        out.push(format!("table {table}: only on PostgreSQL"));
    }
    out
}

#[tokio::test]
async fn sqlite_and_postgres_migrations_build_the_same_tables_and_columns() {
    if std::env::var_os("KBOT_TEST_DATABASE_URL").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "KBOT_TEST_DATABASE_URL is not set"
        );
        eprintln!("skipping: KBOT_TEST_DATABASE_URL is not set");
        return;
    }
    let lite = TestStore::new(Backend::Sqlite).await;
    let pg = TestStore::new(Backend::Postgres).await;
    let (lite_db, pg_db) = (lite.connect().await, pg.connect().await);
    let (a, b) = (sqlite_schema(&lite_db).await, postgres_schema(&pg_db).await);
    // The comparison would pass on two empty reads.
    assert!(a.len() >= 10 && a.contains_key("report_outbox"), "{a:?}");
    assert!(b.contains_key("report_outbox"), "{b:?}");
    let classes_known: Vec<String> = a
        .iter()
        .chain(b.iter())
        .flat_map(|(t, cols)| {
            cols.iter()
                .filter(|(_, c)| c.class == "other")
                .map(move |(n, _)| format!("{t}.{n}"))
        })
        .collect();
    assert!(
        classes_known.is_empty(),
        "unclassified types: {classes_known:?}"
    );
    let diff = differences(&a, &b);
    assert!(
        diff.is_empty(),
        "the migrations differ:\n{}",
        diff.join("\n")
    );
    let columns: usize = a.values().map(BTreeMap::len).sum();
    println!(
        "{} tables, {columns} columns alike on both backends",
        a.len()
    );

    // And a column that one side lacks or types apart is seen.
    for sql in [
        "ALTER TABLE report_outbox ADD COLUMN only_here BIGINT",
        "ALTER TABLE agents ADD COLUMN not_null_text TEXT NOT NULL DEFAULT ''",
    ] {
        sqlx::query(sql)
            .execute(lite_db.write())
            .await
            .expect("alter");
    }
    sqlx::query("ALTER TABLE agents ADD COLUMN not_null_text DOUBLE PRECISION")
        .execute(pg_db.write())
        .await
        .expect("alter");
    let diff = differences(
        &sqlite_schema(&lite_db).await,
        &postgres_schema(&pg_db).await,
    );
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(
        diff[0].starts_with("agents.not_null_text: SQLite"),
        "{diff:?}"
    );
    assert_eq!(diff[1], "report_outbox.only_here: only on SQLite");
    lite_db.close().await;
    pg_db.close().await;
}
