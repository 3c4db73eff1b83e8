//! The explorer's HTTP front. stateright's explorer serves its page and a JSON API
//! (`/.status`, `/.states/...`, `/.runtocompletion`) on an address of its own; this front
//! listens on the user's `--addr`, forwards that API (and stateright's stylesheet and
//! knockout.js) unchanged, serves replicheck's patched copy of the page (`ui/index.htm`,
//! `ui/app.js`, `ui/replicheck.css`) and answers `/.replicheck/path/I/A1/A2...` with
//! [`path_report`](super::path_report). A path the model cannot follow is refused here with a
//! 404: stateright's server would panic on some of them (its SVG path rebuild does).

use super::{follow, path_report, Explorable};
use crate::model::World;
use stateright::Model;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tiny_http::{Header, Method, Response, ResponseBox, Server};

const INDEX: &str = include_str!("ui/index.htm");
const APP_JS: &str = include_str!("ui/app.js");
const CSS: &str = include_str!("ui/replicheck.css");

/// A front bound to the user's address: binding is the step that can fail on bad or busy
/// input, so it is separate from serving.
pub struct Front {
    server: Server,
}

/// Bind the user's address (a runtime failure if it is taken or not ours).
pub fn bind(addr: SocketAddr) -> Result<Front, String> {
    // std binds first: its error says why (in use, not available); tiny_http's hides it.
    let listener = TcpListener::bind(addr).map_err(|e| e.to_string())?;
    let server = Server::from_listener(listener, None).map_err(|e| e.to_string())?;
    Ok(Front { server })
}

impl Front {
    /// Start stateright's explorer for `world` on a free loopback port and serve until the
    /// process is stopped.
    pub fn serve(self, world: World, variant: String) -> Result<(), String> {
        let inner = {
            let probe =
                TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
            probe.local_addr().map_err(|e| e.to_string())?
        };
        let model = Explorable::new(world.clone());
        std::thread::spawn(move || {
            // Serves until the process ends.
            let _checker = model.checker().serve(inner);
        });
        wait_until_listening(inner)?;
        loop {
            let mut rq = match self.server.recv() {
                Ok(rq) => rq,
                Err(e) => return Err(format!("explore: {e}")),
            };
            let url = rq.url().to_string();
            let method = rq.method().clone();
            let mut body = Vec::new();
            let _ = rq.as_reader().read_to_end(&mut body);
            let response = route(&world, &variant, inner, &method, &url);
            // A browser that went away is no reason to stop serving.
            let _ = rq.respond(response);
        }
    }
}

fn wait_until_listening(addr: SocketAddr) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("explore: stateright's explorer did not start on {addr}"))
}

fn typed(body: impl Into<Vec<u8>>, content_type: &str) -> ResponseBox {
    let header = Header::from_bytes("Content-Type", content_type).expect("a valid header");
    Response::from_data(body.into()).with_header(header).boxed()
}

fn not_found(message: String) -> ResponseBox {
    Response::from_string(message).with_status_code(404).boxed()
}

/// The explorer path's indices (`/0/3/1` -> [0, 3, 1]); `None` if one is not a number.
fn indices(path: &str) -> Option<Vec<usize>> {
    let path = path.split('?').next().unwrap_or("").trim_matches('/');
    if path.is_empty() {
        return Some(Vec::new());
    }
    path.split('/').map(|i| i.parse().ok()).collect()
}

fn route(world: &World, variant: &str, inner: SocketAddr, method: &Method, url: &str) -> ResponseBox {
    match (method, url) {
        (Method::Get, "/") | (Method::Get, "/index.htm") => typed(INDEX, "text/html; charset=utf-8"),
        (Method::Get, "/app.js") => typed(APP_JS, "application/javascript; charset=utf-8"),
        (Method::Get, "/replicheck.css") => typed(CSS, "text/css; charset=utf-8"),
        (Method::Get, "/app.css") => forward(inner, "GET", url, "text/css; charset=utf-8"),
        (Method::Get, "/knockout-3.5.0.js") => forward(inner, "GET", url, "application/javascript"),
        (Method::Get, "/.status") => forward(inner, "GET", url, "application/json"),
        (Method::Post, "/.runtocompletion") => forward(inner, "POST", url, "text/plain"),
        (Method::Get, _) => {
            if let Some(rest) = url.strip_prefix("/.states") {
                match indices(rest) {
                    Some(ix) if ix.is_empty() => forward(inner, "GET", url, "application/json"),
                    Some(ix) => match follow(world, &ix) {
                        Ok(_) => forward(inner, "GET", url, "application/json"),
                        Err(e) => not_found(e),
                    },
                    None => not_found(format!("not an explorer path: {rest}")),
                }
            } else if let Some(rest) = url.strip_prefix("/.replicheck/path") {
                match indices(rest) {
                    Some(ix) if ix.is_empty() => {
                        not_found("an explorer path starts with an initial-state index".into())
                    }
                    Some(ix) => match path_report(world, variant, &ix) {
                        Ok(report) => {
                            typed(serde_json::to_vec(&report).expect("reports serialize"), "application/json")
                        }
                        Err(e) => not_found(e),
                    },
                    None => not_found(format!("not an explorer path: {rest}")),
                }
            } else {
                not_found(format!("no such page: {url}"))
            }
        }
        _ => Response::empty(405).boxed(),
    }
}

/// One request to stateright's server (HTTP/1.0: it answers with a length and closes).
fn forward(inner: SocketAddr, method: &str, url: &str, content_type: &str) -> ResponseBox {
    match exchange(inner, method, url) {
        Ok((status, body)) => typed(body, content_type).with_status_code(status),
        Err(e) => Response::from_string(format!("stateright's explorer did not answer: {e}"))
            .with_status_code(502)
            .boxed(),
    }
}

fn exchange(inner: SocketAddr, method: &str, url: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(inner)?;
    // "Run to completion" explores the whole state space before stateright answers.
    stream.set_read_timeout(Some(Duration::from_secs(3600)))?;
    write!(stream, "{method} {url} HTTP/1.0\r\nHost: {inner}\r\nContent-Length: 0\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return Err(std::io::Error::other("a chunked answer (not expected for HTTP/1.0)"));
    }
    Ok((status, raw[split + 4..].to_vec()))
}
