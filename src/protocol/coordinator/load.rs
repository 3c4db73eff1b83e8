//! Load the coordinator learns from outside: the background writes on each partition.
//!
//! The coordinator keeps no clock and no memory of how long a burst has lasted. Traffic from
//! clients outside the model (a promotion's cohort) is an input: the router sees it as load,
//! and a driver reports what it sees now. The model's environment ends a burst at a moment the
//! checker chooses and reports the background after it; the store has no way to end a burst
//! and keeps the configured background.

use super::{Coordinator, Data};

impl<D: Data> Coordinator<D> {
    /// The background writes per tick the router sees on each partition changed.
    pub fn on_background(&mut self, background: &[u16]) {
        assert_eq!(background.len(), self.background.len(), "one background per partition");
        self.background.clear();
        self.background.extend(background.iter().copied());
    }
}
