//! Passwords for the web: argon2id hashes in `users.password_hash` (PHC
//! strings, so the parameters travel with each hash), set by
//! `kbot-server user add` and checked at sign-in.

use std::sync::LazyLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand::RngCore;

use crate::auth::{upsert_user, UserAuth};
use crate::db::Db;
use crate::error::{Error, Result};

/// Shorter passwords are refused when a user is added.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// A PHC string of `password` under a fresh random salt (argon2id, the
/// crate's default parameters).
pub fn hash(password: &str) -> Result<String> {
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt)
        .map_err(|e| anyhow::anyhow!("cannot encode a password salt: {e}"))?;
    let hashed = Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("cannot hash a password: {e}"))?;
    Ok(hashed.to_string())
}

/// Whether `password` matches the stored PHC string; a malformed one
/// matches nothing.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Checked against when the user does not exist or has no password, so a
/// failed sign-in takes as long whether or not the name is known.
static DECOY: LazyLock<Option<String>> = LazyLock::new(|| hash("not a password of anyone").ok());

/// Creates the user (or finds it by name) and sets its web password.
/// Returns the user id.
pub async fn add_user(db: &Db, name: &str, email: Option<&str>, password: &str) -> Result<i64> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::BadRequest("user name must not be empty".into()));
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Error::BadRequest(format!(
            "the password must have at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    let owned = password.to_owned();
    let phc = tokio::task::spawn_blocking(move || hash(&owned))
        .await
        .map_err(|e| anyhow::anyhow!("password hashing task failed: {e}"))??;
    let mut tx = db.begin().await?;
    let user_id = upsert_user(&mut tx, name, email).await?;
    sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
        .bind(phc)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(user_id)
}

/// A user with the password hash a sign-in is checked against.
#[derive(sqlx::FromRow)]
struct PasswordRow {
    id: i64,
    name: String,
    password_hash: Option<String>,
}

/// The user `name` when `password` is theirs. Hashing is CPU work of tens
/// of milliseconds: it runs off the async workers.
pub async fn check(db: &Db, name: &str, password: &str) -> Result<Option<UserAuth>> {
    let row = sqlx::query_as::<_, PasswordRow>(
        "SELECT id, name, password_hash FROM users WHERE name = $1",
    )
    .bind(name.trim())
    .fetch_optional(db.read())
    .await?;
    let (user, phc) = match row {
        Some(row) => {
            let user = UserAuth {
                user_id: row.id,
                user_name: row.name,
            };
            (Some(user), row.password_hash)
        }
        None => (None, None),
    };
    // Without a password of its own the user cannot sign in, whatever the
    // decoy's check says.
    let has_password = phc.is_some();
    let phc = phc.or_else(|| DECOY.clone()).unwrap_or_default();
    let owned = password.to_owned();
    let matches = tokio::task::spawn_blocking(move || verify(&owned, &phc))
        .await
        .map_err(|e| anyhow::anyhow!("password check task failed: {e}"))?;
    Ok(user.filter(|_| matches && has_password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let phc = hash("correct horse").expect("hash");
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(verify("correct horse", &phc));
        assert!(!verify("correct horsf", &phc));
        assert!(!verify("correct horse", "not a PHC string"));
        // A fresh salt each time.
        assert_ne!(hash("correct horse").expect("hash"), phc);
    }
}
