//! A second backend for the tests and the example: an rpc-server (its buffers are not host
//! memory, so the scheduler really splits and copies), else a second CPU backend.
//!
//! `GGML_RS_RPC_ENDPOINT` uses a running server; otherwise `GGML_RS_RPC_SERVER`, or
//! `ggml-rpc-server` next to the libraries (`GGML_RS_LIB_DIR`), is started on a free loopback
//! port and stopped when the `Second` is dropped.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ggml_rs_api::{Backend, Result};

pub struct Second {
    /// dropped before `server` (fields drop in order): the server answers its last calls
    pub backend: Backend,
    /// "rpc-server at 127.0.0.1:port" or "a second CPU backend (why)"
    pub what: String,
    #[allow(dead_code)]
    server: Server,
}

struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut s) = self.0.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

fn server_path() -> Option<PathBuf> {
    let p = std::env::var_os("GGML_RS_RPC_SERVER")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("GGML_RS_LIB_DIR").map(|d| PathBuf::from(d).join("ggml-rpc-server")))?;
    p.is_file().then_some(p)
}

/// The rpc-server backend, or (`None`) why there is none.
pub fn rpc() -> Result<std::result::Result<Second, String>> {
    if let Ok(endpoint) = std::env::var("GGML_RS_RPC_ENDPOINT") {
        let backend = Backend::rpc(&endpoint)?;
        return Ok(Ok(Second { backend, what: format!("rpc-server at {endpoint}"), server: Server(None) }));
    }
    let Some(path) = server_path() else {
        return Ok(Err("no ggml-rpc-server (set GGML_RS_RPC_SERVER or GGML_RS_RPC_ENDPOINT)".into()));
    };
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(50052);
    let endpoint = format!("127.0.0.1:{port}");
    let child = Command::new(&path).args(["-H", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("cannot start {}: {e}", path.display()))),
    };
    let start = Instant::now();
    while TcpStream::connect(&endpoint).is_err() {
        if start.elapsed() > Duration::from_secs(10) || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Err(format!("{} did not start on {endpoint}", path.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    match Backend::rpc(&endpoint) {
        Ok(backend) => Ok(Ok(Second { backend, what: format!("rpc-server at {endpoint}"), server: Server(Some(child)) })),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// The rpc-server backend, else a second CPU backend.
#[allow(dead_code)]
pub fn second() -> Result<Second> {
    match rpc()? {
        Ok(s) => Ok(s),
        Err(why) => Ok(Second { backend: Backend::cpu()?, what: format!("a second CPU backend ({why})"), server: Server(None) }),
    }
}
