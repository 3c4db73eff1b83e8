//! The kill tests' clients: each writes or reads one random key at a time, without retries,
//! and records what it saw as a register history for `linearizable`.

#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use replicheck::lincheck::register::{RegisterInput, RegisterOutput};
use replicheck::lincheck::Operation;
use replicheck::store::coordinator::resp::{Client, ClientError};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];
/// A request's reply wait: longer than the tests' ack timeouts, so a timeout means a crash.
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;

pub type History = Vec<(String, Operation<RegisterInput, RegisterOutput>)>;

/// One client: a write or a read at a time, on a random key, until `stop`. Only attempts that
/// reached the coordinator are recorded (a refused connection has no effect).
pub fn client_loop(client: u64, addr: SocketAddr, epoch: Instant, seed: u64, stop: &AtomicBool) -> History {
    let mut rng = StdRng::seed_from_u64(seed ^ (client + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut history = Vec::new();
    let mut conn: Option<Client> = None;
    let mut writes: u64 = 0;
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    while !stop.load(Ordering::Relaxed) {
        let c = match &mut conn {
            Some(c) => c,
            None => match Client::connect_timeout(addr, Duration::from_millis(REQUEST_TIMEOUT_MS)) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        let key = KEYS[rng.random_range(0..KEYS.len())];
        let call_ns = now_ns();
        if rng.random_bool(0.5) {
            writes += 1;
            let value = ((client + 1) << 32) | writes;
            let result = c.set(key.as_bytes(), value.to_string().as_bytes(), None);
            let done = result.is_ok().then(now_ns);
            if !matches!(result, Ok(()) | Err(ClientError::Server(_))) {
                conn = None;
            }
            history.push((
                key.to_string(),
                Operation {
                    client,
                    call_ns,
                    return_ns: done,
                    input: RegisterInput::Write(Some(value)),
                    output: done.map(|_| RegisterOutput::WriteOk),
                },
            ));
        } else {
            match c.get(key.as_bytes()) {
                Ok(bytes) => {
                    let read = bytes.map(|b| String::from_utf8(b).unwrap().parse::<u64>().unwrap());
                    history.push((
                        key.to_string(),
                        Operation {
                            client,
                            call_ns,
                            return_ns: Some(now_ns()),
                            input: RegisterInput::Read,
                            output: Some(RegisterOutput::Read(read)),
                        },
                    ));
                }
                Err(ClientError::Server(_)) => {}
                Err(_) => conn = None,
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..4)));
    }
    history
}
