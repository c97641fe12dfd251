//! Nullable floating-point bind parameters that work on PostgreSQL.
//!
//! sqlx 0.8.6's `Any` driver binds `None::<f64>` to PostgreSQL as a *float4*
//! null (its `Real`/`Double` null mapping is swapped), and PostgreSQL keeps
//! that parameter type in the statement sqlx caches on the connection. The
//! next run of the same SQL on that connection with `Some(f64)` sends eight
//! bytes for a float4 and fails ("incorrect binary data format in bind
//! parameter N"): a comparison, regression or bisection step with an
//! undefined value broke the next defined one written there. Bind every
//! nullable `DOUBLE PRECISION` through [`NullableF64`].

use sqlx::any::AnyTypeInfo;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::Database;
use sqlx::{Any, Encode, Type};

/// A nullable `DOUBLE PRECISION` parameter; non-finite values are stored as
/// NULL (what "undefined" is in the store).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NullableF64(pub Option<f64>);

impl NullableF64 {
    pub fn finite(value: f64) -> NullableF64 {
        NullableF64(Some(value).filter(|v| v.is_finite()))
    }
}

impl From<Option<f64>> for NullableF64 {
    fn from(value: Option<f64>) -> NullableF64 {
        NullableF64(value.filter(|v| v.is_finite()))
    }
}

impl Type<Any> for NullableF64 {
    fn type_info() -> AnyTypeInfo {
        <f64 as Type<Any>>::type_info()
    }
}

impl<'q> Encode<'q, Any> for NullableF64 {
    fn encode_by_ref(
        &self,
        buf: &mut <Any as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        match self.0.filter(|v| v.is_finite()) {
            Some(v) => <f64 as Encode<'q, Any>>::encode_by_ref(&v, buf),
            // The null sqlx binds as a float8 on PostgreSQL (see above);
            // `migrations.rs::nullable_floats_bind_as_one_type` fails when
            // sqlx changes that.
            None => <Option<f32> as Encode<'q, Any>>::encode_by_ref(&None, buf),
        }
    }
}
