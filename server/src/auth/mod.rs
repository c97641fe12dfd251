//! Bearer tokens: creation (admin subcommands), hashing, and the extractors
//! that guard agent and user endpoints; the agent record a token
//! authenticates as ([`AgentRecord`]), and the limiter of failed attempts
//! (sign-ins, enrolments: [`limit`]).
//!
//! Tokens are 32 random bytes, hex, behind a kind prefix (`kbot_enr_`,
//! `kbot_agt_`, `kbot_usr_`) so a leaked one is recognisable. Only the
//! sha256 of a token is stored; a database leak reveals no usable secret.

use std::sync::LazyLock;

mod agent;
mod cache;
pub mod limit;

pub use agent::{backend_str, parse_backend, AgentRecord, AgentRow, AgentState, AGENT_COLUMNS};
pub use cache::AgentTokenCache;
pub use limit::SignInLimiter;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::FromRow;

use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::time::now_ms;

kbot_api::wire_enum! {
    /// `tokens.kind`: whom a token lets in.
    pub enum TokenKind {
        Enrollment = "enrollment",
        Agent = "agent",
        User = "user",
    }
}

impl TokenKind {
    fn prefix(self) -> &'static str {
        match self {
            TokenKind::Enrollment => "kbot_enr_",
            TokenKind::Agent => AGENT_TOKEN_PREFIX,
            TokenKind::User => "kbot_usr_",
        }
    }
}

/// How every agent token begins.
pub const AGENT_TOKEN_PREFIX: &str = "kbot_agt_";

/// A fresh secret of the given kind.
pub fn generate_token(kind: TokenKind) -> String {
    format!("{}{}", kind.prefix(), random_hex())
}

/// 32 random bytes, hex: the secret part of tokens, web session ids and
/// CSRF tokens.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// What the database keeps of a token.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// What an enrolment token allows beyond enrolling once: the agent name
/// and tbox group it is bound to (`None`: any), and whether the machine it
/// enrols may run list work on a kexec backend (the operator's word that
/// it is disposable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnrolmentBinding {
    pub agent_name: Option<String>,
    pub tbox_group: Option<String>,
    pub disposable: bool,
}

/// The `tokens` columns of an [`EnrolmentBinding`].
#[derive(sqlx::FromRow)]
struct BindingRow {
    agent_name: Option<String>,
    tbox_group: Option<String>,
    disposable: i64,
}

/// Creates a one-time enrolment token that enrols any name
/// (`kbot-server enroll-token`).
pub async fn create_enrollment_token(db: &Db, label: &str) -> Result<String> {
    create_bound_enrollment_token(db, label, &EnrolmentBinding::default()).await
}

/// Creates a one-time enrolment token bound as `binding` says
/// (`kbot-server enroll-token --name X [--group G] [--disposable]`).
pub async fn create_bound_enrollment_token(
    db: &Db,
    label: &str,
    binding: &EnrolmentBinding,
) -> Result<String> {
    let token = generate_token(TokenKind::Enrollment);
    sqlx::query(
        "INSERT INTO tokens (kind, token_hash, label, created_at, agent_name, tbox_group, \
             disposable) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(TokenKind::Enrollment.as_str())
    .bind(hash_token(&token))
    .bind(label)
    .bind(now_ms())
    .bind(binding.agent_name.as_deref())
    .bind(binding.tbox_group.as_deref())
    .bind(i64::from(binding.disposable))
    .execute(db.write())
    .await?;
    Ok(token)
}

/// Creates a user (if new) and an API token for it (`kbot-server user-token`).
/// Returns the user id and the token.
pub async fn create_user_token(db: &Db, name: &str, email: Option<&str>) -> Result<(i64, String)> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::BadRequest("user name must not be empty".into()));
    }
    let mut tx = db.begin().await?;
    let user_id = upsert_user(&mut tx, name, email).await?;
    let token = generate_token(TokenKind::User);
    sqlx::query(
        "INSERT INTO tokens (kind, token_hash, label, user_id, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(TokenKind::User.as_str())
    .bind(hash_token(&token))
    .bind(name)
    .bind(user_id)
    .bind(now_ms())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((user_id, token))
}

pub(crate) async fn upsert_user(tx: &mut Tx, name: &str, email: Option<&str>) -> Result<i64> {
    let row: (i64,) = sqlx::query_as(
        "INSERT INTO users (name, email, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET email = COALESCE(excluded.email, users.email) \
         RETURNING id",
    )
    .bind(name)
    .bind(email)
    .bind(now_ms())
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.0)
}

