//! `prerequisite-patch-id:`: `git format-patch --base` on a branch that
//! holds patches not yet in the base names them by `git patch-id --stable`.
//! The series applies on its base plus those patches. kbot finds each among
//! the patches posted before (on any list it reads: an applied series
//! part's patch-id) and applies them first, so the pair tests the series'
//! own patches against the base with its prerequisites. A prerequisite that
//! was never posted, or that does not apply, is said in the
//! `[cannot apply ...]` answer.

use crate::db::Db;
use crate::error::Result;

/// The prerequisite patch-ids the series' mails name (`ids`: its cover
/// letter and patches), in order, each once.
pub fn named(rows: &[super::store::MessageMetaRow], ids: &[&String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in rows.iter().filter(|r| ids.contains(&&r.message_id)) {
        for id in row.prerequisites.lines().map(str::trim) {
            if !id.is_empty() && !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
    out
}

/// Where the prerequisites of a series were posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    /// The posted mail of each, in order, `\n` line ends.
    All(Vec<String>),
    /// The first patch-id no list kbot reads has posted.
    Missing(String),
}

/// Finds the posted mail of each prerequisite patch-id.
pub async fn posted(db: &Db, ids: &[String]) -> Result<Posted> {
    let mut texts = Vec::new();
    for id in ids {
        let raw: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT m.raw FROM series_parts p JOIN list_messages m ON m.message_id = p.message_id \
             WHERE p.patch_id = $1 ORDER BY p.series_id DESC LIMIT 1",
        )
        .bind(id)
        .fetch_optional(db.read())
        .await?;
        match raw {
            Some(raw) => texts.push(super::patches::mail_text(&raw)),
            None => return Ok(Posted::Missing(id.clone())),
        }
    }
    Ok(Posted::All(texts))
}

#[cfg(test)]
mod tests {
    use super::named;
    use crate::lists::store::MessageMetaRow;

    fn row(id: &str, prerequisites: &str) -> MessageMetaRow {
        MessageMetaRow {
            message_id: id.into(),
            in_reply_to: None,
            refs: String::new(),
            subject: String::new(),
            from_name: String::new(),
            from_address: String::new(),
            date_ms: 0,
            has_diff: 1,
            base_commit: None,
            prerequisites: prerequisites.into(),
            change_id: None,
        }
    }

    #[test]
    fn named_in_order_once_and_only_of_the_series() {
        let rows = [row("a", "p1\np2"), row("b", "p2\np3"), row("other", "p9")];
        let (a, b) = ("a".to_owned(), "b".to_owned());
        assert_eq!(named(&rows, &[&a, &b]), ["p1", "p2", "p3"]);
        assert!(named(&rows, &[]).is_empty());
    }
}
