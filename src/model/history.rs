//! The clients' history of one shard's register, and its linearizability check.
//!
//! Histories in a model are tiny (a handful of operations), so the check is an exhaustive
//! search over linearization orders with memoisation on (operations placed, register value).
//! An operation that never returned (the client gave up, its effect unknown) may take effect
//! at any point after its invocation, or never.

use arrayvec::ArrayVec;

/// Operations one history can hold: clients x operations per client.
pub const HISTORY_OPS_MAX: usize = crate::policy::CLIENT_COUNT_MAX * crate::policy::CLIENT_OPS_MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOp {
    Write(u8),
    /// A read, with the value it returned once it has.
    Read(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistOp {
    /// `client * CLIENT_OPS_MAX + seq`: operations are kept sorted by slot, so the same
    /// history hashes the same whichever client invoked first.
    pub slot: u8,
    pub client: u8,
    pub op: RegisterOp,
    /// Bit j: the operation in slot j had returned when this one was invoked. Only
    /// this relation is kept, not event times, so equal histories hash equally.
    pub after: u16,
    /// False while pending (forever, if the client gave up).
    pub returned: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct History {
    pub ops: ArrayVec<HistOp, HISTORY_OPS_MAX>,
}

impl History {
    /// Record the invocation of a client's `seq`-th operation. `op` is `Write(v)` or
    /// `Read(_)` (the value is set on return).
    pub fn invoke(&mut self, client: u8, seq: u8, op: RegisterOp) {
        assert!(self.pending(client).is_none(), "a client runs one operation at a time");
        assert!(usize::from(seq) < crate::policy::CLIENT_OPS_MAX);
        let slot = client * crate::policy::CLIENT_OPS_MAX as u8 + seq;
        let after = self.ops.iter().filter(|o| o.returned).fold(0u16, |m, o| m | (1 << o.slot));
        let at = self.ops.iter().position(|o| o.slot > slot).unwrap_or(self.ops.len());
        self.ops.insert(at, HistOp { slot, client, op, after, returned: false });
    }

    /// Record the return of `client`'s pending operation; `read_value` is what a read returned.
    pub fn ret(&mut self, client: u8, read_value: u8) {
        let i = self.pending(client).expect("a return matches a pending invocation");
        let op = &mut self.ops[i];
        op.returned = true;
        if let RegisterOp::Read(_) = op.op {
            op.op = RegisterOp::Read(read_value);
        }
    }

    fn pending(&self, client: u8) -> Option<usize> {
        self.ops.iter().position(|o| o.client == client && !o.returned)
    }

    /// Whether some order of the operations, consistent with real time and register
    /// semantics (initial value 0), explains every returned operation.
    pub fn linearizable(&self) -> bool {
        let n = self.ops.len();
        assert!(n <= 16);
        // `before[i]`, as a mask over indices: what returned before operation i was invoked.
        let before: Vec<u16> = self
            .ops
            .iter()
            .map(|o| {
                (0..n)
                    .fold(0u16, |m, j| if o.after & (1 << self.ops[j].slot) != 0 { m | (1 << j) } else { m })
            })
            .collect();
        let completed: u16 = (0..n).fold(0, |m, i| if self.ops[i].returned { m | (1 << i) } else { m });
        let mut seen = std::collections::HashSet::new();
        self.search(0, 0, completed, &before, &mut seen)
    }

    fn search(
        &self,
        placed: u16,
        value: u8,
        completed: u16,
        before: &[u16],
        seen: &mut std::collections::HashSet<(u16, u8)>,
    ) -> bool {
        if placed & completed == completed {
            return true;
        }
        if !seen.insert((placed, value)) {
            return false;
        }
        for (i, op) in self.ops.iter().enumerate() {
            let bit = 1u16 << i;
            if placed & bit != 0 || before[i] & !placed != 0 {
                continue;
            }
            let next_value = match op.op {
                RegisterOp::Write(v) => v,
                // A pending read has no observed value: placing it changes nothing; skip it.
                RegisterOp::Read(_) if !op.returned => continue,
                RegisterOp::Read(v) if v == value => value,
                RegisterOp::Read(_) => continue,
            };
            if self.search(placed | bit, next_value, completed, before, seen) {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_after_acknowledged_write_must_see_it() {
        let mut h = History::default();
        h.invoke(0, 0, RegisterOp::Write(1));
        h.ret(0, 0);
        h.invoke(1, 0, RegisterOp::Read(0));
        h.ret(1, 0);
        assert!(!h.linearizable(), "the write finished before the read began");
        let mut ok = History::default();
        ok.invoke(0, 0, RegisterOp::Write(1));
        ok.invoke(1, 0, RegisterOp::Read(0));
        ok.ret(1, 0);
        ok.ret(0, 0);
        assert!(ok.linearizable(), "concurrent: the read may precede the write");
    }

    #[test]
    fn a_pending_write_may_take_effect_late_or_never() {
        let mut h = History::default();
        h.invoke(0, 0, RegisterOp::Write(1));
        h.invoke(1, 0, RegisterOp::Read(0));
        h.ret(1, 1);
        h.invoke(1, 1, RegisterOp::Read(0));
        h.ret(1, 1);
        assert!(h.linearizable());
        let mut never = History::default();
        never.invoke(0, 0, RegisterOp::Write(1));
        never.invoke(1, 0, RegisterOp::Read(0));
        never.ret(1, 0);
        assert!(never.linearizable());
    }

    #[test]
    fn values_cannot_flip_back() {
        let mut h = History::default();
        h.invoke(0, 0, RegisterOp::Write(1));
        h.ret(0, 0);
        h.invoke(1, 0, RegisterOp::Read(0));
        h.ret(1, 1);
        h.invoke(1, 1, RegisterOp::Read(0));
        h.ret(1, 0);
        assert!(!h.linearizable());
    }
}