/// Consumes a one-time enrolment token inside the enrolment transaction;
/// its binding. (A transaction that does not commit leaves it unused.)
pub async fn consume_enrollment_token(tx: &mut Tx, token: &str) -> Result<EnrolmentBinding> {
    let row = sqlx::query_as::<_, BindingRow>(
        "UPDATE tokens SET used_at = $1 \
         WHERE token_hash = $2 AND kind = 'enrollment' AND used_at IS NULL AND revoked_at IS NULL \
         RETURNING agent_name, tbox_group, disposable",
    )
    .bind(now_ms())
    .bind(hash_token(token))
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::Unauthorized)?;
    Ok(EnrolmentBinding {
        agent_name: row.agent_name,
        tbox_group: row.tbox_group,
        disposable: row.disposable != 0,
    })
}

/// Issues a new agent token and revokes the agent's older ones.
pub async fn issue_agent_token(tx: &mut Tx, agent_id: i64, label: &str) -> Result<String> {
    let now = now_ms();
    sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE agent_id = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(agent_id)
        .execute(&mut **tx)
        .await?;
    let token = generate_token(TokenKind::Agent);
    sqlx::query(
        "INSERT INTO tokens (kind, token_hash, label, agent_id, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(TokenKind::Agent.as_str())
    .bind(hash_token(&token))
    .bind(label)
    .bind(agent_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(token)
}

/// The caller of an agent endpoint, with its record as stored (read in the
/// same query as the token: the lease needs its hardware and group).
#[derive(Debug, Clone)]
pub struct AgentAuth {
    pub record: AgentRecord,
}

/// The caller of a user endpoint.
#[derive(Debug, Clone)]
pub struct UserAuth {
    pub user_id: i64,
    pub user_name: String,
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    #[sqlx(try_from = "String")]
    kind: TokenKind,
    user_id: Option<i64>,
    name: Option<String>,
}

fn bearer(parts: &Parts) -> Result<&str> {
    let value = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(Error::Unauthorized)?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or(Error::Unauthorized)?
        .trim();
    if token.is_empty() {
        return Err(Error::Unauthorized);
    }
    Ok(token)
}

async fn lookup_user_token(db: &Db, token: &str) -> Result<TokenRow> {
    sqlx::query_as::<_, TokenRow>(
        "SELECT t.kind, t.user_id, u.name \
         FROM tokens t LEFT JOIN users u ON u.id = t.user_id \
         WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
    )
    .bind(hash_token(token))
    .fetch_optional(db.read())
    .await?
    .ok_or(Error::Unauthorized)
}

/// The token's side of the agent lookup; `id` is the agent's, null when
/// the token belongs to no agent (the agent's columns are then all null,
/// so they are read as an [`AgentRow`] only after this check).
#[derive(sqlx::FromRow)]
struct AgentTokenRow {
    #[sqlx(try_from = "String")]
    kind: TokenKind,
    id: Option<i64>,
}

/// What the extractors need of the server's state; the state
/// ([`crate::state::AppState`]) holds the cache, so this module does not
/// name it.
pub trait AuthState: Send + Sync {
    fn db(&self) -> &Db;
    fn agent_tokens(&self) -> &AgentTokenCache;
}

impl<S: AuthState> FromRequestParts<S> for AgentAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            let columns: Vec<String> = AGENT_COLUMNS
                .split(", ")
                .map(|column| format!("a.{column}"))
                .collect();
            format!(
                "SELECT t.kind, {} FROM tokens t LEFT JOIN agents a ON a.id = t.agent_id \
                 WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
                columns.join(", ")
            )
        });
        let token_hash = hash_token(bearer(parts)?);
        if let Some(record) = state.agent_tokens().get(&token_hash) {
            return Ok(AgentAuth { record });
        }
        let row = sqlx::query(&SQL)
            .bind(&token_hash)
            .fetch_optional(state.db().read())
            .await?
            .ok_or(Error::Unauthorized)?;
        let token = AgentTokenRow::from_row(&row)?;
        if token.kind != TokenKind::Agent || token.id.is_none() {
            return Err(Error::WrongTokenKind { needed: "an agent" });
        }
        let record = AgentRecord::try_from(AgentRow::from_row(&row)?)?;
        state.agent_tokens().insert(token_hash, record.clone());
        Ok(AgentAuth { record })
    }
}

impl<S: AuthState> FromRequestParts<S> for UserAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        let row = lookup_user_token(state.db(), bearer(parts)?).await?;
        match (row.kind, row.user_id) {
            (TokenKind::User, Some(user_id)) => Ok(UserAuth {
                user_id,
                user_name: row.name.unwrap_or_default(),
            }),
            _ => Err(Error::WrongTokenKind { needed: "a user" }),
        }
    }
}
