//! A real S3-compatible server for the tests of the artifact bucket: the
//! `s3s-fs` binary (installed by `scripts/install-test-deps`) on
//! 127.0.0.1, over a temporary directory, with an access key and a secret.
//! s3s-fs keeps a bucket as a directory of its root and an object as a file
//! under it (`ROOT/BUCKET/results/7/output.txt`), so a test can see what
//! really reached the bucket. Killed on drop.
//!
//! Without the binary the test fails (it never skips): the message names
//! the script that installs it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kbot_server::config::S3Settings;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{ObjectStore, RetryConfig};
use tempfile::TempDir;

/// The bucket every [`S3Server`] starts with.
pub const BUCKET: &str = "kbot-artifacts";
const ACCESS_KEY: &str = "kbot-test-key";
const SECRET_KEY: &str = "kbot-test-secret-0123456789";
/// What s3s-fs logs (at info) once it listens, followed by its address.
const LISTENING: &str = "server is running at http://";

/// A running `s3s-fs` over a temporary root with [`BUCKET`] in it.
pub struct S3Server {
    binary: PathBuf,
    /// `root/` is the server's root; its logs sit beside it.
    dir: TempDir,
    port: u16,
    child: Option<Child>,
    starts: u32,
}

impl S3Server {
    /// Starts s3s-fs on a free port and creates [`BUCKET`].
    pub async fn start() -> S3Server {
        let binary = binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("root");
        // s3s-fs's CreateBucket is a mkdir of the bucket's directory under
        // its root; made before it starts, the bucket is there at once.
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket directory");
        let mut server = S3Server {
            binary,
            dir,
            port: 0,
            child: None,
            starts: 0,
        };
        server.spawn().await;
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's root directory: [`BUCKET`] is a directory in it.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Where the object `key` of [`BUCKET`] is on disk.
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.root().join(BUCKET).join(key)
    }

    /// The server config's `artifact_store` for [`BUCKET`]
    /// (`KBOT_ARTIFACT_STORE=s3://kbot-artifacts`, `KBOT_S3_*`).
    pub fn settings(&self) -> S3Settings {
        S3Settings {
            url: format!("s3://{BUCKET}"),
            endpoint: Some(self.endpoint()),
            region: "us-east-1".into(),
            credentials: Some((ACCESS_KEY.into(), SECRET_KEY.into())),
        }
    }

    /// A client of [`BUCKET`] with the server's credentials, not retrying:
    /// a test reads objects back through S3 with it.
    pub fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .with_retry(RetryConfig {
                max_retries: 0,
                retry_timeout: Duration::from_secs(5),
                ..RetryConfig::default()
            })
            .build()
            .expect("S3 client")
    }

    /// Kills the server (SIGKILL, as a crash): the port refuses
    /// connections; the root and what is in it stay.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the killed server again on the same root and port.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// Runs s3s-fs (on `self.port`, any free one when 0) and waits until it
    /// listens and answers a signed listing of [`BUCKET`].
    async fn spawn(&mut self) {
        self.starts += 1;
        let log = self.dir.path().join(format!("s3s-fs.{}.log", self.starts));
        let out = std::fs::File::create(&log).expect("s3s-fs log");
        let err = out.try_clone().expect("s3s-fs log");
        let child = Command::new(&self.binary)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.root())
            // Its log says where it listens (the port it was given, or the
            // one the kernel picked for 0).
            .env("RUST_LOG", "s3s_fs=info")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        self.port = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(port) = listening_port(&text) {
                break port;
            }
            if let Some(status) = self.exited() {
                panic!("s3s-fs exited ({status}) before listening:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "s3s-fs did not listen within 30 s:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Listening is not yet answering S3 with these credentials.
        let client = self.client();
        loop {
            match client.list_with_delimiter(None).await {
                Ok(_) => return,
                Err(e) => {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    assert!(
                        Instant::now() < deadline,
                        "s3s-fs does not answer a listing of {BUCKET}: {e}\n{text}"
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The port of s3s-fs's "server is running at http://127.0.0.1:PORT".
fn listening_port(log: &str) -> Option<u16> {
    let (_, rest) = log.split_once(LISTENING)?;
    let address: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    address.rsplit_once(':')?.1.parse().ok()
}

/// `s3s-fs` on PATH or in cargo's bin directory; a test fails without it.
fn binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    on_path
        .into_iter()
        .chain(cargo_home.map(|home| home.join("bin")))
        .map(|dir| dir.join("s3s-fs"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "s3s-fs, the S3 server of the artifact bucket tests, is not installed \
                 (not on PATH nor in cargo's bin directory): run scripts/install-test-deps"
            )
        })
}
