//! The RESP subset clients speak: arrays of bulk strings (what redis-cli and redis-benchmark
//! send) and inline commands (`PING\r\n` typed into a terminal), and the reply encodings.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Arguments in one command at most.
pub const ARGS_MAX: usize = 1024;
/// An inline command line's length at most.
pub const INLINE_BYTES_MAX: usize = 64 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RespError {
    /// The bytes are not RESP; the connection cannot be resynchronised and is closed.
    Protocol(String),
    /// A bulk string longer than the configured limit; the connection is closed rather than
    /// reading the whole value.
    TooLarge { bytes: usize, limit_bytes: usize },
}

impl RespError {
    pub fn reply(&self) -> Vec<u8> {
        match self {
            RespError::Protocol(why) => error(&format!("Protocol error: {why}")),
            RespError::TooLarge { bytes, limit_bytes } => error(&format!(
                "argument of {bytes} bytes exceeds the limit of {limit_bytes} bytes (value_bytes_max bounds every key and value)"
            )),
        }
    }
}

/// A complete command's arguments, and the bytes it took from the buffer.
pub type Parsed = (Vec<Vec<u8>>, usize);

/// Parse one command from the front of `buf`: `Ok(None)` while incomplete, otherwise the
/// arguments and how many bytes they took.
pub fn parse_command(buf: &[u8], value_bytes_max: usize) -> Result<Option<Parsed>, RespError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] != b'*' {
        return parse_inline(buf);
    }
    let Some((count, mut at)) = parse_header(buf, 0, b'*')? else { return Ok(None) };
    if count < 1 || count > ARGS_MAX as i64 {
        return Err(RespError::Protocol(format!("array of {count} arguments (1 to {ARGS_MAX} allowed)")));
    }
    let mut args = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if at >= buf.len() {
            return Ok(None);
        }
        if buf[at] != b'$' {
            return Err(RespError::Protocol(format!("expected '$', got {:?}", char::from(buf[at]))));
        }
        let Some((len, start)) = parse_header(buf, at, b'$')? else { return Ok(None) };
        if len < 0 {
            return Err(RespError::Protocol(format!("invalid bulk length {len}")));
        }
        let len = len as usize;
        if len > value_bytes_max {
            return Err(RespError::TooLarge { bytes: len, limit_bytes: value_bytes_max });
        }
        if buf.len() < start + len + 2 {
            return Ok(None);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(RespError::Protocol("bulk string not terminated by CRLF".into()));
        }
        args.push(buf[start..start + len].to_vec());
        at = start + len + 2;
    }
    Ok(Some((args, at)))
}

/// `<marker><integer>\r\n` at `at`: the integer and where the next item starts.
fn parse_header(buf: &[u8], at: usize, marker: u8) -> Result<Option<(i64, usize)>, RespError> {
    debug_assert_eq!(buf[at], marker);
    let Some(cr) = buf[at..].iter().take(32).position(|&b| b == b'\r') else {
        if buf.len() - at > 32 {
            return Err(RespError::Protocol("length line too long".into()));
        }
        return Ok(None);
    };
    let line_end = at + cr;
    if buf.len() < line_end + 2 {
        return Ok(None);
    }
    if buf[line_end + 1] != b'\n' {
        return Err(RespError::Protocol("expected CRLF".into()));
    }
    let text =
        std::str::from_utf8(&buf[at + 1..line_end]).map_err(|_| RespError::Protocol("bad length".into()))?;
    let n: i64 = text.parse().map_err(|_| RespError::Protocol(format!("invalid length {text:?}")))?;
    Ok(Some((n, line_end + 2)))
}

fn parse_inline(buf: &[u8]) -> Result<Option<Parsed>, RespError> {
    let Some(nl) = buf.iter().take(INLINE_BYTES_MAX + 1).position(|&b| b == b'\n') else {
        if buf.len() > INLINE_BYTES_MAX {
            return Err(RespError::Protocol(format!("inline command longer than {INLINE_BYTES_MAX} bytes")));
        }
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let args: Vec<Vec<u8>> =
        line.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).map(<[u8]>::to_vec).collect();
    if args.len() > ARGS_MAX {
        return Err(RespError::Protocol(format!("more than {ARGS_MAX} arguments")));
    }
    Ok(Some((args, nl + 1)))
}

pub fn simple(text: &str) -> Vec<u8> {
    format!("+{text}\r\n").into_bytes()
}

pub fn error(text: &str) -> Vec<u8> {
    // A reply line cannot hold CR or LF.
    let clean: String = text.chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }).collect();
    format!("-ERR {clean}\r\n").into_bytes()
}

pub fn integer(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

pub fn bulk(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        None => b"$-1\r\n".to_vec(),
        Some(bytes) => {
            let mut out = format!("${}\r\n", bytes.len()).into_bytes();
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
            out
        }
    }
}

pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for item in items {
        out.extend_from_slice(item);
    }
    out
}

