//! What the shell remembers of idempotency tokens, per (token, key): the value a token's
//! write was first asked with, and the version it was first replicated at. The machine
//! decides the versions (`protocol`); this only guards the edge and watches the outcome.

use super::machine::TOKENS_MAX;
use crate::store::node::wire::StoredValue;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// A token's write: which one, on which key.
pub type TokenId = (Vec<u8>, Vec<u8>);

#[derive(Default)]
struct Seen {
    /// A digest of the value the write was first asked with (recorded with tokens on).
    value_digest: Option<u64>,
    /// The version it was first replicated at.
    first_version: Option<u64>,
}

/// At most `TOKENS_MAX` tokens; all are forgotten at once when a new one would exceed it.
#[derive(Default)]
pub struct Tokens {
    seen: HashMap<TokenId, Seen>,
}

impl Tokens {
    fn entry(&mut self, id: TokenId) -> &mut Seen {
        if self.seen.len() >= TOKENS_MAX && !self.seen.contains_key(&id) {
            self.seen.clear();
        }
        self.seen.entry(id).or_default()
    }

    /// A retry reuses its first attempt's version, so a token sent again with another value
    /// would be acknowledged and never stored: refused instead.
    pub fn check_value(&mut self, token: &[u8], key: &[u8], value: &StoredValue) -> Result<(), String> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        value.hash(&mut hasher);
        let digest = hasher.finish();
        let seen = self.entry((token.to_vec(), key.to_vec()));
        match seen.value_digest {
            Some(first) if first != digest => Err(format!(
                "token {} was first used with another value for this key: a token names one write (a retry sends the same value; a new write needs a new token)",
                String::from_utf8_lossy(token)
            )),
            Some(_) => Ok(()),
            None => {
                seen.value_digest = Some(digest);
                Ok(())
            }
        }
    }

    /// The token's write was replicated at `version`: the version it was first replicated
    /// at, if that is another one (the write takes effect twice: the policy keeps no tokens,
    /// or the machine forgot this one).
    pub fn replicated(&mut self, id: TokenId, version: u64) -> Option<u64> {
        let first = *self.entry(id).first_version.get_or_insert(version);
        (first != version).then_some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_keeps_its_first_value_and_its_first_version() {
        let mut t = Tokens::default();
        let v = |s: &str| Some(s.as_bytes().to_vec());
        assert!(t.check_value(b"t", b"k", &v("a")).is_ok());
        assert!(t.check_value(b"t", b"k", &v("a")).is_ok(), "a retry sends the same value");
        assert!(t.check_value(b"t", b"k", &v("b")).unwrap_err().contains("token t was first used"));
        assert!(t.check_value(b"t", b"other", &v("b")).is_ok(), "another key is another write");
        let id = (b"t".to_vec(), b"k".to_vec());
        assert_eq!(t.replicated(id.clone(), 7), None);
        assert_eq!(t.replicated(id.clone(), 7), None, "a retry at the same version");
        assert_eq!(t.replicated(id, 9), Some(7), "a duplicate effect names the first version");
    }

    #[test]
    fn past_the_limit_every_token_is_forgotten_at_once() {
        let mut t = Tokens::default();
        for i in 0..TOKENS_MAX as u64 {
            t.replicated((i.to_be_bytes().to_vec(), Vec::new()), i);
        }
        assert_eq!(t.seen.len(), TOKENS_MAX);
        assert_eq!(t.replicated((0u64.to_be_bytes().to_vec(), Vec::new()), 5), Some(0), "still known");
        t.replicated((b"new".to_vec(), Vec::new()), 1);
        assert_eq!(t.seen.len(), 1);
    }
}
