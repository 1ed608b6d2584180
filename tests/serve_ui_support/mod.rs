//! A real headless Chromium driven through `chromedriver` (WebDriver) with fantoccini,
//! for the web UI's tests: started on a free loopback port with a new empty profile,
//! waited on by polling what the page shows, screenshots saved on failure.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long a wait for the page lasts before the test fails.
pub const LIMIT: Duration = Duration::from_secs(60);

/// What a failed step says.
pub type Step<T> = Result<T, String>;

/// Fails the step with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// The first of `names` found on `PATH`.
fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium and chromedriver, or `None` (the tests skip) when either is missing and
/// `CI` is not set; with `CI` set a missing browser fails the test.
pub fn tools() -> Option<(PathBuf, PathBuf)> {
    let chromium = which(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = which(&["chromedriver"]);
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but chromium or chromedriver is not installed \
                 (apt-get install chromium chromium-driver)"
            );
            eprintln!(
                "SKIPPED: the web UI's browser tests need `chromium` and `chromedriver` on PATH \
                 (Debian: apt-get install chromium chromium-driver)"
            );
            None
        }
    }
}

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

/// A chromedriver process and a browser session through it.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    /// The test's name: failure screenshots are named after it.
    pub name: String,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium with a new empty
    /// profile; `None` when they are not installed (see [`tools`]).
    pub async fn start(name: &str) -> Option<Self> {
        let (chromium, chromedriver) = tools()?;
        let profile = tempfile::tempdir().expect("a profile folder");
        let mut last = String::new();
        // A port found free may be taken before chromedriver binds it: try a few.
        for _ in 0..5 {
            let port = free_port();
            let log = profile.path().join(format!("chromedriver-{port}.log"));
            let mut driver = Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .arg(format!("--log-path={}", log.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts");
            let url = format!("http://127.0.0.1:{port}");
            let caps = json!({
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chromium.to_str().expect("a UTF-8 path"),
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        "--disable-dev-shm-usage", "--window-size=1280,1000",
                        format!("--user-data-dir={}", profile.path().join("profile").display()),
                    ],
                },
            });
            let Value::Object(caps) = caps else {
                unreachable!("an object")
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(30) {
                let connector = hyper_util::client::legacy::connect::HttpConnector::new();
                match ClientBuilder::new(connector)
                    .capabilities(caps.clone())
                    .connect(&url)
                    .await
                {
                    Ok(client) => {
                        return Some(Self {
                            client,
                            driver,
                            _profile: profile,
                            name: name.into(),
                        });
                    }
                    Err(e) => last = e.to_string(),
                }
                if let Ok(Some(_)) = driver.try_wait() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = driver.kill();
            let _ = driver.wait();
            last = format!(
                "{last}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!("no browser session through chromedriver: {last}");
    }

    /// Opens `url` and waits until the page's script has rendered it.
    pub async fn open(&self, url: &str) -> Step<()> {
        self.client
            .goto(url)
            .await
            .map_err(|e| format!("opening {url}: {e}"))?;
        self.until(
            "the page is rendered",
            "return document.body.dataset.ready || null",
        )
        .await
        .map(|_| ())
    }

    /// Runs `script` (a function body) and returns what it returns.
    pub async fn js(&self, script: &str) -> Step<Value> {
        self.client
            .execute(script, vec![])
            .await
            .map_err(|e| format!("running `{script}`: {e}"))
    }

    /// Waits until `script` returns something truthy (neither null, false, 0 nor "");
    /// returns it.
    pub async fn until(&self, what: &str, script: &str) -> Step<Value> {
        let start = Instant::now();
        let mut last = Value::Null;
        while start.elapsed() < LIMIT {
            last = self.js(script).await?;
            let truthy = match &last {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return Ok(last);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "waited {} s for {what}; last `{script}` gave {last}",
            LIMIT.as_secs()
        ))
    }

    /// The element `css`.
    pub async fn find(&self, css: &str) -> Step<fantoccini::elements::Element> {
        self.client
            .find(Locator::Css(css))
            .await
            .map_err(|e| format!("no element `{css}`: {e}"))
    }

    /// A PNG of the window, written to `path`.
    pub async fn screenshot(&self, path: &Path) -> Step<()> {
        let png = self
            .client
            .screenshot()
            .await
            .map_err(|e| format!("screenshot: {e}"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// When `PACTGRAPH_SCREENSHOTS` is set: the window as `docs/images/serve-NAME.png`,
    /// for the guide.
    pub async fn for_docs(&self, name: &str) -> Step<()> {
        if std::env::var_os("PACTGRAPH_SCREENSHOTS").is_none() {
            return Ok(());
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/images")
            .join(format!("serve-{name}.png"));
        // The whole page, not only the window: as tall as the document (at most 2400 px).
        let height = self
            .js("return document.documentElement.scrollHeight")
            .await?
            .as_u64()
            .unwrap_or(1000)
            .clamp(600, 2400);
        let resize = |h: u64| {
            let client = self.client.clone();
            async move {
                client
                    .set_window_size(1280, u32::try_from(h).unwrap_or(1000))
                    .await
                    .map_err(|e| format!("resizing the window: {e}"))
            }
        };
        resize(height).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let shot = self.screenshot(&path).await;
        resize(1000).await?;
        shot?;
        eprintln!("wrote {}", path.display());
        Ok(())
    }

    /// Ends the session and chromedriver. On `Err`, first saves a screenshot and the
    /// page's text under `target/serve-ui-failures/`, then panics with the failure.
    pub async fn finish(mut self, result: Step<()>) {
        if let Err(failure) = &result {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/serve-ui-failures");
            let png = dir.join(format!("{}.png", self.name));
            let shot = self.screenshot(&png).await;
            let text = self
                .js("return document.body.innerText")
                .await
                .unwrap_or(Value::Null);
            let url = self.client.current_url().await.map(|u| u.to_string());
            let _ = self.client.clone().close().await;
            let _ = self.driver.kill();
            let _ = self.driver.wait();
            panic!(
                "{failure}\nat {url:?}; screenshot: {} ({shot:?})\npage text:\n{}",
                png.display(),
                text.as_str().unwrap_or_default()
            );
        }
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