/// Largest bulk reply the client accepts.
pub const REPLY_BYTES_MAX: usize = 16 * 1024 * 1024;
/// A reply's type-and-length (or simple string, or error) line at most.
const REPLY_LINE_BYTES_MAX: u64 = 64 * 1024;
/// Elements of an array reply at most, and how deep arrays may nest.
const ARRAY_LEN_MAX: usize = 1024 * 1024;
const ARRAY_DEPTH_MAX: usize = 8;

/// A reply as a client reads it. An error reply keeps its full text (`ERR ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

#[derive(Debug)]
pub enum ClientError {
    /// No reply within the request timeout; the request may still take effect.
    Timeout,
    /// Connecting failed, or the connection broke; the request may have taken effect.
    Io(io::Error),
    /// The server answered with an error reply (its text without the `ERR ` prefix).
    Server(String),
    /// The reply is not RESP, or not the reply the command expects.
    Protocol(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Timeout => write!(f, "timed out"),
            ClientError::Io(e) => write!(f, "connection: {e}"),
            ClientError::Server(e) => write!(f, "server: {e}"),
            ClientError::Protocol(e) => write!(f, "protocol: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

fn from_io(e: io::Error) -> ClientError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::Timeout,
        _ => ClientError::Io(e),
    }
}

/// A blocking RESP client over one connection: the load generator, `store run`, benches,
/// tests. `send_raw` lets tests send malformed input.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Connect with no timeouts: a request waits for its reply as long as it takes.
    pub fn connect(addr: SocketAddr) -> Result<Client, ClientError> {
        Client::from_stream(TcpStream::connect(addr).map_err(from_io)?)
    }

    /// Connect within `timeout`, and give every request `timeout` to be sent and answered
    /// (then `ClientError::Timeout`, and the connection is out of step: drop it).
    pub fn connect_timeout(addr: SocketAddr, timeout: Duration) -> Result<Client, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(from_io)?;
        stream.set_read_timeout(Some(timeout)).map_err(ClientError::Io)?;
        stream.set_write_timeout(Some(timeout)).map_err(ClientError::Io)?;
        Client::from_stream(stream)
    }

    fn from_stream(stream: TcpStream) -> Result<Client, ClientError> {
        stream.set_nodelay(true).map_err(ClientError::Io)?;
        let reader = BufReader::new(stream.try_clone().map_err(ClientError::Io)?);
        Ok(Client { reader, writer: stream })
    }

    /// Give up on a reply after `timeout` (the connection is then unusable).
    pub fn set_timeout(&self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.writer.set_read_timeout(timeout).map_err(ClientError::Io)
    }

    /// Send raw bytes (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.writer.write_all(bytes).map_err(from_io)
    }

    /// Send one command as an array of bulk strings and read its reply. An error reply is
    /// `Ok(Reply::Error)`.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, ClientError> {
        let items: Vec<Vec<u8>> = args.iter().map(|a| bulk(Some(a))).collect();
        self.send_raw(&array(&items))?;
        self.read_reply()
    }

    pub fn read_reply(&mut self) -> Result<Reply, ClientError> {
        read_reply(&mut self.reader)
    }

    pub fn ping(&mut self) -> Result<(), ClientError> {
        match self.call(&[b"PING"])? {
            Reply::Simple(s) if s == "PONG" => Ok(()),
            other => Err(unexpected("PING", other)),
        }
    }

    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        match self.call(&[b"GET", key])? {
            Reply::Bulk(value) => Ok(value),
            other => Err(unexpected("GET", other)),
        }
    }

    /// SET, with an idempotency token if given (`SET key value TOKEN t`).
    pub fn set(&mut self, key: &[u8], value: &[u8], token: Option<&[u8]>) -> Result<(), ClientError> {
        let reply = match token {
            Some(token) => self.call(&[b"SET", key, value, b"TOKEN", token])?,
            None => self.call(&[b"SET", key, value])?,
        };
        match reply {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(unexpected("SET", other)),
        }
    }

    pub fn info(&mut self) -> Result<String, ClientError> {
        match self.call(&[b"INFO"])? {
            Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text).into_owned()),
            other => Err(unexpected("INFO", other)),
        }
    }
}

fn unexpected(command: &str, reply: Reply) -> ClientError {
    match reply {
        Reply::Error(e) => ClientError::Server(e.strip_prefix("ERR ").unwrap_or(&e).to_string()),
        other => ClientError::Protocol(format!("unexpected reply to {command}: {other:?}")),
    }
}

/// Read one reply; limits on line length, bulk size, array length and nesting keep a broken
/// or hostile server from exhausting memory.
pub fn read_reply(reader: &mut impl BufRead) -> Result<Reply, ClientError> {
    read_reply_nested(reader, 0)
}

