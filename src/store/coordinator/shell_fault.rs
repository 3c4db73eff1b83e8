//! Deliberate shell bugs (`REPLICHECK_SHELL_FAULT=NAME`): each makes the shell do something
//! the protocol's machine does not, so the tests can show that trace validation and `store sim`
//! catch such a bug.

/// A deliberate shell bug, for the tests that trace validation and `store sim` catch one
/// (`REPLICHECK_SHELL_FAULT=NAME`).
const SHELL_FAULT_ENV: &str = "REPLICHECK_SHELL_FAULT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellFault {
    /// Replies after the ack deadline are dropped, as the store did before its coordinator was
    /// the protocol's (`drop_late_replies`).
    DropLateReplies,
    /// A node's reply is delivered as another node's: the next one's (`wrong_node_replies`).
    WrongNodeReplies,
    /// The machine's clock runs twice as fast as time (`fast_clock`).
    FastClock,
}

impl ShellFault {
    /// The fault `REPLICHECK_SHELL_FAULT` names, if any.
    pub fn from_env() -> Result<Option<ShellFault>, String> {
        let Ok(name) = std::env::var(SHELL_FAULT_ENV) else { return Ok(None) };
        match name.as_str() {
            "drop_late_replies" => Ok(Some(ShellFault::DropLateReplies)),
            "wrong_node_replies" => Ok(Some(ShellFault::WrongNodeReplies)),
            "fast_clock" => Ok(Some(ShellFault::FastClock)),
            other => Err(format!(
                "{SHELL_FAULT_ENV}={other}: not a shell fault (drop_late_replies, wrong_node_replies, fast_clock)"
            )),
        }
    }
}
