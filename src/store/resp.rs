//! The RESP subset clients speak: arrays of bulk strings (what redis-cli and redis-benchmark
//! send) and inline commands (`PING\r\n` typed into a terminal), and the reply encodings.

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
                "value of {bytes} bytes exceeds the limit of {limit_bytes} bytes (value_bytes_max)"
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
}

/// A reply as a client reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

/// A blocking RESP client over one connection: for tests, benches and tools.
pub struct Client {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
}

impl Client {
    pub fn connect(addr: std::net::SocketAddr) -> std::io::Result<Client> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Client { reader: std::io::BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Give up on a reply after `timeout` (the connection is then unusable).
    pub fn set_timeout(&self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
        self.writer.set_read_timeout(timeout)
    }

    /// Send raw bytes (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.writer.write_all(bytes)
    }

    /// Send one command as an array of bulk strings and read its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        let items: Vec<Vec<u8>> = args.iter().map(|a| bulk(Some(a))).collect();
        self.send_raw(&array(&items))?;
        self.read_reply()
    }

    pub fn read_reply(&mut self) -> std::io::Result<Reply> {
        read_reply(&mut self.reader)
    }
}

fn bad_reply(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("malformed reply: {what}"))
}

pub fn read_reply(reader: &mut impl std::io::BufRead) -> std::io::Result<Reply> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    if !line.ends_with(b"\r\n") {
        return Err(bad_reply("line without CRLF"));
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let number = || text.parse::<i64>().map_err(|_| bad_reply("bad integer"));
    match line[0] {
        b'+' => Ok(Reply::Simple(text)),
        b'-' => Ok(Reply::Error(text)),
        b':' => Ok(Reply::Integer(number()?)),
        b'$' => {
            let len = number()?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let mut data = vec![0u8; len as usize + 2];
            reader.read_exact(&mut data)?;
            data.truncate(len as usize);
            Ok(Reply::Bulk(Some(data)))
        }
        b'*' => {
            let len = number()?;
            let mut items = Vec::new();
            for _ in 0..len.max(0) {
                items.push(read_reply(reader)?);
            }
            Ok(Reply::Array(items))
        }
        _ => Err(bad_reply("unknown type byte")),
    }
}
