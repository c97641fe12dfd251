//! kbot-api: every wire type of kbot's REST API under [`API_PREFIX`], with
//! its serde and OpenAPI (`utoipa::ToSchema`) derives, shared by the server,
//! the agent, the command line and the load tool.
//!
//! - [`agent`]: the agent protocol (enrol, lease, heartbeat, events, results).
//! - [`repos`], [`submissions`], [`bisections`], [`watches`], [`lists`],
//!   [`reports`], [`regressions`]: the user API, one module per resource.
//! - [`ErrorBody`]: the body of every error answer.
//! - `client` (feature `client`): `AgentClient` and `UserClient`, the one
//!   typed HTTP client of each protocol.
//!
//! Times on the wire are Unix milliseconds (`i64`) unless a field says
//! otherwise. Every state, kind and verdict is an enum declared with
//! [`wire_enum!`]: the same string on the wire, in the store and on pages.

/// Declares an enum of named states, each with its one string: the wire
/// (serde), the OpenAPI schema (a string enum), the store (`as_str()` is
/// what binds write, `TryFrom<String>` what `#[sqlx(try_from = "String")]`
/// reads, failing on a string it does not know) and pages (`Display`).
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every state, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The string the wire and the store carry for this state.
            #[allow(dead_code)]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The state a string names, if any.
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

        impl ::std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> ::std::result::Result<$name, String> {
                $name::parse(text).ok_or_else(|| {
                    let known: Vec<&str> = $name::ALL.iter().map(|s| s.as_str()).collect();
                    format!("{text:?} is not one of {}", known.join(", "))
                })
            }
        }

        // By hand, not derived: utoipa's derive does not read a `rename`
        // whose value a macro passed in, and would list the variants' names.
        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                ::utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(::utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl ::utoipa::ToSchema for $name {
            fn name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(stringify!($name))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod agent;
pub mod bisections;
pub mod builds;
#[cfg(feature = "client")]
pub mod client;
pub mod lists;
pub mod regressions;
pub mod reports;
pub mod repos;
pub mod submissions;
pub mod watches;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Prefix of every REST route.
pub const API_PREFIX: &str = "/api/v1";

/// The body of every API error.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `bad_request`, `unauthorized`, `not_found`, `payload_too_large`, ...
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    wire_enum! {
        enum Light {
            Red = "red",
            GreenArrow = "green_arrow",
        }
    }

    #[test]
    fn states_carry_one_string_everywhere() {
        assert_eq!(Light::Red.as_str(), "red");
        assert_eq!(
            Light::try_from("green_arrow".to_string()),
            Ok(Light::GreenArrow)
        );
        assert_eq!(
            Light::try_from("blue".to_string()),
            Err("unknown Light \"blue\"".to_string())
        );
        assert_eq!(
            "blue".parse::<Light>(),
            Err("\"blue\" is not one of red, green_arrow".to_string())
        );
        assert_eq!(Light::GreenArrow.to_string(), "green_arrow");
        assert_eq!(
            serde_json::to_string(&Light::GreenArrow).expect("serializes"),
            "\"green_arrow\""
        );
        assert_eq!(
            serde_json::from_str::<Light>("\"red\"").expect("parses"),
            Light::Red
        );
        assert!(serde_json::from_str::<Light>("\"blue\"").is_err());
        let schema =
            serde_json::to_value(<Light as utoipa::PartialSchema>::schema()).expect("serializes");
        assert_eq!(
            schema,
            serde_json::json!({"type": "string", "enum": ["red", "green_arrow"]})
        );
    }
}
