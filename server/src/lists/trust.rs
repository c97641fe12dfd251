//! Who may command kbot about a report, and how far a mail's From is
//! believed.
//!
//! A From line is only believed with a DKIM signature that passes and whose
//! signing domain aligns with the From domain ([`super::dkim`]); a list may
//! accept mail without any signature (`accept_unsigned`, for archives that
//! strip them), which then counts as unverified. A believed sender has a
//! role: the author of the reported change, a maintainer of its files (the
//! tree's MAINTAINERS at the reported commit, or the list's own
//! `maintainers`), or a kbot user (the users' e-mail, only with a real DKIM
//! pass). Everyone else is a stranger and may at most `retest`, a few times
//! a day per regression. A list address never commands, and kbot never
//! reads its own mail as a command.

use super::dkim::Seal;
use super::message::{Command, ListMessage};
use super::recheck::Reported;
use super::store::ListRow;
use crate::error::Result;
use crate::repos;
use crate::state::AppState;
use crate::time::now_ms;

/// What the sender is to the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A list's own address: a list sends no mail itself.
    List,
    Author,
    Maintainer,
    User,
    Stranger,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::List => "a list address",
            Role::Author => "the author",
            Role::Maintainer => "a maintainer",
            Role::User => "a kbot user",
            Role::Stranger => "not the author, a maintainer of the files or a kbot user",
        }
    }
}

/// The checked sender of one command mail.
#[derive(Debug, Clone, Copy)]
pub struct Sender {
    pub seal: Seal,
    pub role: Role,
}

impl Sender {
    /// Whether the sender may have `command` acted on; the refusal's words
    /// otherwise. `retests_today` counts the regression's retests of the
    /// last day (strangers share a small daily allowance).
    pub fn may(
        &self,
        command: &Command,
        retests_today: i64,
        stranger_retests: u32,
    ) -> Result<(), String> {
        if self.role == Role::List {
            return Err("a list address never sends commands: kbot takes none from it".into());
        }
        let trusted = self.seal != Seal::Unverified && self.role != Role::Stranger;
        match command {
            _ if trusted => Ok(()),
            Command::Retest if retests_today < i64::from(stranger_retests) => Ok(()),
            Command::Retest => Err(format!(
                "this regression was retested {retests_today} times in the last day; \
                 more retests need the author, a maintainer or a kbot user"
            )),
            _ if self.seal == Seal::Unverified => Err(
                "the mail has no DKIM signature that passes for its From domain: kbot takes \
                 this command only from a sender it can verify"
                    .into(),
            ),
            _ => Err(format!(
                "the sender is {}: kbot takes this command from the author of the change, \
                 the maintainers of its files and kbot users",
                self.role.as_str()
            )),
        }
    }

    /// Whether a refusal may be mailed back: only to a sender kbot believes
    /// and who has a role (a stranger's From may be forged, and answering
    /// it turns kbot into a reflector).
    pub fn answerable(&self) -> bool {
        self.seal != Seal::Unverified && !matches!(self.role, Role::Stranger | Role::List)
    }
}

/// Checks the mail's seal and the sender's role about `r`.
pub async fn sender(
    state: &AppState,
    l: &ListRow,
    r: &Reported,
    m: &ListMessage,
    raw: &[u8],
) -> Result<Sender> {
    let address = m.from.address.trim().to_ascii_lowercase();
    if is_list_address(state, &address).await? {
        return Ok(Sender {
            seal: Seal::Unverified,
            role: Role::List,
        });
    }
    let seal = super::dkim::seal(&state.config.mail, raw, &address, l.accept_unsigned != 0).await;
    let role = if seal == Seal::Unverified {
        Role::Stranger
    } else {
        role(state, l, r, &address, seal).await?
    };
    Ok(Sender { seal, role })
}

/// Every registered list's address (a removed list's too), and the report's
/// own recipients that a list carries are lists.
async fn is_list_address(state: &AppState, address: &str) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM lists WHERE address IS NOT NULL AND LOWER(TRIM(address)) = $1",
    )
    .bind(address)
    .fetch_one(state.db.read())
    .await?;
    Ok(n > 0)
}

async fn role(
    state: &AppState,
    l: &ListRow,
    r: &Reported,
    address: &str,
    seal: Seal,
) -> Result<Role> {
    if r.author().eq_ignore_ascii_case(address) {
        return Ok(Role::Author);
    }
    let listed = l
        .maintainers
        .split(|c: char| c == '\n' || c == ',' || c.is_whitespace())
        .any(|a| a.trim().eq_ignore_ascii_case(address));
    if listed
        || tree_maintainers(state, r)
            .await?
            .iter()
            .any(|a| a == address)
    {
        return Ok(Role::Maintainer);
    }
    if seal == Seal::Pass && is_user(state, address).await? {
        return Ok(Role::User);
    }
    Ok(Role::Stranger)
}

/// The MAINTAINERS of the reported (first bad) commit's files, read at that
/// commit from the server's mirror; none when the tree has no MAINTAINERS.
async fn tree_maintainers(state: &AppState, r: &Reported) -> Result<Vec<String>> {
    let repo = r.repo(&state.db).await?;
    let first_bad = r.first_bad(state).await?;
    let mirror = repos::mirror_for(state, &repo.name);
    let Some(text) = mirror.file_at(&first_bad.sha, "MAINTAINERS").await? else {
        return Ok(Vec::new());
    };
    let files = mirror.touched_files(&first_bad.sha).await?;
    Ok(super::maintainers::of(&text, &files))
}

async fn is_user(state: &AppState, address: &str) -> Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE LOWER(TRIM(email)) = $1")
        .bind(address)
        .fetch_one(state.db.read())
        .await?;
    Ok(n > 0)
}

/// The regression's retests recorded in the last day (acted on or not
/// refused), which a stranger's retest is counted against.
pub async fn retests_today(state: &AppState, regression_id: i64) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM list_commands WHERE regression_id = $1 AND command = 'retest' \
         AND state <> 'refused' AND created_at > $2",
    )
    .bind(regression_id)
    .bind(now_ms() - 24 * 3600 * 1000)
    .fetch_one(state.db.read())
    .await?)
}
