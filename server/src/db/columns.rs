//! Typed column values: JSON kept in TEXT columns ([`JsonText`],
//! [`JsonOrDefault`]). States are `kbot_api::wire_enum!` enums, read
//! through their `TryFrom<String>`.
//!
//! Both backends store JSON as TEXT (SQLite has no JSON type, and sqlx's
//! `Any` driver has no `Json<T>`), so the wrappers encode and decode through
//! `String`. A value that does not decode fails as sqlx's column-decode
//! error, which names the column.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::any::AnyTypeInfo;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Any, Database, Decode, Encode, Type};

/// A JSON document in a TEXT column, read into (and written from) `T`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonText<T>(pub T);

/// A JSON document in a TEXT column whose reader shows `T::default()` for
/// a document that does not parse, where one bad stored value (a tuning
/// map, a comparison's detail) must not fail the whole view it is part of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonOrDefault<T>(pub T);

impl<T> Type<Any> for JsonText<T> {
    fn type_info() -> AnyTypeInfo {
        <String as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <String as Type<Any>>::compatible(ty)
    }
}

impl<T> Type<Any> for JsonOrDefault<T> {
    fn type_info() -> AnyTypeInfo {
        <String as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <String as Type<Any>>::compatible(ty)
    }
}

impl<'r, T: DeserializeOwned> Decode<'r, Any> for JsonText<T> {
    fn decode(value: <Any as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <String as Decode<'r, Any>>::decode(value)?;
        serde_json::from_str(&text)
            .map(JsonText)
            .map_err(|e| format!("the stored JSON does not parse: {e}").into())
    }
}

impl<'r, T: DeserializeOwned + Default> Decode<'r, Any> for JsonOrDefault<T> {
    fn decode(value: <Any as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <String as Decode<'r, Any>>::decode(value)?;
        Ok(JsonOrDefault(
            serde_json::from_str(&text).unwrap_or_default(),
        ))
    }
}

impl<'q, T: Serialize> Encode<'q, Any> for JsonText<T> {
    fn encode_by_ref(
        &self,
        buf: &mut <Any as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        let text = serde_json::to_string(&self.0)?;
        <String as Encode<'q, Any>>::encode(text, buf)
    }
}
