//! The coordinator<->node protocol: length-prefixed binary frames over TCP.
//!
//! A frame is a big-endian `u32` payload length, then the payload. Every request carries an id
//! chosen by the coordinator, and the node echoes it in the reply, so one connection carries
//! many requests at once (replies may come back out of order: a read is not queued behind a
//! write that waits for an fsync).

use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;

/// Largest frame either side accepts: a value of the largest allowed size plus its key and
/// headers, with room to spare. A larger length prefix is a protocol error, not an allocation.
pub const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Entries returned by one `Scan` at most, so a catch-up copy proceeds in bounded frames.
pub const SCAN_ENTRIES_MAX: u32 = 1024;

/// A value as stored: bytes, or a tombstone left by DEL (it carries a version like a write).
pub type StoredValue = Option<Vec<u8>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRequest {
    /// Store `value` under `key` at `version` if that is newer than what the node holds.
    /// Acked only once durable.
    Replicate {
        key: Vec<u8>,
        version: u64,
        value: StoredValue,
    },
    Read {
        key: Vec<u8>,
    },
    Heartbeat,
    /// Up to `limit` entries with keys strictly after `after` (from the start if `None`), in
    /// key order: the catch-up copy to a replacement node reads its source this way.
    Scan {
        after: Option<Vec<u8>>,
        limit: u32,
    },
    /// The first frame on every connection: who the caller expects to reach. A node that is
    /// not `node_id` of cluster `cluster_id` answers `Failed` and closes the connection, so a
    /// coordinator whose node's address now belongs to another process (a port taken again
    /// after the node died) never reads or writes someone else's data. Answered `Alive`.
    Hello {
        cluster_id: u64,
        node_id: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeReply {
    /// A `Replicate` is durable; `version` is the node's version of the key now (the written
    /// one, or a newer one it already held).
    Stored {
        version: u64,
    },
    /// The node's version of a key (0 and no value: never written).
    Value {
        version: u64,
        value: StoredValue,
    },
    /// Heartbeat answer: who answered and the highest version it holds for any key.
    Alive {
        node_id: u8,
        max_version: u64,
    },
    Entries {
        entries: Vec<(Vec<u8>, u64, StoredValue)>,
    },
    Failed {
        message: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame<T> {
    pub id: u64,
    pub body: T,
}

const REQ_REPLICATE: u8 = 1;
const REQ_READ: u8 = 2;
const REQ_HEARTBEAT: u8 = 3;
const REQ_SCAN: u8 = 4;
const REQ_HELLO: u8 = 5;
const REP_STORED: u8 = 11;
const REP_VALUE: u8 = 12;
const REP_ALIVE: u8 = 13;
const REP_ENTRIES: u8 = 14;
const REP_FAILED: u8 = 15;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("values are limited far below 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_value(out: &mut Vec<u8>, value: &StoredValue) {
    match value {
        None => out.push(0),
        Some(bytes) => {
            out.push(1);
            put_bytes(out, bytes);
        }
    }
}

/// Reads fields off a payload; every read checks the remaining length.
struct Reader<'a> {
    rest: &'a [u8],
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed frame: {what}"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> io::Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(malformed(what));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> io::Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> io::Result<u32> {
        Ok(u32::from_be_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &str) -> io::Result<u64> {
        Ok(u64::from_be_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self, what: &str) -> io::Result<Vec<u8>> {
        let len = self.u32(what)? as usize;
        Ok(self.take(len, what)?.to_vec())
    }
    fn value(&mut self, what: &str) -> io::Result<StoredValue> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes(what)?)),
            _ => Err(malformed(what)),
        }
    }
    fn finish(&self) -> io::Result<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(malformed("trailing bytes"))
        }
    }
}

pub trait Wire: Sized {
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(payload: &[u8]) -> io::Result<Self>;
}

impl Wire for NodeRequest {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            NodeRequest::Replicate { key, version, value } => {
                out.push(REQ_REPLICATE);
                put_bytes(out, key);
                out.extend_from_slice(&version.to_be_bytes());
                put_value(out, value);
            }
            NodeRequest::Read { key } => {
                out.push(REQ_READ);
                put_bytes(out, key);
            }
            NodeRequest::Heartbeat => out.push(REQ_HEARTBEAT),
            NodeRequest::Scan { after, limit } => {
                out.push(REQ_SCAN);
                put_value(out, after);
                out.extend_from_slice(&limit.to_be_bytes());
            }
            NodeRequest::Hello { cluster_id, node_id } => {
                out.push(REQ_HELLO);
                out.extend_from_slice(&cluster_id.to_be_bytes());
                out.push(*node_id);
            }
        }
    }

    fn decode(payload: &[u8]) -> io::Result<Self> {
        let mut r = Reader { rest: payload };
        let request = match r.u8("request tag")? {
            REQ_REPLICATE => NodeRequest::Replicate {
                key: r.bytes("key")?,
                version: r.u64("version")?,
                value: r.value("value")?,
            },
            REQ_READ => NodeRequest::Read { key: r.bytes("key")? },
            REQ_HEARTBEAT => NodeRequest::Heartbeat,
            REQ_SCAN => NodeRequest::Scan { after: r.value("scan start")?, limit: r.u32("scan limit")? },
            REQ_HELLO => NodeRequest::Hello { cluster_id: r.u64("cluster id")?, node_id: r.u8("node id")? },
            _ => return Err(malformed("unknown request tag")),
        };
        r.finish()?;
        Ok(request)
    }
}

