//! Every policy decision the store makes, one small function each, each calling `src/policy`.
//!
//! The store never decides on its own: these functions are its only route to a decision, so
//! that logging each one (`store::decision`, for `replicheck conform`) changes one line each.

use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, Candidate, ClusterView, EvictionDecision, EvictionPolicy};
use crate::policy::{quorum, retry, Ticks};

pub fn quorum_reached(answers: usize, quorum: u8) -> bool {
    quorum::quorum_reached(answers, quorum)
}

/// The newest of the replies: `(version, index of the reply)`.
pub fn read_result(replies: &[(u64, usize)]) -> Option<(u64, usize)> {
    quorum::read_result(replies)
}

pub fn version_for_attempt(
    idempotency_tokens: bool,
    version_of_token: Option<u64>,
    next_version: u64,
) -> u64 {
    retry::version_for_attempt(idempotency_tokens, version_of_token, next_version)
}

pub fn health_after_deadline_miss(detection: FailureDetection) -> Option<Health> {
    detector::health_after_deadline_miss(detection)
}

pub fn health_from_silence(silence_ms: Ticks, suspect_after_ms: Ticks, dead_after_ms: Ticks) -> Health {
    detector::health_from_silence(silence_ms, suspect_after_ms, dead_after_ms)
}

pub fn health_after_hearing_from() -> Health {
    detector::health_after_hearing_from()
}

pub fn eviction(
    policy: EvictionPolicy,
    view: ClusterView,
    evicted_zone: u8,
    candidates: &[Candidate],
) -> EvictionDecision {
    eviction::decide_eviction(policy, view, evicted_zone, candidates)
}