fn read_reply_nested(reader: &mut impl BufRead, depth: usize) -> Result<Reply, ClientError> {
    if depth > ARRAY_DEPTH_MAX {
        return Err(ClientError::Protocol("arrays nested too deep".into()));
    }
    let mut line = Vec::new();
    let n = Read::take(&mut *reader, REPLY_LINE_BYTES_MAX).read_until(b'\n', &mut line).map_err(from_io)?;
    if n == 0 {
        return Err(ClientError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")));
    }
    if line.len() < 3 || !line.ends_with(b"\r\n") {
        return Err(ClientError::Protocol(format!(
            "malformed reply line {:?}",
            String::from_utf8_lossy(&line)
        )));
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let int =
        |s: &str| s.parse::<i64>().map_err(|_| ClientError::Protocol(format!("bad length or integer {s:?}")));
    match line[0] {
        b'+' => Ok(Reply::Simple(text)),
        b'-' => Ok(Reply::Error(text)),
        b':' => Ok(Reply::Integer(int(&text)?)),
        b'$' => {
            let len = int(&text)?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let len = len as usize;
            if len > REPLY_BYTES_MAX {
                return Err(ClientError::Protocol(format!(
                    "bulk reply of {len} bytes exceeds {REPLY_BYTES_MAX}"
                )));
            }
            let mut data = vec![0u8; len + 2];
            reader.read_exact(&mut data).map_err(from_io)?;
            if !data.ends_with(b"\r\n") {
                return Err(ClientError::Protocol("bulk reply without CRLF".into()));
            }
            data.truncate(len);
            Ok(Reply::Bulk(Some(data)))
        }
        b'*' => {
            let len = int(&text)?;
            if len < 0 {
                return Ok(Reply::Array(Vec::new()));
            }
            if len as usize > ARRAY_LEN_MAX {
                return Err(ClientError::Protocol(format!("array of {len} elements")));
            }
            (0..len).map(|_| read_reply_nested(reader, depth + 1)).collect::<Result<_, _>>().map(Reply::Array)
        }
        _ => {
            Err(ClientError::Protocol(format!("unknown reply type in {:?}", String::from_utf8_lossy(&line))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(parts: &[&str]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.as_bytes().to_vec()).collect()
    }

    #[test]
    fn parses_arrays_incrementally() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..30 {
            assert_eq!(parse_command(&full[..cut], 100), Ok(None), "prefix of {cut} bytes is incomplete");
        }
        let (first, used) = parse_command(full, 100).unwrap().unwrap();
        assert_eq!(first, args(&["SET", "k", "hello"]));
        assert_eq!(parse_command(&full[used..], 100).unwrap().unwrap().0, args(&["PING"]));
    }

    #[test]
    fn parses_inline_commands() {
        assert_eq!(parse_command(b"GET  key\r\n", 100).unwrap().unwrap(), (args(&["GET", "key"]), 10));
        assert_eq!(parse_command(b"PING", 100), Ok(None));
    }

    #[test]
    fn rejects_malformed_and_oversized_input() {
        assert!(matches!(parse_command(b"*1\r\n+PING\r\n", 100), Err(RespError::Protocol(_))));
        assert!(matches!(parse_command(b"*x\r\n", 100), Err(RespError::Protocol(_))));
        assert!(matches!(parse_command(b"*0\r\n", 100), Err(RespError::Protocol(_))));
        assert!(matches!(parse_command(b"*1\r\n$2\r\nabc\r\n", 100), Err(RespError::Protocol(_))));
        assert_eq!(
            parse_command(b"*1\r\n$101\r\n", 100),
            Err(RespError::TooLarge { bytes: 101, limit_bytes: 100 })
        );
    }

    #[test]
    fn encodes_replies() {
        assert_eq!(bulk(None), b"$-1\r\n");
        assert_eq!(bulk(Some(b"ab")), b"$2\r\nab\r\n");
        assert_eq!(array(&[integer(1), simple("OK")]), b"*2\r\n:1\r\n+OK\r\n");
        assert_eq!(error("a\r\nb"), b"-ERR a  b\r\n");
    }

    #[test]
    fn reads_replies() {
        let parse = |text: &[u8]| read_reply(&mut BufReader::new(text));
        assert_eq!(parse(b":42\r\n").unwrap(), Reply::Integer(42));
        assert_eq!(parse(b"-ERR no\r\n").unwrap(), Reply::Error("ERR no".into()));
        assert_eq!(parse(b"$3\r\na\r\n\r\n").unwrap(), Reply::Bulk(Some(b"a\r\n".to_vec())));
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\n$-1\r\n").unwrap(),
            Reply::Array(vec![Reply::Bulk(Some(b"a".to_vec())), Reply::Bulk(None)])
        );
        assert!(matches!(parse(b"?x\r\n"), Err(ClientError::Protocol(_))));
        assert!(matches!(parse(b"+OK\n"), Err(ClientError::Protocol(_))));
        assert!(matches!(parse(b"$3\r\nabcd\r\n"), Err(ClientError::Protocol(_))));
        assert!(matches!(parse(b"$5\r\nab\r\n"), Err(ClientError::Io(_))));
        assert!(matches!(parse(b""), Err(ClientError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof));
        assert!(matches!(parse(b"$99999999999\r\n"), Err(ClientError::Protocol(_))));
        let nested = [b"*1\r\n".repeat(ARRAY_DEPTH_MAX + 2), b":1\r\n".to_vec()].concat();
        assert!(matches!(parse(&nested), Err(ClientError::Protocol(e)) if e.contains("nested")));
    }
}