impl Wire for NodeReply {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            NodeReply::Stored { version } => {
                out.push(REP_STORED);
                out.extend_from_slice(&version.to_be_bytes());
            }
            NodeReply::Value { version, value } => {
                out.push(REP_VALUE);
                out.extend_from_slice(&version.to_be_bytes());
                put_value(out, value);
            }
            NodeReply::Alive { node_id, max_version } => {
                out.push(REP_ALIVE);
                out.push(*node_id);
                out.extend_from_slice(&max_version.to_be_bytes());
            }
            NodeReply::Entries { entries } => {
                out.push(REP_ENTRIES);
                let count = u32::try_from(entries.len()).expect("scans are bounded");
                out.extend_from_slice(&count.to_be_bytes());
                for (key, version, value) in entries {
                    put_bytes(out, key);
                    out.extend_from_slice(&version.to_be_bytes());
                    put_value(out, value);
                }
            }
            NodeReply::Failed { message } => {
                out.push(REP_FAILED);
                put_bytes(out, message.as_bytes());
            }
        }
    }

    fn decode(payload: &[u8]) -> io::Result<Self> {
        let mut r = Reader { rest: payload };
        let reply = match r.u8("reply tag")? {
            REP_STORED => NodeReply::Stored { version: r.u64("version")? },
            REP_VALUE => NodeReply::Value { version: r.u64("version")?, value: r.value("value")? },
            REP_ALIVE => NodeReply::Alive { node_id: r.u8("node id")?, max_version: r.u64("max version")? },
            REP_ENTRIES => {
                let count = r.u32("entry count")?;
                if count > SCAN_ENTRIES_MAX {
                    return Err(malformed("too many entries"));
                }
                let mut entries = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    entries.push((r.bytes("key")?, r.u64("version")?, r.value("value")?));
                }
                NodeReply::Entries { entries }
            }
            REP_FAILED => {
                NodeReply::Failed { message: String::from_utf8_lossy(&r.bytes("message")?).into_owned() }
            }
            _ => return Err(malformed("unknown reply tag")),
        };
        r.finish()?;
        Ok(reply)
    }
}

/// One frame's bytes: length prefix, request id, body.
pub fn encode_frame<T: Wire>(frame: &Frame<T>) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&frame.id.to_be_bytes());
    frame.body.encode(&mut out);
    let len = u32::try_from(out.len() - 4).expect("frames are bounded");
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// Read one frame; `Ok(None)` on a clean end of stream between frames.
pub async fn read_frame<T: Wire, R: AsyncReadExt + Unpin>(reader: &mut R) -> io::Result<Option<Frame<T>>> {
    let mut len_bytes = [0u8; 4];
    match reader.read_exact(&mut len_bytes).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut payload = vec![0u8; payload_len(len_bytes)?];
    reader.read_exact(&mut payload).await?;
    decode_payload(&payload).map(Some)
}

/// A frame's payload length from its prefix, if in range.
fn payload_len(prefix: [u8; 4]) -> io::Result<usize> {
    let len = u32::from_be_bytes(prefix) as usize;
    if !(8..=FRAME_BYTES_MAX).contains(&len) {
        return Err(malformed("frame length out of range"));
    }
    Ok(len)
}

/// A frame from its payload: request id, body.
fn decode_payload<T: Wire>(payload: &[u8]) -> io::Result<Frame<T>> {
    let id = u64::from_be_bytes(payload[..8].try_into().expect("payloads are at least 8 bytes"));
    Ok(Frame { id, body: T::decode(&payload[8..])? })
}

/// Frames read from a connection through one buffer: each read takes whatever has arrived,
/// and `buffered` tells without waiting whether a whole frame is already here, so a node takes
/// every request that arrived during a commit into the next group.
pub struct FrameReader {
    half: OwnedReadHalf,
    buf: Vec<u8>,
    /// Where the unparsed bytes of `buf` start.
    start: usize,
}

/// Bytes asked of the socket per read at least.
const READ_CHUNK_BYTES: usize = 64 * 1024;

impl FrameReader {
    pub fn new(half: OwnedReadHalf) -> FrameReader {
        FrameReader { half, buf: Vec::new(), start: 0 }
    }

