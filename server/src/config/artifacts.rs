//! Where the server keeps artifacts (`KBOT_ARTIFACT_STORE`, `KBOT_S3_*`):
//! the artifact directory by default, or an S3-compatible object store, so
//! that replicas need no shared filesystem for what agents upload.

use std::fmt;

/// Flags of `kbot-server serve` for the artifact store.
#[derive(Debug, Clone, clap::Args)]
pub struct ArtifactStoreArgs {
    /// `s3://BUCKET` or `s3://BUCKET/PREFIX`: raw outputs, consoles and
    /// kernel configs go to this S3-compatible bucket instead of the
    /// artifact directory (which still holds the git mirrors and list
    /// archives, per replica).
    #[arg(long = "artifact-store", env = "KBOT_ARTIFACT_STORE")]
    pub artifact_store: Option<String>,
    /// The S3 endpoint (`http://127.0.0.1:9000` for a local MinIO); unset,
    /// AWS's endpoint of the region.
    #[arg(long = "s3-endpoint", env = "KBOT_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// The bucket's region.
    #[arg(
        long = "s3-region",
        env = "KBOT_S3_REGION",
        default_value = "us-east-1"
    )]
    pub s3_region: String,
    /// The access key; unset, none is sent (a public or anonymous bucket).
    #[arg(
        long = "s3-access-key-id",
        env = "KBOT_S3_ACCESS_KEY_ID",
        requires = "s3_secret_access_key"
    )]
    pub s3_access_key_id: Option<String>,
    /// The secret key of `KBOT_S3_ACCESS_KEY_ID`.
    #[arg(
        long = "s3-secret-access-key",
        env = "KBOT_S3_SECRET_ACCESS_KEY",
        hide_env_values = true,
        requires = "s3_access_key_id"
    )]
    pub s3_secret_access_key: Option<String>,
}

/// An S3-compatible bucket for artifacts.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// `s3://BUCKET[/PREFIX]` as given; checked when the store opens.
    pub url: String,
    pub endpoint: Option<String>,
    pub region: String,
    /// Key id and secret.
    pub credentials: Option<(String, String)>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret stays out of logs of the configuration.
        f.debug_struct("S3Settings")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("key_id", &self.credentials.as_ref().map(|(id, _)| id))
            .finish()
    }
}

impl ArtifactStoreArgs {
    /// `None`: the artifact directory.
    pub fn into_settings(self) -> Option<S3Settings> {
        let url = self.artifact_store.filter(|u| !u.trim().is_empty())?;
        Some(S3Settings {
            url,
            endpoint: self.s3_endpoint.filter(|e| !e.trim().is_empty()),
            region: self.s3_region,
            credentials: self.s3_access_key_id.zip(self.s3_secret_access_key),
        })
    }
}

impl S3Settings {
    /// The bucket and the prefix inside it (without slashes at its ends).
    pub fn bucket_and_prefix(&self) -> Result<(String, String), String> {
        let rest = self.url.strip_prefix("s3://").ok_or_else(|| {
            format!(
                "KBOT_ARTIFACT_STORE {:?} is not an s3://BUCKET[/PREFIX] URL",
                self.url
            )
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!(
                "KBOT_ARTIFACT_STORE {:?} names no bucket",
                self.url
            ));
        }
        Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> S3Settings {
        S3Settings {
            url: url.into(),
            endpoint: None,
            region: "us-east-1".into(),
            credentials: Some(("id".into(), "very-secret".into())),
        }
    }

    #[test]
    fn a_url_names_a_bucket_and_an_optional_prefix() {
        let parsed = |u: &str| settings(u).bucket_and_prefix();
        assert_eq!(parsed("s3://kbot"), Ok(("kbot".into(), String::new())));
        assert_eq!(
            parsed("s3://kbot/lab/one/"),
            Ok(("kbot".into(), "lab/one".into()))
        );
        assert!(parsed("s3:///x")
            .expect_err("no bucket")
            .contains("names no bucket"));
        assert!(parsed("/srv/kbot")
            .expect_err("no scheme")
            .contains("not an s3://"));
    }

    #[test]
    fn the_secret_is_not_in_the_debug_form() {
        let shown = format!("{:?}", settings("s3://kbot"));
        assert!(
            shown.contains("id") && !shown.contains("very-secret"),
            "{shown}"
        );
    }
}
