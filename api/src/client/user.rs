//! [`UserClient`]: the user API calls of the `kbot-server` command line.

use std::time::Duration;

use reqwest::Method;

use super::{Error, Http, Result};
use crate::bisections::{BisectionDetail, BisectionView};
use crate::lists::{ListCommand, ListCreate, ListDetail, ListView, SeriesDetail, SeriesView};
use crate::reports::{ReportDetail, StoredReport};
use crate::repos::{RepoCreate, RepoView};
use crate::submissions::{
    EventView, SubmissionDetail, SubmissionResults, SubmissionView, SubmitRequest,
};
use crate::watches::{WatchCreate, WatchDetail, WatchView};

/// A user's connection to one kbot server.
#[derive(Debug, Clone)]
pub struct UserClient {
    http: Http,
}

impl UserClient {
    /// `server` is the server's base URL; `token` a user token (reads need
    /// none). A call may take 60 s.
    pub fn new(server: &str, token: Option<String>) -> Result<UserClient> {
        let client = Http::build(server, None, Duration::from_secs(60))?;
        Ok(UserClient {
            http: Http::new(client, server, token),
        })
    }

    /// `POST /submissions`.
    pub async fn submit(&self, request: &SubmitRequest) -> Result<SubmissionView> {
        self.http
            .expect(Method::POST, "/submissions", Some(request))
            .await
    }

    /// `GET /submissions?limit=N`, newest first.
    pub async fn submissions(&self, limit: u32) -> Result<Vec<SubmissionView>> {
        self.get(&format!("/submissions?limit={limit}")).await
    }

    /// `GET /submissions/{id}`.
    pub async fn submission(&self, id: i64) -> Result<SubmissionDetail> {
        self.get(&format!("/submissions/{id}")).await
    }

    /// `GET /submissions/{id}/events?after=N`: the events after event `after`.
    pub async fn events(&self, id: i64, after: i64) -> Result<Vec<EventView>> {
        self.get(&format!("/submissions/{id}/events?after={after}"))
            .await
    }

    /// `POST /submissions/{id}/cancel`.
    pub async fn cancel(&self, id: i64) -> Result<SubmissionView> {
        self.post(&format!("/submissions/{id}/cancel")).await
    }

    /// `GET /submissions/{id}/results`.
    pub async fn results(&self, id: i64) -> Result<SubmissionResults> {
        self.get(&format!("/submissions/{id}/results")).await
    }

    /// `POST /repos`.
    pub async fn add_repo(&self, request: &RepoCreate) -> Result<RepoView> {
        self.http
            .expect(Method::POST, "/repos", Some(request))
            .await
    }

    /// `GET /repos`.
    pub async fn repos(&self) -> Result<Vec<RepoView>> {
        self.get("/repos").await
    }

    /// `POST /watches`.
    pub async fn add_watch(&self, request: &WatchCreate) -> Result<WatchView> {
        self.http
            .expect(Method::POST, "/watches", Some(request))
            .await
    }

    /// `GET /watches`.
    pub async fn watches(&self) -> Result<Vec<WatchView>> {
        self.get("/watches").await
    }

    /// `GET /watches/{id}`.
    pub async fn watch(&self, id: i64) -> Result<WatchDetail> {
        self.get(&format!("/watches/{id}")).await
    }

    /// `DELETE /watches/{id}`.
    pub async fn remove_watch(&self, id: i64) -> Result<WatchView> {
        self.http
            .expect::<(), _>(Method::DELETE, &format!("/watches/{id}"), None)
            .await
    }

    /// `POST /lists`.
    pub async fn add_list(&self, request: &ListCreate) -> Result<ListView> {
        self.http
            .expect(Method::POST, "/lists", Some(request))
            .await
    }

    /// `GET /lists`.
    pub async fn lists(&self) -> Result<Vec<ListView>> {
        self.get("/lists").await
    }

    /// `GET /lists/{id}`.
    pub async fn list(&self, id: i64) -> Result<ListDetail> {
        self.get(&format!("/lists/{id}")).await
    }

    /// `GET /lists/{id}/commands`.
    pub async fn list_commands(&self, id: i64) -> Result<Vec<ListCommand>> {
        self.get(&format!("/lists/{id}/commands")).await
    }

    /// `POST /lists/{id}/read`: read the archive now.
    pub async fn read_list(&self, id: i64) -> Result<ListView> {
        self.http
            .expect::<(), _>(Method::POST, &format!("/lists/{id}/read"), None)
            .await
    }

    /// `DELETE /lists/{id}`.
    pub async fn remove_list(&self, id: i64) -> Result<ListView> {
        self.http
            .expect::<(), _>(Method::DELETE, &format!("/lists/{id}"), None)
            .await
    }

    /// `GET /series`, newest first.
    pub async fn series(&self) -> Result<Vec<SeriesView>> {
        self.get("/series").await
    }

    /// `GET /series/{id}`.
    pub async fn one_series(&self, id: i64) -> Result<SeriesDetail> {
        self.get(&format!("/series/{id}")).await
    }

    /// `GET /bisections?limit=N`, newest first.
    pub async fn bisections(&self, limit: u32) -> Result<Vec<BisectionView>> {
        self.get(&format!("/bisections?limit={limit}")).await
    }

    /// `GET /bisections/{id}`.
    pub async fn bisection(&self, id: i64) -> Result<BisectionDetail> {
        self.get(&format!("/bisections/{id}")).await
    }

    /// `POST /bisections/{id}/cancel`.
    pub async fn cancel_bisection(&self, id: i64) -> Result<BisectionView> {
        self.post(&format!("/bisections/{id}/cancel")).await
    }

    /// `GET /reports`: the latest reports, newest first.
    pub async fn reports(&self) -> Result<Vec<StoredReport>> {
        self.get("/reports").await
    }

    /// `GET /reports/{key}`: a report with its message and delivery
    /// attempts; `key` is the report's id or Message-ID.
    pub async fn report(&self, key: &str) -> Result<ReportDetail> {
        self.get(&report_path(key)).await
    }

    /// `POST /reports/{key}/resend`; `key` is the report's id or Message-ID.
    pub async fn resend_report(&self, key: &str) -> Result<ReportDetail> {
        self.post(&format!("{}/resend", report_path(key))).await
    }

    /// `GET /jobs/{id}/repro`: the shell script that reproduces a run.
    pub async fn repro(&self, job_id: i64) -> Result<String> {
        let path = format!("/jobs/{job_id}/repro");
        let (bytes, _) = self.http.get_bytes(&path, "content-type").await?;
        String::from_utf8(bytes.to_vec()).map_err(|e| Error::Body {
            url: path,
            reason: e.to_string(),
        })
    }

    async fn get<R: serde::de::DeserializeOwned>(&self, path: &str) -> Result<R> {
        self.http.expect::<(), _>(Method::GET, path, None).await
    }

    /// A POST whose body is empty JSON (`null`), as the actions take.
    async fn post<R: serde::de::DeserializeOwned>(&self, path: &str) -> Result<R> {
        self.http.expect(Method::POST, path, Some(&())).await
    }
}

/// `/reports/{key}`, the key escaped: a Message-ID's `<`, `>`, `@` and `/`
/// are not path characters.
fn report_path(key: &str) -> String {
    let key = url::form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>();
    format!("/reports/{key}")
}
