//! Coordinator<->coordinator: the membership protocol's messages (`View`, `ViewAck`,
//! `Propose`) on TCP between the store's coordinators, in the node protocol's frames
//! (`store::node::wire`) with a JSON body and the sender's index as the frame id.
//!
//! Messages are one way and may be lost, as in the models: a message that cannot be sent
//! (the peer is down, the link was cut) is dropped, and the protocol copes (the leader sends a
//! view again when it is not acked within `replica_ack_timeout`). One connection per peer
//! carries its messages in order; a broken one is dialled again for the next message.

use super::fleet::FleetMeter;
use super::machine::StoreData;
use crate::policy::NodeId;
use crate::protocol::{JoinView, Msg};
use crate::store::node::wire::{self, Frame, Wire};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Messages waiting for one peer at most; more are dropped (lost) rather than queued without
/// bound behind a peer that does not read.
const PEER_BACKLOG_MAX: usize = 1024;
/// How long a dial to a peer may take before the message is given up.
const DIAL_TIMEOUT_MS: u64 = 500;

/// What one coordinator tells another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerMsg {
    View { shard: u8, epoch: u8, members: u8, join: Option<JoinView> },
    ViewAck { shard: u8, epoch: u8 },
    Propose { shard: u8, evicted: NodeId, replacement: NodeId },
}

impl PeerMsg {
    /// The wire form of a protocol message between coordinators (`None` for any other).
    pub fn of(msg: &Msg<StoreData>) -> Option<PeerMsg> {
        Some(match *msg {
            Msg::View { shard, epoch, members, join } => PeerMsg::View { shard, epoch, members, join },
            Msg::ViewAck { shard, epoch } => PeerMsg::ViewAck { shard, epoch },
            Msg::Propose { shard, evicted, replacement } => PeerMsg::Propose { shard, evicted, replacement },
            _ => return None,
        })
    }

    pub fn into_msg(self) -> Msg<StoreData> {
        match self {
            PeerMsg::View { shard, epoch, members, join } => Msg::View { shard, epoch, members, join },
            PeerMsg::ViewAck { shard, epoch } => Msg::ViewAck { shard, epoch },
            PeerMsg::Propose { shard, evicted, replacement } => Msg::Propose { shard, evicted, replacement },
        }
    }
}

impl Wire for PeerMsg {
    fn encode(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("a peer message serializes");
    }

    fn decode(payload: &[u8]) -> io::Result<PeerMsg> {
        serde_json::from_slice(payload)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("malformed peer message: {e}")))
    }
}

/// Where a coordinator's messages to the others go: TCP links (the store), or a simulated
/// network (`store sim`). A message may be lost either way.
pub trait PeerChannel: Send + Sync {
    fn send(&self, to: u8, msg: PeerMsg);
}

impl PeerChannel for PeerLinks {
    fn send(&self, to: u8, msg: PeerMsg) {
        PeerLinks::send(self, to, msg);
    }
}

/// One coordinator's outgoing links: a queue and a writer task per peer.
pub struct PeerLinks {
    queues: Vec<Option<mpsc::Sender<PeerMsg>>>,
}

impl PeerLinks {
    /// Links from coordinator `me` to the peers listening at `addrs` (its own entry unused).
    /// Must be called inside the runtime that runs the writers.
    pub fn start(me: u8, addrs: &[SocketAddr]) -> PeerLinks {
        let queues = addrs
            .iter()
            .enumerate()
            .map(|(c, &addr)| {
                (c != usize::from(me)).then(|| {
                    let (tx, rx) = mpsc::channel(PEER_BACKLOG_MAX);
                    tokio::spawn(write_to_peer(me, addr, rx));
                    tx
                })
            })
            .collect();
        PeerLinks { queues }
    }

    /// Send `msg` to coordinator `to`; dropped (lost) if its queue is full or closed.
    pub fn send(&self, to: u8, msg: PeerMsg) {
        if let Some(Some(queue)) = self.queues.get(usize::from(to)) {
            let _ = queue.try_send(msg);
        }
    }
}

async fn write_to_peer(me: u8, addr: SocketAddr, mut rx: mpsc::Receiver<PeerMsg>) {
    let mut conn: Option<TcpStream> = None;
    while let Some(msg) = rx.recv().await {
        if conn.is_none() {
            let dial = tokio::time::timeout(Duration::from_millis(DIAL_TIMEOUT_MS), TcpStream::connect(addr));
            conn = match dial.await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    Some(stream)
                }
                _ => continue, // lost
            };
        }
        let stream = conn.as_mut().expect("connected above");
        if wire::write_frame(stream, &Frame { id: u64::from(me), body: msg }).await.is_err() {
            conn = None; // lost; the next message dials again
        }
    }
}

/// Accept peers on `listener` and hand each message to `deliver(from, msg)`, until `stopped`.
pub async fn serve(
    listener: TcpListener,
    peer_count: usize,
    deliver: impl Fn(u8, Msg<StoreData>) + Clone + Send + Sync + 'static,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let mut stream = tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => return,
            },
        };
        let (deliver, mut stopped) = (deliver.clone(), stopped.clone());
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    _ = stopped.wait_for(|s| *s) => return,
                    frame = wire::read_frame::<PeerMsg, _>(&mut stream) => frame,
                };
                match frame {
                    Ok(Some(Frame { id, body })) if (id as usize) < peer_count => {
                        deliver(id as u8, body.into_msg())
                    }
                    Ok(Some(Frame { id, .. })) => {
                        eprintln!(
                            "replicheck store: a peer message from coordinator {id}, which does not exist"
                        );
                        return;
                    }
                    Ok(None) => return,
                    Err(e) => {
                        eprintln!("replicheck store: peer link: {e}");
                        return;
                    }
                }
            }
        });
    }
}

/// Where a coordinator stands among several: its index (0 leads membership), every
/// coordinator's zone, and the addresses of their peer listeners ([`serve`]) with its own
/// listener. One coordinator alone has no peers.
pub struct Peering {
    pub me: u8,
    pub zones: Vec<u8>,
    /// One per coordinator (empty for one coordinator alone).
    pub addrs: Vec<SocketAddr>,
    pub listener: Option<std::net::TcpListener>,
    /// What the partitions and backends take from all the coordinators (one meter for all).
    pub fleet: Arc<FleetMeter>,
    /// The peers over a simulated network instead of `addrs` (`store sim`).
    pub simulated: Option<Arc<dyn PeerChannel>>,
}

impl Peering {
    pub fn alone(zone: u8) -> Peering {
        Peering {
            me: 0,
            zones: vec![zone],
            addrs: Vec::new(),
            listener: None,
            fleet: Arc::new(FleetMeter::new(1)),
            simulated: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_message_roundtrips_through_a_frame() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let join = JoinView { evicted: 1, replacement: 3, is_move: false, swapping: true };
        for msg in [
            Msg::View { shard: 2, epoch: 7, members: 0b1011, join: Some(join) },
            Msg::ViewAck { shard: 0, epoch: 255 },
            Msg::Propose { shard: 1, evicted: 2, replacement: 4 },
        ] {
            let peer = PeerMsg::of(&msg).expect("a peer message");
            let bytes = wire::encode_frame(&Frame { id: 1, body: peer });
            let frame: Frame<PeerMsg> = rt.block_on(wire::read_frame(&mut &bytes[..])).unwrap().unwrap();
            assert_eq!(frame.id, 1);
            assert_eq!(frame.body.into_msg(), msg);
        }
        assert_eq!(PeerMsg::of(&Msg::Ping), None);
    }
}
