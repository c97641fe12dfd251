//! `kbot-load pages`: the latency of dashboard pages as a reader gets them.
//! Each path is fetched `requests` times one after another (a warm-up
//! round first, not counted) over one keep-alive connection; the report
//! gives p50, p99 and the maximum per path.

use std::time::{Duration, Instant};

use kbot_server::error::{Error, Result};

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct PagesArgs {
    /// Base URL of the running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// A page path (`/`, `/trends?metric=...`); repeat for several.
    #[arg(long = "path", required = true)]
    pub paths: Vec<String>,
    /// Timed requests per path.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
}

/// One path's latencies, in milliseconds.
#[derive(Debug)]
pub struct PageLatency {
    pub path: String,
    pub bytes: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl std::fmt::Display for PageLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>8.1} {:>8.1} {:>8.1} {:>9}  {}",
            self.p50_ms, self.p99_ms, self.max_ms, self.bytes, self.path
        )
    }
}

pub async fn run(args: &PagesArgs) -> Result<Vec<PageLatency>> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| anyhow::anyhow!("http client: {e}"))?;
    let mut out = Vec::with_capacity(args.paths.len());
    for path in &args.paths {
        let url = format!("{}{path}", args.server.trim_end_matches('/'));
        let bytes = fetch(&http, &url).await?;
        let mut ms = Vec::with_capacity(args.requests);
        for _ in 0..args.requests {
            let start = Instant::now();
            fetch(&http, &url).await?;
            ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        ms.sort_by(f64::total_cmp);
        out.push(PageLatency {
            path: path.clone(),
            bytes,
            p50_ms: super::percentile(&mut ms, 0.50),
            p99_ms: super::percentile(&mut ms, 0.99),
            max_ms: ms.last().copied().unwrap_or(0.0),
        });
    }
    Ok(out)
}

/// GETs `url`, which must answer 200; returns the body's size.
async fn fetch(http: &reqwest::Client, url: &str) -> Result<usize> {
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(Error::BadRequest(format!(
            "GET {url}: {}",
            response.status()
        )));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    Ok(body.len())
}
