//! Typed column values: JSON kept in TEXT columns ([`JsonText`],
//! [`JsonOrDefault`]) and the [`text_enum!`] macro that gives each stored
//! state an enum with its one SQL string.
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

/// Declares an enum of the states a TEXT column holds, each with its SQL
/// string written once: `as_str()` (what binds write), `TryFrom<String>`
/// (what `#[sqlx(try_from = "String")]` reads, failing on a string it does
/// not know) and `Display`.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The string the store keeps for this state.
            #[allow(dead_code)]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The state a stored string names, if any.
            #[allow(dead_code)]
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = String;

            fn try_from(text: String) -> ::std::result::Result<$name, String> {
                $name::parse(&text)
                    .ok_or_else(|| format!("unknown {} {text:?}", stringify!($name)))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use text_enum;

#[cfg(test)]
mod tests {
    text_enum! {
        enum Light {
            Red = "red",
            Green = "green",
        }
    }

    #[test]
    fn states_read_and_write_their_one_string() {
        assert_eq!(Light::Red.as_str(), "red");
        assert_eq!(Light::try_from("green".to_string()), Ok(Light::Green));
        assert_eq!(
            Light::try_from("blue".to_string()),
            Err("unknown Light \"blue\"".to_string())
        );
        assert_eq!(Light::Green.to_string(), "green");
    }
}
