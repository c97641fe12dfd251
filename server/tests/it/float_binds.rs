//! Nullable floats bind with one type whether they are null or not, on both
//! backends (`kbot_server::db::NullableF64`).

use kbot_server::db::NullableF64;
use kbot_testkit::{backends, Backend, TestStore};
use sqlx::Row;

/// One connection runs the same SQL with a null and then with a value, as a
/// pool does over time: the value must come back, exactly.
#[tokio::test]
async fn nullable_floats_bind_as_one_type() {
    for backend in backends() {
        let store = TestStore::new(backend).await;
        let db = store.connect().await;
        let mut conn = db.read().acquire().await.expect("connection");

        // What went wrong without it: sqlx's plain `Option<f64>` null is a
        // float4 on PostgreSQL, and the statement cached with it refuses
        // the next float8. When this stops failing, sqlx is fixed and
        // NullableF64 can go.
        let plain = "SELECT CAST($1 AS DOUBLE PRECISION) AS v";
        sqlx::query(plain)
            .bind(None::<f64>)
            .fetch_one(&mut *conn)
            .await
            .expect("a plain null");
        let then = sqlx::query(plain)
            .bind(Some(1.5_f64))
            .fetch_one(&mut *conn)
            .await;
        let error = then.err().map(|e| e.to_string());
        assert_eq!(error.is_some(), backend == Backend::Postgres, "{error:?}");

        let sql = "SELECT CAST($1 AS DOUBLE PRECISION) AS w";
        let third = 1.0_f64 / 3.0;
        for (bound, stored) in [
            (None, None),
            (Some(third), Some(third)),
            (None, None),
            (Some(f64::NAN), None),
            (Some(-2.25e300), Some(-2.25e300)),
            (Some(f64::INFINITY), None),
        ] {
            let row = sqlx::query(sql)
                .bind(NullableF64::from(bound))
                .fetch_one(&mut *conn)
                .await
                .unwrap_or_else(|e| panic!("{backend:?} {bound:?}: {e}"));
            let got: Option<f64> = row.try_get("w").expect("w");
            assert_eq!(
                got.map(f64::to_bits),
                stored.map(f64::to_bits),
                "{backend:?} {bound:?}"
            );
        }
    }
}