    /// The next frame if it has arrived whole, without waiting.
    pub fn buffered<T: Wire>(&mut self) -> io::Result<Option<Frame<T>>> {
        let here = &self.buf[self.start..];
        let Some(prefix) = here.get(..4) else { return Ok(None) };
        let len = payload_len(prefix.try_into().expect("4 bytes"))?;
        let Some(payload) = here.get(4..4 + len) else { return Ok(None) };
        let frame = decode_payload(payload)?;
        self.start += 4 + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(frame))
    }

    /// Read what the socket holds now, without waiting: `false` if nothing has arrived.
    pub fn try_fill(&mut self) -> io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let filled = self.buf.len();
        self.buf.resize(filled + READ_CHUNK_BYTES, 0);
        let read = self.half.try_read(&mut self.buf[filled..]);
        self.buf.truncate(filled + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => Ok(true),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The next frame, waiting for it; `Ok(None)` on a clean end of stream between frames.
    pub async fn next<T: Wire>(&mut self) -> io::Result<Option<Frame<T>>> {
        loop {
            if let Some(frame) = self.buffered()? {
                return Ok(Some(frame));
            }
            self.half.readable().await?;
            match self.try_fill() {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && self.start == self.buf.len() => {
                    return Ok(None)
                }
                other => other?,
            };
        }
    }
}

pub async fn write_frame<T: Wire, W: AsyncWriteExt + Unpin>(
    writer: &mut W,
    frame: &Frame<T>,
) -> io::Result<()> {
    writer.write_all(&encode_frame(frame)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<T: Wire + PartialEq + std::fmt::Debug + Clone>(body: T) {
        let bytes = encode_frame(&Frame { id: 42, body: body.clone() });
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let frame: Frame<T> = rt.block_on(read_frame(&mut &bytes[..])).unwrap().unwrap();
        assert_eq!(frame, Frame { id: 42, body });
    }

    #[test]
    fn every_message_roundtrips() {
        roundtrip(NodeRequest::Replicate { key: b"k".to_vec(), version: 7, value: Some(b"v".to_vec()) });
        roundtrip(NodeRequest::Replicate { key: b"k".to_vec(), version: 8, value: None });
        roundtrip(NodeRequest::Read { key: vec![0, 255] });
        roundtrip(NodeRequest::Heartbeat);
        roundtrip(NodeRequest::Scan { after: Some(b"a".to_vec()), limit: 3 });
        roundtrip(NodeRequest::Hello { cluster_id: 0x0123_4567_89ab_cdef, node_id: 3 });
        roundtrip(NodeReply::Stored { version: 9 });
        roundtrip(NodeReply::Value { version: 0, value: None });
        roundtrip(NodeReply::Alive { node_id: 2, max_version: 11 });
        roundtrip(NodeReply::Entries {
            entries: vec![(b"a".to_vec(), 1, None), (b"b".to_vec(), 2, Some(vec![]))],
        });
        roundtrip(NodeReply::Failed { message: "disk full".into() });
    }

    /// Frames arriving in pieces of every size: whole frames only, none before its last
    /// byte, in order; the end of the stream between frames is the end, inside one an error.
    #[tokio::test]
    async fn a_frame_reader_yields_whole_frames_however_the_bytes_arrive() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let frames: Vec<Frame<NodeRequest>> = (0..20)
            .map(|id| Frame { id, body: NodeRequest::Read { key: vec![b'k'; id as usize * 37] } })
            .collect();
        let mut bytes: Vec<u8> = frames.iter().flat_map(encode_frame).collect();
        bytes.extend_from_slice(&encode_frame(&frames[0])[..6]); // a torn last frame
        let writer = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            for (i, piece) in bytes.chunks(13).enumerate() {
                stream.write_all(piece).await.unwrap();
                if i % 5 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
            }
        });
        let (read_half, _write_half) = tokio::net::TcpStream::connect(addr).await.unwrap().into_split();
        let mut reader = FrameReader::new(read_half);
        for expected in &frames {
            assert_eq!(reader.next::<NodeRequest>().await.unwrap().as_ref(), Some(expected));
        }
        writer.await.unwrap();
        let torn = reader.next::<NodeRequest>().await;
        assert_eq!(torn.map_err(|e| e.kind()), Err(io::ErrorKind::UnexpectedEof));
    }

    #[test]
    fn truncated_and_oversized_frames_are_errors() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let bytes = encode_frame(&Frame { id: 1, body: NodeRequest::Read { key: b"key".to_vec() } });
        let cut = &bytes[..bytes.len() - 1];
        assert!(rt.block_on(read_frame::<NodeRequest, _>(&mut &cut[..])).is_err());
        let huge = (FRAME_BYTES_MAX as u32 + 1).to_be_bytes();
        assert!(rt.block_on(read_frame::<NodeRequest, _>(&mut &huge[..])).is_err());
        let mut bad_tag = encode_frame(&Frame { id: 1, body: NodeRequest::Heartbeat });
        bad_tag[12] = 99;
        assert!(rt.block_on(read_frame::<NodeRequest, _>(&mut &bad_tag[..])).is_err());
    }
}
