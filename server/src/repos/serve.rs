//! Read-only git over HTTP from the server's mirrors (git's "dumb" HTTP
//! transport): `git fetch URL/git/REPO.git refs/kbot/series/LIST/ID` gets a
//! series kbot applied, and the agents fetch series commits the upstream
//! repo does not have from here. Only the files that transport reads are
//! served (`HEAD`, `info/refs`, `objects/info/packs`, packs and loose
//! objects); `Mirror::set_ref` keeps `info/refs` current.
//!
//! Who may fetch: with `KBOT_GIT_PUBLIC` anyone, else an agent token, a
//! user token (`Authorization: Bearer`, which git sends with
//! `http.extraHeader`) or a signed-in session, whether or not reading
//! needs sign-in (the wall lets `/git/` through to this check). What is
//! served is whole mirrors: dumb HTTP hands out packs, so whoever may
//! fetch one series may read every object of that mirror, other series
//! and `#kbot test` patches included.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::access::Reader;
use crate::error::{Error, Result};
use crate::state::AppState;

/// `GET /git/{repo}/{*path}` (`repo` with or without `.git`).
pub async fn file(
    State(state): State<AppState>,
    reader: Reader,
    Path((repo, path)): Path<(String, String)>,
) -> Result<Response> {
    if reader == Reader::Anonymous && !state.config.access.git_public {
        return Err(Error::Unauthorized);
    }
    let name = repo.strip_suffix(".git").unwrap_or(&repo);
    let repo = super::get_repo(&state.db, name).await?;
    if !servable(&path) {
        return Err(Error::NotFound {
            what: "git file",
            key: path,
        });
    }
    let full = super::mirror_for(&state, &repo.name).path().join(&path);
    let file = match tokio::fs::File::open(&full).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                what: "git file",
                key: path,
            })
        }
        Err(e) => return Err(e.into()),
    };
    let body = Body::from_stream(file_stream(file));
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}

fn file_stream(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    use tokio::io::AsyncReadExt;
    futures::stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    })
}

/// The files git's dumb HTTP transport asks for, and nothing else: no path
/// can leave the mirror or reach its config, hooks or worktrees.
fn servable(path: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["HEAD"] | ["info", "refs"] | ["objects", "info", "packs"] => true,
        ["objects", "pack", file] => file
            .strip_prefix("pack-")
            .and_then(|f| f.strip_suffix(".pack").or_else(|| f.strip_suffix(".idx")))
            .is_some_and(|h| hex(h, 40) || hex(h, 64)),
        ["objects", dir, file] => hex(dir, 2) && (hex(file, 38) || hex(file, 62)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::servable;

    #[test]
    fn only_transport_files_are_served() {
        for ok in [
            "HEAD",
            "info/refs",
            "objects/info/packs",
            "objects/ab/0123456789abcdef0123456789abcdef012345",
            "objects/pack/pack-0123456789abcdef0123456789abcdef01234567.pack",
            "objects/pack/pack-0123456789abcdef0123456789abcdef01234567.idx",
        ] {
            assert!(servable(ok), "{ok}");
        }
        for bad in [
            "config",
            "hooks/pre-receive",
            "../secret",
            "objects/../config",
            "objects/info/alternates",
            "objects/ab/../../config",
            "info/refs/..",
            "worktrees/x/HEAD",
        ] {
            assert!(!servable(bad), "{bad}");
        }
    }
}
